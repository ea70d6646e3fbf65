"""Anchor and class-list files, and the per-scale anchor masks.

Anchors are ``(N, 2)`` float32 arrays of ``(width, height)`` in input-image pixels, sorted by area
(smallest first), as in Darknet cfgs and keras-yolo3's ``model_data/*_anchors.txt`` files: one or more
lines of comma-separated numbers read as ``w,h`` pairs (``10,13,  16,30,  33,23``).
"""
from __future__ import annotations

import os
from typing import List, Optional, Sequence

import numpy as np

from yolo3.errors import FileFormatError, PathLike

# Darknet's COCO anchors for YOLOv3-416 and tiny YOLOv3 (identical to model_data/*.txt).
YOLO_ANCHORS = np.array([[10, 13], [16, 30], [33, 23], [30, 61], [62, 45], [59, 119],
                         [116, 90], [156, 198], [373, 326]], dtype=np.float32)
TINY_YOLO_ANCHORS = np.array([[10, 14], [23, 27], [37, 58], [81, 82], [135, 169], [344, 319]],
                             dtype=np.float32)


def default_masks(num_anchors: int) -> List[List[int]]:
    """Anchor indices used by each output scale, largest stride first.

    9 anchors -> ``[[6, 7, 8], [3, 4, 5], [0, 1, 2]]`` (strides 32, 16, 8);
    6 anchors -> ``[[3, 4, 5], [0, 1, 2]]`` (strides 32, 16). Any multiple of 3 works the same way.
    """
    if num_anchors <= 0 or num_anchors % 3:
        raise ValueError(f"default anchor masks need a positive multiple of 3 anchors, got {num_anchors}")
    scales = num_anchors // 3
    return [[3 * s + i for i in range(3)] for s in reversed(range(scales))]


def validate_masks(masks: Sequence[Sequence[int]], num_anchors: int) -> List[List[int]]:
    """Check that ``masks`` is a list of non-empty index lists into ``num_anchors`` anchors."""
    out = [[int(i) for i in m] for m in masks]
    if not out or any(not m for m in out):
        raise ValueError(f"anchor masks must be non-empty lists of indices, got {masks!r}")
    for m in out:
        for i in m:
            if not 0 <= i < num_anchors:
                raise ValueError(f"anchor mask index {i} is outside the {num_anchors} anchors")
    return out


def strides_for(num_scales: int) -> List[int]:
    """Output strides of a body with ``num_scales`` outputs: ``[32, 16, 8][:num_scales]``."""
    if not 1 <= num_scales <= 3:
        raise ValueError(f"a YOLOv3 body has 1 to 3 output scales, got {num_scales}")
    return [32, 16, 8][:num_scales]


def parse_anchors(text: str, path: Optional[PathLike] = None) -> np.ndarray:
    """Parse anchor-file text into a ``(N, 2)`` float32 array of ``(w, h)``."""
    values: List[float] = []
    for line_no, raw in enumerate(text.splitlines(), start=1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        for field in line.replace(",", " ").split():
            try:
                value = float(field)
            except ValueError:
                raise FileFormatError(path, f"anchor value {field!r} is not a number", line=line_no)
            if not np.isfinite(value) or value <= 0:
                raise FileFormatError(path, f"anchor value {field!r} must be a positive number",
                                      line=line_no)
            values.append(value)
        if len(values) % 2:
            raise FileFormatError(path, "odd number of anchor values: anchors are width,height pairs",
                                  line=line_no)
    if not values:
        raise FileFormatError(path, "no anchors found (expected comma-separated width,height pairs)")
    return np.asarray(values, dtype=np.float32).reshape(-1, 2)


def read_anchors(path: PathLike) -> np.ndarray:
    """Read an anchors file into a ``(N, 2)`` float32 array of ``(width, height)`` pixels."""
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except OSError as e:
        raise FileFormatError(path, f"cannot read anchors file: {e.strerror or e}")
    except UnicodeDecodeError:
        raise FileFormatError(path, "anchors file is not UTF-8 text")
    return parse_anchors(text, path)


def format_anchors(anchors: np.ndarray) -> str:
    """Anchors as one line ``w,h,  w,h, ...`` (integers when the values are whole)."""
    anchors = np.asarray(anchors, dtype=np.float64).reshape(-1, 2)

    def fmt(v: float) -> str:
        return str(int(round(v))) if abs(v - round(v)) < 1e-9 else f"{v:.2f}"

    return ",  ".join(f"{fmt(w)},{fmt(h)}" for w, h in anchors) + "\n"


def write_anchors(path: PathLike, anchors: np.ndarray) -> None:
    """Write anchors in the keras-yolo3 one-line format."""
    with open(path, "w", encoding="utf-8") as f:
        f.write(format_anchors(anchors))


def parse_classes(text: str, path: Optional[PathLike] = None) -> List[str]:
    """Parse class-list text: one name per line; blank lines only at the end."""
    lines = text.splitlines()
    while lines and not lines[-1].strip():
        lines.pop()
    names: List[str] = []
    seen = {}
    for line_no, raw in enumerate(lines, start=1):
        name = raw.strip()
        if not name:
            raise FileFormatError(path, "empty class name (blank line inside the class list)", line=line_no)
        if name in seen:
            raise FileFormatError(path, f"class name {name!r} repeats line {seen[name]}", line=line_no)
        seen[name] = line_no
        names.append(name)
    if not names:
        raise FileFormatError(path, "class list is empty")
    return names


def read_classes(path: PathLike) -> List[str]:
    """Read a classes file (one name per line) into a list; the class id is the line index."""
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except OSError as e:
        raise FileFormatError(path, f"cannot read classes file: {e.strerror or e}")
    except UnicodeDecodeError:
        raise FileFormatError(path, "classes file is not UTF-8 text")
    return parse_classes(text, path)


def write_classes(path: PathLike, names: Sequence[str]) -> None:
    """Write one class name per line."""
    with open(path, "w", encoding="utf-8") as f:
        f.write("".join(f"{n}\n" for n in names))


def default_anchors(model: str) -> np.ndarray:
    """Darknet's default COCO anchors for ``model`` in ``{'yolov3', 'tiny'}``."""
    if model == "yolov3":
        return YOLO_ANCHORS.copy()
    if model == "tiny":
        return TINY_YOLO_ANCHORS.copy()
    raise ValueError(f"unknown model {model!r}: expected 'yolov3' or 'tiny'")
