"""Box formats, IoU and the letterbox transform (pure functions).

Formats: ``xyxy`` = ``(x1, y1, x2, y2)`` corners; ``cxcywh`` = ``(cx, cy, w, h)`` centre and size.
NumPy versions work in float64 when given float64; TF versions take tensors of any leading shape.
"""
from __future__ import annotations

from typing import Tuple

import numpy as np
import tensorflow as tf


def swap_last_pair(t) -> tf.Tensor:
    """``(..., 2)`` ``(h, w)`` -> ``(w, h)`` (and back) without a negative-stride slice, which makes
    TF's layout optimiser log an error on every trace."""
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


def wh_iou_tf(wh1: tf.Tensor, wh2: tf.Tensor) -> tf.Tensor:
    """TF version of :func:`wh_iou`: ``(N, 2)`` x ``(M, 2)`` -> ``(N, M)``."""
    wh1 = tf.expand_dims(wh1, -2)
    inter = tf.reduce_prod(tf.minimum(wh1, wh2), axis=-1)
    union = tf.reduce_prod(wh1, axis=-1) + tf.reduce_prod(wh2, axis=-1) - inter
    return tf.math.divide_no_nan(inter, union)


def box_iou(b1: tf.Tensor, b2: tf.Tensor) -> tf.Tensor:
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


def letterbox_geometry(image_hw, input_hw) -> Tuple[tf.Tensor, tf.Tensor, tf.Tensor]:
    """Where an image of size ``image_hw`` lands when letterboxed into ``input_hw``.

    The image is resized with its aspect ratio kept to ``new_hw = round(image_hw * s)``,
    ``s = min(input_hw / image_hw)``, and placed at ``offset_hw = (input_hw - new_hw) // 2``.
    Works on ``(2,)`` or ``(batch, 2)`` tensors; returns float32 ``(new_hw, offset_hw, scale_hw)`` where
    ``scale_hw = new_hw / image_hw`` is the exact per-axis factor mapping image pixels to input pixels
    (``x_input = x_image * scale_w + offset_w``). Used by the validation pipeline, the detector and the
    decoding, so all three agree to the pixel.
    """
    image_hw = tf.cast(image_hw, tf.float32)
    input_hw = tf.cast(input_hw, tf.float32)
    scale = tf.reduce_min(input_hw / image_hw, axis=-1, keepdims=True)
    new_hw = tf.minimum(tf.maximum(tf.round(image_hw * scale), 1.0), input_hw)
    offset_hw = tf.floor((input_hw - new_hw) / 2.0)
    return new_hw, offset_hw, new_hw / image_hw


def letterbox_geometry_np(image_hw, input_hw) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
    """NumPy twin of :func:`letterbox_geometry` (same rounding), float64."""
    image_hw = np.asarray(image_hw, dtype=np.float64)
    input_hw = np.asarray(input_hw, dtype=np.float64)
    scale = np.min(input_hw / image_hw, axis=-1, keepdims=True)
    new_hw = np.minimum(np.maximum(np.round(image_hw * scale), 1.0), input_hw)
    offset_hw = np.floor((input_hw - new_hw) / 2.0)
    return new_hw, offset_hw, new_hw / image_hw
