"""Full decode of image files with the training pipeline's own decoder, before training starts.

A header read (:func:`yolo3.data.images.probe_image`) accepts a truncated JPEG or a TIFF that the
pipeline (``tf.io.decode_image``) then fails on mid-epoch without naming the file. This module
decodes every file once with exactly the pipeline's call and names each failure: tf.data's
decoder where TensorFlow imports (the stricter one, so either pipeline then reads every file),
the NumPy pipeline's (:func:`yolo3.data.image_ops.decode_image_np`) where it does not. Files that
decoded are remembered by path, size and modification time, per decoder
(:class:`yolo3.core.file_cache.FileCache`, under ``$YOLO3_CACHE_DIR``, else
``$XDG_CACHE_HOME/yolo3``, else ``~/.cache/yolo3``), so a second run does not decode them again.
"""
from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import List, Optional, Sequence

from yolo3.core.errors import AnnotationError, ArgumentError, PathLike
from yolo3.core.extras import installed
from yolo3.core.file_cache import FileCache
from yolo3.data.image_ops import decode_image_np

__all__ = ["verify_images", "check_decodable", "unchecked", "listed", "cache_file",
           "PIPELINE_FORMATS"]

PIPELINE_FORMATS = "JPEG, PNG, BMP or GIF"


CACHE_NAME = "decoded-images.json"
NUMPY_CACHE_NAME = "decoded-images-numpy.json"


def _cache_name() -> str:
    return CACHE_NAME if installed("tensorflow") else NUMPY_CACHE_NAME


def cache_file() -> Path:
    """The cache of files known to decode (by this machine's decoder)."""
    return FileCache(_cache_name(), enabled=False).path


def _decode(path: str) -> Optional[str]:
    """None when the pipeline's decoder reads ``path``, else the reason it does not."""
    if not installed("tensorflow"):
        return _decode_numpy(path)
    import tensorflow as tf
    try:
        data = tf.io.read_file(path)
        image = tf.io.decode_image(data, channels=3, expand_animations=False, dtype=tf.uint8)
    except tf.errors.NotFoundError:
        return "image file not found"
    except (tf.errors.InvalidArgumentError, tf.errors.UnknownError, tf.errors.DataLossError) as e:
        reason = e.message.splitlines()[0] if e.message else type(e).__name__
        if "Unknown image file format" in reason:
            reason = f"not a format the training pipeline decodes ({PIPELINE_FORMATS})"
        return f"the training pipeline cannot decode it: {reason}"
    if int(image.shape[0]) < 1 or int(image.shape[1]) < 1:
        return "image has no pixels"
    return None


def _decode_numpy(path: str) -> Optional[str]:
    """:func:`_decode` with the NumPy pipeline's decoder (OpenCV, then PIL)."""
    try:
        image = decode_image_np(path, 1)
    except AnnotationError as e:
        return f"the training pipeline cannot decode it: {e.reason}"
    if image.shape[0] < 1 or image.shape[1] < 1:
        return "image has no pixels"
    return None


def verify_images(paths: Sequence[PathLike], progress: bool = True, use_cache: bool = True,
                  workers: int = 2) -> List[AnnotationError]:
    """Decode every file of ``paths`` with the pipeline's decoder (``workers`` threads; files that
    decoded before, unchanged, are skipped); one :class:`AnnotationError` naming the file per
    failure (an empty list when all decode). Shows a progress bar."""
    from tqdm import tqdm
    unique = list(dict.fromkeys(os.path.abspath(os.fspath(p)) for p in paths))
    known = FileCache(_cache_name(), enabled=use_cache)
    todo = [p for p in unique if not known.get(p)]
    failures: List[AnnotationError] = []
    with ThreadPoolExecutor(max_workers=max(1, workers)) as pool, \
            tqdm(total=len(todo), desc="checking images", unit="img", leave=False,
                 disable=not progress or not todo) as bar:
        for p, reason in zip(todo, pool.map(_decode, todo)):
            if reason is None:
                known.put(p, True)
            else:
                known.forget(p)
                failures.append(AnnotationError(p, reason))
            bar.update(1)
    known.save()
    return failures


def unchecked(paths: Sequence[PathLike]) -> List[str]:
    """The files of ``paths`` not known (from an earlier check, unchanged since) to decode."""
    known = FileCache(_cache_name())
    return [p for p in dict.fromkeys(os.path.abspath(os.fspath(p)) for p in paths)
            if not known.get(p)]


def check_decodable(paths: Sequence[PathLike], progress: bool = True) -> None:
    """Raise :class:`~yolo3.core.errors.ArgumentError` naming (up to ten of) the files of ``paths``
    that the pipeline cannot decode, so that a bad file is named before training, not met as a
    TensorFlow error mid-epoch (:func:`verify_images`, cached between runs)."""
    failures = verify_images(paths, progress=progress)
    if failures:
        raise ArgumentError(f"{len(failures)} images cannot be used for training (yolo3 check "
                            f"lists them all):{listed(failures)}")


def listed(failures: Sequence[AnnotationError], shown: int = 10) -> str:
    """The first ``shown`` failures, one per indented line, and how many more there are."""
    more = f"\n  ... and {len(failures) - shown} more" if len(failures) > shown else ""
    return "".join(f"\n  {f}" for f in failures[:shown]) + more
