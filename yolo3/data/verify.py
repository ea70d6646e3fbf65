"""Full decode of image files with the training pipeline's own decoder, before training starts.

A header read (:func:`yolo3.data.images.probe_image`) accepts a truncated JPEG or a TIFF that the
pipeline (``tf.io.decode_image``) then fails on mid-epoch without naming the file. This module
decodes every file once with exactly the pipeline's call and names each failure. Files that decoded
are remembered by path, size and modification time in a small cache
(``$YOLO3_CACHE_DIR``, else ``$XDG_CACHE_HOME/yolo3``, else ``~/.cache/yolo3``), so a second run
does not decode them again.
"""
from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Dict, List, Optional, Sequence

from yolo3.errors import AnnotationError, ArgumentError, PathLike
from yolo3.fileio import write_text_atomic

__all__ = ["verify_images", "check_decodable", "cache_file", "PIPELINE_FORMATS"]

PIPELINE_FORMATS = "JPEG, PNG, BMP or GIF"


def cache_file() -> Path:
    """The cache of files known to decode."""
    root = os.environ.get("YOLO3_CACHE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache"), "yolo3")
    return Path(root) / "decoded-images.json"


def _stamp(path: str) -> Optional[str]:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return f"{st.st_size}:{st.st_mtime_ns}"


def _read_cache(path: Path) -> Dict[str, str]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        return data if isinstance(data, dict) else {}
    except (OSError, ValueError):
        return {}  # no cache, or a damaged one: decode again


def _write_cache(path: Path, known: Dict[str, str]) -> None:
    try:
        write_text_atomic(path, json.dumps(known))
    except OSError:
        pass  # a cache that cannot be written only costs time


def _decode(path: str) -> Optional[str]:
    """None when the pipeline's decoder reads ``path``, else the reason it does not."""
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


def verify_images(paths: Sequence[PathLike], progress: bool = True, use_cache: bool = True
                  ) -> List[AnnotationError]:
    """Decode every file of ``paths`` with the pipeline's decoder; one :class:`AnnotationError`
    naming the file per failure (an empty list when all decode). Shows a progress bar."""
    from tqdm import tqdm
    unique = list(dict.fromkeys(os.path.abspath(os.fspath(p)) for p in paths))
    store = cache_file()
    known = _read_cache(store) if use_cache else {}
    todo = [p for p in unique if known.get(p) is None or known.get(p) != _stamp(p)]
    failures: List[AnnotationError] = []
    for p in tqdm(todo, desc="checking images", unit="img", disable=not progress or not todo,
                  leave=False):
        reason = _decode(p)
        if reason is None:
            known[p] = _stamp(p)
        else:
            known.pop(p, None)
            failures.append(AnnotationError(p, reason))
    if use_cache and todo:
        _write_cache(store, known)
    return failures


def check_decodable(paths: Sequence[PathLike], progress: bool = True) -> None:
    """Raise :class:`~yolo3.errors.ArgumentError` naming (up to ten of) the files of ``paths`` that
    the pipeline cannot decode, so that a bad file is named before training, not met as a
    TensorFlow error mid-epoch (:func:`verify_images`, cached between runs)."""
    failures = verify_images(paths, progress=progress)
    if failures:
        shown = "\n  ".join(str(f) for f in failures[:10])
        more = f"\n  ... and {len(failures) - 10} more" if len(failures) > 10 else ""
        raise ArgumentError(f"{len(failures)} images cannot be used for training (yolo3 check "
                            f"lists them all):\n  {shown}{more}")
