"""The augmentation's image operations in TensorFlow (the tf.data pipeline's), applying what
:mod:`yolo3.data.planner` drew; the NumPy/OpenCV twins are :mod:`yolo3.data.image_ops`.

Images are float32 RGB in ``[0, 1]`` ``(h, w, 3)``. The recipe is keras-yolo3's
``get_random_data``: resize, place on a gray (0.5) canvas of the input size (cropping what falls
outside), HSV distortion, horizontal flip; optional 4-image mosaic.
"""
from __future__ import annotations

from typing import Sequence, Tuple

import numpy as np
import tensorflow as tf

from yolo3.data.planner import (
    AugmentConfig,
    AugmentDraw,
    augment_boxes,
    draw_augment,
    keep_larger_than,
    letterbox_boxes,
    mosaic_boxes,
)
from yolo3.ops.letterbox import PAD_VALUE, letterbox_tf

__all__ = ["AugmentConfig", "visible_part", "place_on_canvas", "distort_hsv", "augment_image",
           "mosaic_images"]


def visible_part(image: tf.Tensor, new_hw: tf.Tensor, offset_hw: tf.Tensor,
                 input_hw: tf.Tensor) -> Tuple[tf.Tensor, tf.Tensor]:
    """The part of ``image`` resized to ``new_hw`` that lands on the canvas, and the padding around it.

    Returns ``(crop (ch, cw, 3), paddings (3, 2) int32)``: ``tf.pad(crop, paddings)`` is the canvas.
    """
    resized = tf.image.resize(image, new_hw, method="bilinear")
    H, W = input_hw[0], input_hw[1]
    dy, dx = offset_hw[0], offset_hw[1]
    sy, sx = tf.maximum(-dy, 0), tf.maximum(-dx, 0)
    ty, tx = tf.maximum(dy, 0), tf.maximum(dx, 0)
    ch = tf.maximum(tf.minimum(new_hw[0] - sy, H - ty), 0)
    cw = tf.maximum(tf.minimum(new_hw[1] - sx, W - tx), 0)
    crop = resized[sy:sy + ch, sx:sx + cw, :]
    return crop, tf.stack([[ty, H - ty - ch], [tx, W - tx - cw], [0, 0]])


def place_on_canvas(image: tf.Tensor, new_hw: tf.Tensor, offset_hw: tf.Tensor,
                    input_hw: tf.Tensor, pad_value: float = PAD_VALUE) -> tf.Tensor:
    """Resize ``image`` to ``new_hw`` and paste it at ``offset_hw`` on a ``input_hw`` canvas.

    Offsets may be negative or push the image past the canvas: the outside part is cropped.
    """
    crop, paddings = visible_part(image, new_hw, offset_hw, input_hw)
    out = tf.pad(crop, paddings, constant_values=pad_value)
    return tf.ensure_shape(out, [None, None, 3])


def distort_hsv(image: tf.Tensor, hue: tf.Tensor, sat: tf.Tensor, val: tf.Tensor) -> tf.Tensor:
    """Shift hue by ``hue`` (mod 1), scale saturation and value, clip to ``[0, 1]``."""
    hsv = tf.image.rgb_to_hsv(image)
    h = tf.math.floormod(hsv[..., 0] + hue, 1.0)
    s = tf.clip_by_value(hsv[..., 1] * sat, 0.0, 1.0)
    v = tf.clip_by_value(hsv[..., 2] * val, 0.0, 1.0)
    return tf.image.hsv_to_rgb(tf.stack([h, s, v], axis=-1))


def augment_image(image: tf.Tensor, new_hw: tf.Tensor, offset_hw: tf.Tensor, flip: tf.Tensor,
                  hsv: tf.Tensor, input_hw: tf.Tensor, colours: bool = True) -> tf.Tensor:
    """One image as an :class:`~yolo3.data.planner.AugmentDraw` says (its fields as tensors,
    ``hsv`` = ``(hue, sat, val)``) -> the ``input_hw + (3,)`` canvas. ``colours`` False: the
    HSV step is skipped (the configuration changes no colour)."""
    crop, paddings = visible_part(image, new_hw, offset_hw, input_hw)
    pad_value = tf.constant(PAD_VALUE, tf.float32)
    if colours:
        # Colour only the placed image; the gray padding changes only in value (hue and saturation
        # leave gray alone), exactly as distorting the whole canvas would.
        crop = distort_hsv(crop, hsv[0], hsv[1], hsv[2])
        pad_value = tf.clip_by_value(pad_value * hsv[2], 0.0, 1.0)
    out = tf.ensure_shape(tf.pad(crop, paddings, constant_values=pad_value), [None, None, 3])
    return tf.cond(flip, lambda: tf.reverse(out, axis=[1]), lambda: out)


