"""Box operations on tensors: the TensorFlow twins of :mod:`yolo3.ops.boxes` (same formats, same
arithmetic, in the inputs' dtype; any leading shape)."""
from __future__ import annotations

import math

import tensorflow as tf

__all__ = ["swap_last_pair", "wh_iou_tf", "box_iou", "iou_variant", "corners_to_cxcywh"]


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


def iou_variant(pred: tf.Tensor, true: tf.Tensor, kind: str) -> tf.Tensor:
    """IoU, GIoU, DIoU or CIoU of ``(..., 4)`` ``cx, cy, w, h`` boxes (same units on both axes);
    ``(..., 1)``. CIoU's ``alpha`` is held constant in the gradient."""
    eps = 1e-9
    p_min, p_max = pred[..., 0:2] - pred[..., 2:4] / 2, pred[..., 0:2] + pred[..., 2:4] / 2
    t_min, t_max = true[..., 0:2] - true[..., 2:4] / 2, true[..., 0:2] + true[..., 2:4] / 2
    inter_wh = tf.maximum(tf.minimum(p_max, t_max) - tf.maximum(p_min, t_min), 0.0)
    inter = inter_wh[..., 0:1] * inter_wh[..., 1:2]
    union = pred[..., 2:3] * pred[..., 3:4] + true[..., 2:3] * true[..., 3:4] - inter
    iou = inter / (union + eps)
    if kind == "iou":
        return iou
    enclose_wh = tf.maximum(tf.maximum(p_max, t_max) - tf.minimum(p_min, t_min), 0.0)
    if kind == "giou":
        enclose = enclose_wh[..., 0:1] * enclose_wh[..., 1:2]
        return iou - (enclose - union) / (enclose + eps)
    diagonal = tf.reduce_sum(tf.square(enclose_wh), axis=-1, keepdims=True)
    distance = tf.reduce_sum(tf.square(pred[..., 0:2] - true[..., 0:2]), axis=-1, keepdims=True)
    diou = iou - distance / (diagonal + eps)
    if kind == "diou":
        return diou
    v = (4.0 / math.pi ** 2) * tf.square(tf.atan(true[..., 2:3] / (true[..., 3:4] + eps))
                                         - tf.atan(pred[..., 2:3] / (pred[..., 3:4] + eps)))
    alpha = tf.stop_gradient(v / (1.0 - iou + v + eps))
    return diou - alpha * v


def corners_to_cxcywh(boxes):
    """``(..., 4)`` ``x1, y1, x2, y2`` -> ``cx, cy, w, h`` (what :func:`iou_variant` takes)."""
    return tf.concat([(boxes[..., 0:2] + boxes[..., 2:4]) / 2.0,
                      boxes[..., 2:4] - boxes[..., 0:2]], axis=-1)
