"""Box formats and IoU (pure functions).

Formats: ``xyxy`` = ``(x1, y1, x2, y2)`` corners; ``cxcywh`` = ``(cx, cy, w, h)`` centre and size.
NumPy versions work in float64 when given float64; TF versions (TensorFlow imported on first use)
take tensors of any leading shape. The letterbox geometry lives in :mod:`yolo3.letterbox`.
"""
from __future__ import annotations

import numpy as np


def swap_last_pair(t):
    """``(..., 2)`` ``(h, w)`` -> ``(w, h)`` (and back) without a negative-stride slice, which makes
    TF's layout optimiser log an error on every trace."""
    import tensorflow as tf
    return tf.reverse(tf.convert_to_tensor(t), axis=[-1])


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


def iou_xyxy(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Pairwise IoU of ``(N, 4)`` and ``(M, 4)`` corner boxes -> ``(N, M)``; 0 where a union is empty."""
    a = np.asarray(a, dtype=np.float64).reshape(-1, 4)
    b = np.asarray(b, dtype=np.float64).reshape(-1, 4)
    lt = np.maximum(a[:, None, :2], b[None, :, :2])
    rb = np.minimum(a[:, None, 2:], b[None, :, 2:])
    inter = np.prod(np.clip(rb - lt, 0, None), axis=-1)
    area_a = np.prod(np.clip(a[:, 2:] - a[:, :2], 0, None), axis=-1)
    area_b = np.prod(np.clip(b[:, 2:] - b[:, :2], 0, None), axis=-1)
    union = area_a[:, None] + area_b[None, :] - inter
    return np.where(union > 0, inter / np.where(union > 0, union, 1), 0.0)


def wh_iou(wh1: np.ndarray, wh2: np.ndarray) -> np.ndarray:
    """IoU of box shapes compared centred: ``(N, 2)`` x ``(M, 2)`` -> ``(N, M)``."""
    wh1 = np.asarray(wh1, dtype=np.float64).reshape(-1, 1, 2)
    wh2 = np.asarray(wh2, dtype=np.float64).reshape(1, -1, 2)
    inter = np.prod(np.minimum(wh1, wh2), axis=-1)
    union = np.prod(wh1, axis=-1) + np.prod(wh2, axis=-1) - inter
    return np.where(union > 0, inter / np.where(union > 0, union, 1), 0.0)


def wh_iou_tf(wh1, wh2):
    """TF version of :func:`wh_iou` (same arithmetic, in the inputs' dtype): ``(N, 2)`` x ``(M, 2)``
    -> ``(N, M)``, 0 where a union is empty or not a number (a NaN box matches nothing)."""
    import tensorflow as tf
    wh1 = tf.expand_dims(wh1, -2)
    inter = tf.reduce_prod(tf.minimum(wh1, wh2), axis=-1)
    union = tf.reduce_prod(wh1, axis=-1) + tf.reduce_prod(wh2, axis=-1) - inter
    positive = union > 0
    return tf.where(positive, inter / tf.where(positive, union, tf.ones_like(union)),
                    tf.zeros_like(union))


def box_iou(b1, b2):
    """keras-yolo3's ``box_iou``: IoU of every box in ``b1`` with every box in ``b2``.

    b1: ``(i1, ..., iN, 4)`` as ``(cx, cy, w, h)``; b2: ``(j, 4)`` as ``(cx, cy, w, h)``.
    Returns ``(i1, ..., iN, j)``; 0 where a union is empty (never NaN).
    """
    import tensorflow as tf
    b1 = tf.expand_dims(b1, -2)
    b1_xy, b1_wh = b1[..., :2], b1[..., 2:4]
    b1_min, b1_max = b1_xy - b1_wh / 2.0, b1_xy + b1_wh / 2.0
    b2_xy, b2_wh = b2[..., :2], b2[..., 2:4]
    b2_min, b2_max = b2_xy - b2_wh / 2.0, b2_xy + b2_wh / 2.0
    inter_wh = tf.maximum(tf.minimum(b1_max, b2_max) - tf.maximum(b1_min, b2_min), 0.0)
    inter = inter_wh[..., 0] * inter_wh[..., 1]
    union = b1_wh[..., 0] * b1_wh[..., 1] + b2_wh[..., 0] * b2_wh[..., 1] - inter
    return tf.math.divide_no_nan(inter, union)
