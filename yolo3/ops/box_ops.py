"""Box operations on tensors, in ``keras.ops`` (the same on every Keras backend): the twins of
:mod:`yolo3.ops.boxes` (same formats, same arithmetic, in the inputs' dtype; any leading shape)
that the losses and the decoding use. The input pipeline's own, in TensorFlow (tf.data runs it on
every backend), is in :mod:`yolo3.ops.targets`."""
from __future__ import annotations

import math

from keras import ops

__all__ = ["swap_last_pair", "box_iou", "iou_variant", "corners_to_cxcywh", "safe_divide"]


def swap_last_pair(t):
    """``(..., 2)`` ``(h, w)`` -> ``(w, h)`` (and back), as a flip: a negative-stride slice makes
    TF's layout optimiser log an error on every trace."""
    return ops.flip(ops.convert_to_tensor(t), axis=-1)


def safe_divide(numerator, denominator):
    """``numerator / denominator``, 0 where the denominator is 0 (gradients too: never NaN)."""
    nonzero = ops.not_equal(denominator, 0)
    return ops.where(nonzero, numerator / ops.where(nonzero, denominator,
                                                    ops.ones_like(denominator)),
                     ops.zeros_like(numerator))


def box_iou(b1, b2):
    """keras-yolo3's ``box_iou``: IoU of every box in ``b1`` with every box in ``b2``.

    b1: ``(i1, ..., iN, 4)`` as ``(cx, cy, w, h)``; b2: ``(j, 4)`` as ``(cx, cy, w, h)``.
    Returns ``(i1, ..., iN, j)``; 0 where a union is empty (never NaN).
    """
    b1 = ops.expand_dims(ops.convert_to_tensor(b1), -2)
    b2 = ops.convert_to_tensor(b2)
    b1_xy, b1_wh = b1[..., :2], b1[..., 2:4]
    b1_min, b1_max = b1_xy - b1_wh / 2.0, b1_xy + b1_wh / 2.0
    b2_xy, b2_wh = b2[..., :2], b2[..., 2:4]
    b2_min, b2_max = b2_xy - b2_wh / 2.0, b2_xy + b2_wh / 2.0
    inter_wh = ops.maximum(ops.minimum(b1_max, b2_max) - ops.maximum(b1_min, b2_min), 0.0)
    inter = inter_wh[..., 0] * inter_wh[..., 1]
    union = b1_wh[..., 0] * b1_wh[..., 1] + b2_wh[..., 0] * b2_wh[..., 1] - inter
    return safe_divide(inter, union)


def iou_variant(pred, true, kind: str):
    """IoU, GIoU, DIoU or CIoU of ``(..., 4)`` ``cx, cy, w, h`` boxes (same units on both axes);
    ``(..., 1)``. CIoU's ``alpha`` is held constant in the gradient."""
    eps = 1e-9
    p_min, p_max = pred[..., 0:2] - pred[..., 2:4] / 2, pred[..., 0:2] + pred[..., 2:4] / 2
    t_min, t_max = true[..., 0:2] - true[..., 2:4] / 2, true[..., 0:2] + true[..., 2:4] / 2
    inter_wh = ops.maximum(ops.minimum(p_max, t_max) - ops.maximum(p_min, t_min), 0.0)
    inter = inter_wh[..., 0:1] * inter_wh[..., 1:2]
    union = pred[..., 2:3] * pred[..., 3:4] + true[..., 2:3] * true[..., 3:4] - inter
    iou = inter / (union + eps)
    if kind == "iou":
        return iou
    enclose_wh = ops.maximum(ops.maximum(p_max, t_max) - ops.minimum(p_min, t_min), 0.0)
    if kind == "giou":
        enclose = enclose_wh[..., 0:1] * enclose_wh[..., 1:2]
        return iou - (enclose - union) / (enclose + eps)
    diagonal = ops.sum(ops.square(enclose_wh), axis=-1, keepdims=True)
    distance = ops.sum(ops.square(pred[..., 0:2] - true[..., 0:2]), axis=-1, keepdims=True)
    diou = iou - distance / (diagonal + eps)
    if kind == "diou":
        return diou
    v = (4.0 / math.pi ** 2) * ops.square(ops.arctan(true[..., 2:3] / (true[..., 3:4] + eps))
                                          - ops.arctan(pred[..., 2:3] / (pred[..., 3:4] + eps)))
    alpha = ops.stop_gradient(v / (1.0 - iou + v + eps))
    return diou - alpha * v


def corners_to_cxcywh(boxes):
    """``(..., 4)`` ``x1, y1, x2, y2`` -> ``cx, cy, w, h`` (what :func:`iou_variant` takes)."""
    return ops.concatenate([(boxes[..., 0:2] + boxes[..., 2:4]) / 2.0,
                            boxes[..., 2:4] - boxes[..., 0:2]], axis=-1)
