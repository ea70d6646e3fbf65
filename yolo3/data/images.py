"""Image files: loading (EXIF-transposed RGB uint8), header probing, and EXIF orientation.

Box coordinates everywhere in yolo3 refer to the image as displayed, i.e. after the EXIF
orientation is applied (what :func:`PIL.ImageOps.exif_transpose` returns).
"""
from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from typing import List, Sequence, Tuple

import numpy as np
from PIL import Image, ImageOps, UnidentifiedImageError

from yolo3.core.errors import AnnotationError, PathLike
from yolo3.core.file_cache import FileCache

EXIF_ORIENTATION_TAG = 0x0112
DECODED_EXTENSIONS = (".jpg", ".jpeg", ".png", ".bmp", ".gif")  # what the training pipeline decodes
HEADER_CACHE = "image-headers.json"  # (h, w, orientation) of images probed before
# Orientations 5..8 swap width and height.
_SWAPS_AXES = {5, 6, 7, 8}
# The most pixels an image may have (PIL's own refusal, twice its warning level: about 13400 x
# 13400): a header claiming more is refused before anything is decoded, as a decompression bomb
# would be (a 20000 x 20000 PNG of a few kilobytes takes 1.2 GB decoded).
MAX_IMAGE_PIXELS = 2 * 89_478_485


def _refuse_oversized(path: PathLike, w: int, h: int) -> None:
    if w * h > MAX_IMAGE_PIXELS:
        raise AnnotationError(path, f"image of {w} x {h} pixels is over the limit of "
                                    f"{MAX_IMAGE_PIXELS} pixels (a decompression bomb, or an "
                                    "image to cut into tiles first)")


def _open(path: PathLike) -> Image.Image:
    """``Image.open(path)`` with PIL's own pixel limit turned into our named refusal."""
    try:
        im = Image.open(path)
    except Image.DecompressionBombError:
        raise AnnotationError(path, f"image is over the limit of {MAX_IMAGE_PIXELS} pixels (a "
                                    "decompression bomb, or an image to cut into tiles first)"
                              ) from None
    try:
        _refuse_oversized(path, *im.size)
    except AnnotationError:
        im.close()
        raise
    return im


def load_image(path: PathLike) -> np.ndarray:
    """Read an image file as ``(h, w, 3)`` uint8 RGB, EXIF-transposed (grayscale/RGBA/palette -> RGB).

    Raises :class:`AnnotationError` naming the file when it is missing or unreadable.
    """
    try:
        with _open(path) as im:
            im.load()
            ImageOps.exif_transpose(im, in_place=True)  # no copies of an RGB image: half the time
            if im.mode in ("I;16", "I;16B", "I;16L", "I"):
                # 16-bit samples keep their high byte, as tf.io.decode_image(dtype=uint8) does in
                # the training pipeline: a 12-bit image stays dark in both, not stretched in one
                arr = np.clip(np.asarray(im, dtype=np.int64) >> 8, 0, 255).astype(np.uint8)
                return np.repeat(arr[..., None], 3, axis=-1)
            return np.asarray(im if im.mode == "RGB" else im.convert("RGB"), dtype=np.uint8)
    except AnnotationError:
        raise
    except FileNotFoundError:
        raise AnnotationError(path, "image file not found")
    except (UnidentifiedImageError, OSError, SyntaxError, ValueError) as e:
        raise AnnotationError(path, f"cannot read image: {e}")


def probe_image(path: PathLike) -> Tuple[Tuple[int, int], int]:
    """``((height, width), exif_orientation)`` of an image, reading only its header.

    The size is the displayed size (width and height swapped for orientations 5-8).
    Raises :class:`AnnotationError` when the file is missing or not a readable image.
    """
    try:
        with _open(path) as im:
            w, h = im.size
            orientation = 1
            if im.format in ("JPEG", "MPO", "TIFF", "WEBP", "PNG"):
                try:
                    orientation = int(im.getexif().get(EXIF_ORIENTATION_TAG, 1) or 1)
                except Exception:  # a broken EXIF block: PIL's exif_transpose ignores it too
                    orientation = 1
            if not 1 <= orientation <= 8:
                orientation = 1
    except AnnotationError:
        raise
    except FileNotFoundError:
        raise AnnotationError(path, "image file not found")
    except (UnidentifiedImageError, OSError, SyntaxError, ValueError) as e:
        raise AnnotationError(path, f"cannot read image: {e}")
    if orientation in _SWAPS_AXES:
        w, h = h, w
    return (h, w), orientation


def _probe_or_error(path: PathLike):
    try:
        return probe_image(path)
    except AnnotationError as e:
        return e


def probe_images(paths: Sequence[PathLike], workers: int = 8, errors: bool = False,
                 use_cache: bool = True) -> List:
    """:func:`probe_image` over many files with a thread pool (header reads are I/O bound).

    With ``errors=True`` a failing file gives its :class:`AnnotationError` in the list instead of
    raising. Headers read before from unchanged files come from a cache
    (:class:`yolo3.core.file_cache.FileCache`), so a second run over a large set reads none.
    """
    fn = _probe_or_error if errors else probe_image
    cache = FileCache(HEADER_CACHE, enabled=use_cache and len(paths) >= 16)
    keys = [os.path.abspath(os.fspath(p)) for p in paths]
    results: List = [None] * len(paths)
    todo = []
    for k, key in enumerate(keys):
        hit = cache.get(key)
        if hit is not None:
            results[k] = ((int(hit[0]), int(hit[1])), int(hit[2]))
        else:
            todo.append(k)
    if len(todo) < 16:
        probed = [fn(paths[k]) for k in todo]
    else:
        with ThreadPoolExecutor(max_workers=workers) as pool:
            probed = list(pool.map(fn, [paths[k] for k in todo]))
    for k, result in zip(todo, probed):
        results[k] = result
        if not isinstance(result, AnnotationError):
            (h, w), orientation = result
            cache.put(keys[k], [h, w, orientation])
    cache.save()
    return results


def exif_orientation(path: PathLike) -> int:
    """EXIF orientation (1-8) of an image file; 1 when absent."""
    return probe_image(path)[1]


def is_image_file(path: PathLike) -> bool:
    """True when ``path`` has an image extension yolo3's pipeline decodes (JPEG, PNG, BMP, GIF)."""
    return os.path.splitext(os.fspath(path))[1].lower() in DECODED_EXTENSIONS
