"""Box formats and IoU (pure functions).

Formats: ``xyxy`` = ``(x1, y1, x2, y2)`` corners; ``cxcywh`` = ``(cx, cy, w, h)`` centre and size.
NumPy, in float64 when given float64; the TensorFlow twins are :mod:`yolo3.ops.box_ops`. The
letterbox geometry lives in :mod:`yolo3.ops.letterbox`. No TensorFlow here.
"""
from __future__ import annotations

import numpy as np


def xyxy_to_cxcywh(boxes: np.ndarray) -> np.ndarray:
    """``(..., 4)`` corners -> ``(..., 4)`` centre/size (exact centre ``(x1 + x2) / 2``)."""
    boxes = np.asarray(boxes)
    xy = (boxes[..., 0:2] + boxes[..., 2:4]) / 2
    wh = boxes[..., 2:4] - boxes[..., 0:2]
    return np.concatenate([xy, wh], axis=-1)


def cxcywh_to_xyxy(boxes: np.ndarray) -> np.ndarray:
    """``(..., 4)`` centre/size -> ``(..., 4)`` corners."""
    boxes = np.asarray(boxes)
    half = boxes[..., 2:4] / 2
    return np.concatenate([boxes[..., 0:2] - half, boxes[..., 0:2] + half], axis=-1)


def _overlaps(a: np.ndarray, b: np.ndarray, plus_one: bool = False):
    """``(intersection (N, M), area of a (N,), area of b (M,))``; ``plus_one``: the corners are
    inclusive pixel indices (Pascal VOC's devkit: a box ``1..10`` is 10 pixels wide)."""
    a = np.asarray(a, dtype=np.float64).reshape(-1, 4)
    b = np.asarray(b, dtype=np.float64).reshape(-1, 4)
    one = 1.0 if plus_one else 0.0
    lt = np.maximum(a[:, None, :2], b[None, :, :2])
    rb = np.minimum(a[:, None, 2:], b[None, :, 2:])
    inter = np.prod(np.clip(rb - lt + one, 0, None), axis=-1)
    area_a = np.prod(np.clip(a[:, 2:] - a[:, :2] + one, 0, None), axis=-1)
    area_b = np.prod(np.clip(b[:, 2:] - b[:, :2] + one, 0, None), axis=-1)
    return inter, area_a, area_b


def iou_xyxy(a: np.ndarray, b: np.ndarray, plus_one: bool = False) -> np.ndarray:
    """Pairwise IoU of ``(N, 4)`` and ``(M, 4)`` corner boxes -> ``(N, M)``; 0 where a union is
    empty. ``plus_one``: VOC's inclusive pixel indices (widths ``x2 - x1 + 1``)."""
    inter, area_a, area_b = _overlaps(a, b, plus_one)
    union = area_a[:, None] + area_b[None, :] - inter
    return np.where(union > 0, inter / np.where(union > 0, union, 1), 0.0)


def ioa_xyxy(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Pairwise intersection over the area of the first box, ``(N, 4)`` x ``(M, 4)`` -> ``(N, M)``
    (how much of each ``a`` lies inside each ``b``: pycocotools' IoU with a crowd region); 0 where
    an ``a`` has no area."""
    inter, area_a, _ = _overlaps(a, b)
    return np.where(area_a[:, None] > 0, inter / np.where(area_a > 0, area_a, 1)[:, None], 0.0)


def wh_iou(wh1: np.ndarray, wh2: np.ndarray) -> np.ndarray:
    """IoU of box shapes compared centred: ``(N, 2)`` x ``(M, 2)`` -> ``(N, M)``."""
    wh1 = np.asarray(wh1, dtype=np.float64).reshape(-1, 1, 2)
    wh2 = np.asarray(wh2, dtype=np.float64).reshape(1, -1, 2)
    inter = np.prod(np.minimum(wh1, wh2), axis=-1)
    union = np.prod(wh1, axis=-1) + np.prod(wh2, axis=-1) - inter
    return np.where(union > 0, inter / np.where(union > 0, union, 1), 0.0)
