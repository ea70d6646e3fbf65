"""The letterbox: fit an image into the network input keeping its aspect ratio, pad the rest gray.

One geometry and one pad value for the training pipeline (validation images), the detector and the
exported models, so that all of them feed the network the same pixels and map boxes back alike:

- the image of size ``image_hw`` is resized (bilinear, on float RGB in [0, 1]) to
  ``new_hw = round(image_hw * s)``, ``s = min(input_hw / image_hw)``, and placed at
  ``offset_hw = floor((input_hw - new_hw) / 2)``;
- the rest is :data:`PAD_VALUE` gray, 128/255 (keras-yolo3's ``(128, 128, 128)``; a uint8 128
  exactly, so uint8 and float inputs give the same canvas);
- a point maps as ``x_input = x_image * scale_w + offset_w`` with ``scale = new_hw / image_hw``.

The ``*_tf`` functions run inside tf.data and TensorFlow graphs (TensorFlow on every Keras
backend); :func:`letterbox` and :func:`geometry_ops` are ``keras.ops`` (the detector on JAX and
PyTorch), :func:`letterbox_np` takes and gives NumPy arrays on any backend. TensorFlow is imported
only by the TensorFlow functions.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Tuple

import numpy as np

if TYPE_CHECKING:  # TensorFlow is imported by the *_tf functions only, when they run
    import tensorflow as tf

PAD_VALUE = 128.0 / 255.0

__all__ = ["PAD_VALUE", "geometry", "geometry_np", "geometry_ops", "letterbox", "letterbox_tf",
           "letterbox_np", "boxes_to_input", "boxes_to_image_np", "to_float_image"]


def geometry(image_hw, input_hw) -> Tuple[tf.Tensor, tf.Tensor, tf.Tensor]:
    """Where an image of size ``image_hw`` lands in ``input_hw``: float32 ``(new_hw, offset_hw,
    scale_hw)`` for ``(2,)`` or ``(batch, 2)`` inputs (see the module docstring). TensorFlow."""
    import tensorflow as tf
    image_hw = tf.cast(image_hw, tf.float32)
    input_hw = tf.cast(input_hw, tf.float32)
    scale = tf.reduce_min(input_hw / image_hw, axis=-1, keepdims=True)
    new_hw = tf.minimum(tf.maximum(tf.round(image_hw * scale), 1.0), input_hw)
    offset_hw = tf.floor((input_hw - new_hw) / 2.0)
    return new_hw, offset_hw, new_hw / image_hw


def geometry_np(image_hw, input_hw) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
    """NumPy twin of :func:`geometry` (same rounding), float64."""
    image_hw = np.asarray(image_hw, dtype=np.float64)
    input_hw = np.asarray(input_hw, dtype=np.float64)
    scale = np.min(input_hw / image_hw, axis=-1, keepdims=True)
    new_hw = np.minimum(np.maximum(np.round(image_hw * scale), 1.0), input_hw)
    offset_hw = np.floor((input_hw - new_hw) / 2.0)
    return new_hw, offset_hw, new_hw / image_hw


def geometry_ops(image_hw, input_hw):
    """``keras.ops`` twin of :func:`geometry` (same rounding: half to even), float32."""
    from keras import ops  # here: the NumPy geometry (the input pipelines') needs no Keras
    image_hw = ops.cast(image_hw, "float32")
    input_hw = ops.cast(input_hw, "float32")
    scale = ops.min(input_hw / image_hw, axis=-1, keepdims=True)
    new_hw = ops.minimum(ops.maximum(ops.round(image_hw * scale), 1.0), input_hw)
    offset_hw = ops.floor((input_hw - new_hw) / 2.0)
    return new_hw, offset_hw, new_hw / image_hw


def to_float_image(image: tf.Tensor) -> tf.Tensor:
    """uint8 RGB 0..255 -> float32 [0, 1]; a floating image is taken as [0, 1] already."""
    import tensorflow as tf
    if image.dtype == tf.uint8:
        return tf.cast(image, tf.float32) / 255.0
    return tf.cast(image, tf.float32)


def letterbox_tf(image: tf.Tensor, input_hw) -> tf.Tensor:
    """Letterbox one ``(h, w, 3)`` image (uint8, or float in [0, 1]) to float32 ``(in_h, in_w, 3)``."""
    import tensorflow as tf
    x = to_float_image(tf.convert_to_tensor(image))
    input_hw = tf.cast(input_hw, tf.int32)
    new_hw, offset_hw, _ = geometry(tf.shape(x)[:2], input_hw)
    new_hw = tf.cast(new_hw, tf.int32)
    offset = tf.cast(offset_hw, tf.int32)
    x = tf.image.resize(x, new_hw, method="bilinear")
    pads = tf.stack([tf.stack([offset[0], input_hw[0] - new_hw[0] - offset[0]]),
                     tf.stack([offset[1], input_hw[1] - new_hw[1] - offset[1]]),
                     tf.constant([0, 0])])
    x = tf.pad(x, pads, constant_values=PAD_VALUE)
    static = tf.get_static_value(input_hw)
    return tf.ensure_shape(x, [None, None, 3] if static is None else [int(static[0]),
                                                                        int(static[1]), 3])


def letterbox(image, input_hw: Tuple[int, int]):
    """:func:`letterbox_tf` in ``keras.ops`` (eager, any backend): one ``(h, w, 3)`` image (uint8,
    or float in [0, 1]) -> float32 ``(in_h, in_w, 3)``. Bilinear without antialiasing, as
    TensorFlow's resize (on TensorFlow it is that op; JAX's and PyTorch's agree within 2e-5)."""
    from keras import ops
    image = np.asarray(image)
    x = image.astype(np.float32) / 255.0 if image.dtype == np.uint8 else image.astype(np.float32)
    in_h, in_w = (int(v) for v in input_hw)
    new_hw, offset_hw, _ = geometry_np(x.shape[:2], (in_h, in_w))
    (new_h, new_w), (top, left) = new_hw.astype(int), offset_hw.astype(int)
    x = ops.image.resize(x, (new_h, new_w), interpolation="bilinear", antialias=False,
                         data_format="channels_last")
    return ops.pad(x, [[top, in_h - new_h - top], [left, in_w - new_w - left], [0, 0]],
                   constant_values=PAD_VALUE)