def mosaic_images(images: Sequence[tf.Tensor], split_yx: tf.Tensor, input_hw: tf.Tensor
                  ) -> tf.Tensor:
    """Four canvases in one: top-left of #0, top-right of #1, bottom-left of #2, bottom-right of
    #3, split at ``split_yx``."""
    yy = tf.range(input_hw[0])[:, None, None]
    xx = tf.range(input_hw[1])[None, :, None]
    top, left = yy < split_yx[0], xx < split_yx[1]
    return tf.where(top & left, images[0],
                    tf.where(top, images[1], tf.where(left, images[2], images[3])))


# --- yolo3 0.2's names, kept for one more release: eager calls (NumPy draws under the hood) ---

def _rng(seed) -> np.random.Generator:
    return np.random.default_rng([int(v) for v in np.asarray(seed).reshape(-1)])


def sample_params(seed, image_hw, input_hw, cfg: AugmentConfig) -> dict:
    """Earlier API: :func:`yolo3.data.planner.draw_augment` seeded by the ``(2,)`` ``seed``, as
    tensors ``new_hw``, ``offset_hw`` (int32), ``flip`` (bool), ``hue``, ``sat``, ``val``."""
    d = draw_augment(_rng(seed), np.asarray(image_hw), np.asarray(input_hw), cfg)
    return dict(new_hw=tf.constant(d.new_hw, tf.int32), offset_hw=tf.constant(d.offset_hw, tf.int32),
                flip=tf.constant(d.flip), hue=tf.constant(d.hue, tf.float32),
                sat=tf.constant(d.sat, tf.float32), val=tf.constant(d.val, tf.float32))


def clip_and_filter(boxes, min_size: float = 1.0) -> tf.Tensor:
    """Earlier API: :func:`yolo3.data.planner.keep_larger_than` on a tensor."""
    return tf.constant(keep_larger_than(np.asarray(boxes, np.float32), min_size))


def transform_boxes(boxes, image_hw, new_hw, offset_hw, input_hw, flip=False,
                    min_size: float = 1.0) -> tf.Tensor:
    """Earlier API: :func:`yolo3.data.planner.augment_boxes` on tensors."""
    draw = AugmentDraw(tuple(int(v) for v in np.asarray(new_hw)),
                       tuple(int(v) for v in np.asarray(offset_hw)), bool(np.asarray(flip)),
                       0.0, 1.0, 1.0)
    return tf.constant(augment_boxes(np.asarray(boxes, np.float32), np.asarray(image_hw), draw,
                                     np.asarray(input_hw), min_size))


def random_augment(image, boxes, input_hw, seed, cfg: AugmentConfig):
    """Earlier API: one image drawn (seeded by ``seed``) and augmented -> ``(canvas, boxes)``."""
    p = sample_params(seed, tf.shape(image)[:2], input_hw, cfg)
    out = augment_image(tf.convert_to_tensor(image, tf.float32), p["new_hw"], p["offset_hw"],
                        p["flip"], tf.stack([p["hue"], p["sat"], p["val"]]),
                        tf.cast(input_hw, tf.int32), cfg.colours)
    b = transform_boxes(boxes, tf.shape(image)[:2], p["new_hw"], p["offset_hw"], input_hw,
                        p["flip"], cfg.min_box_size)
    return out, b


def mosaic(images, boxes, input_hw, seed, min_size: float = 1.0):
    """Earlier API: four canvases in one, the split drawn from ``seed`` (middle half)."""
    hw = np.asarray(input_hw)
    u = 0.25 + 0.5 * _rng(seed).random(2)
    split = (int(np.round(u[0] * hw[0])), int(np.round(u[1] * hw[1])))
    out = mosaic_images(images, tf.constant(split, tf.int32), tf.constant(hw, tf.int32))
    return out, tf.constant(mosaic_boxes([np.asarray(b, np.float32) for b in boxes], split, hw,
                                         min_size))


def letterbox(image, boxes, input_hw):
    """Earlier API: the validation letterbox of one image and its boxes."""
    return letterbox_tf(image, input_hw), tf.constant(letterbox_boxes(
        np.asarray(boxes, np.float32), np.asarray(tf.shape(image)[:2]), np.asarray(input_hw)))
