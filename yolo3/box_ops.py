"""Box operations on tensors: the TensorFlow twins of :mod:`yolo3.boxes` (same formats, same
arithmetic, in the inputs' dtype; any leading shape)."""
from __future__ import annotations

import tensorflow as tf

__all__ = ["swap_last_pair", "wh_iou_tf", "box_iou"]


def swap_last_pair(t):
    """``(..., 2)`` ``(h, w)`` -> ``(w, h)`` (and back) without a negative-stride slice, which makes
    TF's layout optimiser log an error on every trace."""
    return tf.reverse(tf.convert_to_tensor(t), axis=[-1])


def wh_iou_tf(wh1, wh2):
    """TF version of :func:`wh_iou` (same arithmetic, in the inputs' dtype): ``(N, 2)`` x ``(M, 2)``
    -> ``(N, M)``, 0 where a union is empty or not a number (a NaN box matches nothing)."""
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
    b1 = tf.expand_dims(b1, -2)
    b1_xy, b1_wh = b1[..., :2], b1[..., 2:4]
    b1_min, b1_max = b1_xy - b1_wh / 2.0, b1_xy + b1_wh / 2.0
    b2_xy, b2_wh = b2[..., :2], b2[..., 2:4]
    b2_min, b2_max = b2_xy - b2_wh / 2.0, b2_xy + b2_wh / 2.0
    inter_wh = tf.maximum(tf.minimum(b1_max, b2_max) - tf.maximum(b1_min, b2_min), 0.0)
    inter = inter_wh[..., 0] * inter_wh[..., 1]
    union = b1_wh[..., 0] * b1_wh[..., 1] + b2_wh[..., 0] * b2_wh[..., 1] - inter
    return tf.math.divide_no_nan(inter, union)