def letterbox_np(image: np.ndarray, input_hw: Tuple[int, int]) -> np.ndarray:
    """:func:`letterbox` for a NumPy ``(h, w, 3)`` image; returns float32 ``(H, W, 3)``."""
    from keras import ops
    return np.asarray(ops.convert_to_numpy(letterbox(image, input_hw)), np.float32)


def boxes_to_input(boxes: tf.Tensor, image_hw, input_hw) -> tf.Tensor:
    """``(n, 5)`` pixel boxes ``x1, y1, x2, y2, class`` of the image -> the same boxes on the
    letterboxed input (clipped to it). TensorFlow (the input pipeline's)."""
    import tensorflow as tf
    _, offset_hw, scale_hw = geometry(image_hw, input_hw)
    hw = tf.cast(input_hw, tf.float32)
    sy, sx, oy, ox = scale_hw[0], scale_hw[1], offset_hw[0], offset_hw[1]
    return tf.stack([tf.clip_by_value(boxes[:, 0] * sx + ox, 0.0, hw[1]),
                     tf.clip_by_value(boxes[:, 1] * sy + oy, 0.0, hw[0]),
                     tf.clip_by_value(boxes[:, 2] * sx + ox, 0.0, hw[1]),
                     tf.clip_by_value(boxes[:, 3] * sy + oy, 0.0, hw[0]),
                     boxes[:, 4]], axis=1)


def boxes_to_image_np(boxes: np.ndarray, image_hw, input_hw) -> np.ndarray:
    """``(n, 4)`` boxes ``x1, y1, x2, y2`` on the letterboxed input -> the original image's pixels,
    clipped to it (the inverse of :func:`boxes_to_input`), float32."""
    _, offset, scale = geometry_np(image_hw, input_hw)
    oy, ox, sy, sx = offset[0], offset[1], scale[0], scale[1]
    out = (np.asarray(boxes, np.float64).reshape(-1, 4) - [ox, oy, ox, oy]) / [sx, sy, sx, sy]
    h, w = image_hw[0], image_hw[1]
    return np.clip(out, 0, [w, h, w, h]).astype(np.float32)
