"""Augmentation in the TF graph: sample random parameters first, then apply them to image AND boxes.

Images are float32 RGB in ``[0, 1]`` ``(h, w, 3)``; boxes are float32 ``(n, 5)`` pixel
``x1, y1, x2, y2, class``. All randomness is stateless and comes from an explicit ``(2,)`` seed.
The recipe is keras-yolo3's ``get_random_data``: random aspect jitter and scale, random placement on
a gray (0.5) canvas of the input size, horizontal flip, HSV distortion; optional 4-image mosaic.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, Optional, Sequence, Tuple

import tensorflow as tf

from yolo3.ops.letterbox import PAD_VALUE, boxes_to_input, letterbox_tf


@dataclass(frozen=True)
class AugmentConfig:
    """Training augmentation settings (keras-yolo3 defaults).

    jitter: aspect ratio is multiplied by ``U(1-j, 1+j) / U(1-j, 1+j)``.
    scale: the longer fitted side is ``U(*scale)`` times the input side.
    flip: probability of a horizontal flip.
    hue: hue shift ``U(-hue, hue)`` (fraction of the colour circle).
    saturation, value: factors ``U(1, s)`` or ``1 / U(1, s)`` with equal odds.
    mosaic: probability of a 4-image mosaic (0 disables; the pipeline then decodes 1 image, not 4).
    min_box_size: boxes narrower or lower than this (pixels, after clipping) are dropped.
    """

    jitter: float = 0.3
    scale: Tuple[float, float] = (0.25, 2.0)
    flip: float = 0.5
    hue: float = 0.1
    saturation: float = 1.5
    value: float = 1.5
    mosaic: float = 0.0
    min_box_size: float = 1.0

    @classmethod
    def preset(cls, name: str) -> Optional["AugmentConfig"]:
        """``'full'`` (keras-yolo3's strength), ``'light'`` (small jitter and scale changes, for
        short runs and easy data such as the synthetic shapes) or ``'none'`` (-> None)."""
        if name == "full":
            return cls()
        if name == "light":
            return cls(jitter=0.1, scale=(0.7, 1.3), hue=0.05, saturation=1.2, value=1.2)
        if name == "none":
            return None
        raise ValueError(f"unknown augmentation preset {name!r}: expected full, light or none")


def _uniform(seed, lo, hi, shape=()):
    return tf.random.stateless_uniform(shape, seed=seed, minval=lo, maxval=hi, dtype=tf.float32)


def sample_params(seed: tf.Tensor, image_hw: tf.Tensor, input_hw: tf.Tensor,
                  cfg: AugmentConfig) -> Dict[str, tf.Tensor]:
    """Random parameters for one image: resized size, placement, flip and colour factors.

    ``seed``: ``(2,)`` int; ``image_hw`` / ``input_hw``: ``(2,)`` ints. Returns ``new_hw`` and
    ``offset_hw`` (int32, the offset may be negative: the image is then cropped), ``flip`` (bool),
    ``hue``, ``sat``, ``val`` (float32).
    """
    seeds = tf.random.experimental.stateless_split(tf.cast(seed, tf.int64), num=9)
    ih = tf.cast(image_hw[0], tf.float32)
    iw = tf.cast(image_hw[1], tf.float32)
    h = tf.cast(input_hw[0], tf.float32)
    w = tf.cast(input_hw[1], tf.float32)
    j = cfg.jitter
    new_ar = iw / ih * _uniform(seeds[0], 1 - j, 1 + j) / _uniform(seeds[1], 1 - j, 1 + j)
    scale = _uniform(seeds[2], cfg.scale[0], cfg.scale[1])
    nh = tf.where(new_ar < 1, scale * h, scale * w / new_ar)
    nw = tf.where(new_ar < 1, scale * h * new_ar, scale * w)
    new_hw = tf.cast(tf.maximum(tf.round(tf.stack([nh, nw])), 1.0), tf.int32)
    room = tf.cast(tf.stack([h, w]), tf.float32) - tf.cast(new_hw, tf.float32)
    u = _uniform(seeds[3], 0.0, 1.0, shape=(2,))
    offset_hw = tf.cast(tf.floor(u * (room + tf.sign(room))), tf.int32)  # in [min(0,room), max(0,room)]
    offset_hw = tf.clip_by_value(offset_hw, tf.minimum(tf.cast(room, tf.int32), 0),
                                 tf.maximum(tf.cast(room, tf.int32), 0))
    flip = _uniform(seeds[4], 0.0, 1.0) < cfg.flip
    hue = _uniform(seeds[5], -cfg.hue, cfg.hue)

    def factor(s1, s2, limit):
        f = _uniform(s1, 1.0, max(limit, 1.0) + 1e-9)
        return tf.where(_uniform(s2, 0.0, 1.0) < 0.5, f, 1.0 / f)

    sat = factor(seeds[6], seeds[7], cfg.saturation)
    val = factor(seeds[7][::-1], seeds[8], cfg.value)
    return dict(new_hw=new_hw, offset_hw=offset_hw, flip=flip, hue=hue, sat=sat, val=val)


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


def transform_boxes(boxes: tf.Tensor, image_hw: tf.Tensor, new_hw: tf.Tensor, offset_hw: tf.Tensor,
                    input_hw: tf.Tensor, flip: tf.Tensor | bool = False,
                    min_size: float = 1.0) -> tf.Tensor:
    """Map ``(n, 5)`` boxes like :func:`place_on_canvas` (+ flip), clip, drop degenerate ones."""
    scale = tf.cast(new_hw, tf.float32) / tf.cast(image_hw, tf.float32)  # (sy, sx)
    off = tf.cast(offset_hw, tf.float32)
    H = tf.cast(input_hw[0], tf.float32)
    W = tf.cast(input_hw[1], tf.float32)
    x1 = boxes[:, 0] * scale[1] + off[1]
    x2 = boxes[:, 2] * scale[1] + off[1]
    y1 = boxes[:, 1] * scale[0] + off[0]
    y2 = boxes[:, 3] * scale[0] + off[0]
    fx1, fx2 = W - x2, W - x1
    x1, x2 = tf.where(flip, fx1, x1), tf.where(flip, fx2, x2)
    out = tf.stack([tf.clip_by_value(x1, 0.0, W), tf.clip_by_value(y1, 0.0, H),
                    tf.clip_by_value(x2, 0.0, W), tf.clip_by_value(y2, 0.0, H), boxes[:, 4]], axis=1)
    return clip_and_filter(out, min_size)


def clip_and_filter(boxes: tf.Tensor, min_size: float = 1.0) -> tf.Tensor:
    """Keep boxes whose width and height both exceed ``min_size``."""
    keep = tf.logical_and(boxes[:, 2] - boxes[:, 0] > min_size, boxes[:, 3] - boxes[:, 1] > min_size)
    return tf.boolean_mask(boxes, keep)


def distort_hsv(image: tf.Tensor, hue: tf.Tensor, sat: tf.Tensor, val: tf.Tensor) -> tf.Tensor:
    """Shift hue by ``hue`` (mod 1), scale saturation and value, clip to ``[0, 1]``."""
    hsv = tf.image.rgb_to_hsv(image)
    h = tf.math.floormod(hsv[..., 0] + hue, 1.0)
    s = tf.clip_by_value(hsv[..., 1] * sat, 0.0, 1.0)
    v = tf.clip_by_value(hsv[..., 2] * val, 0.0, 1.0)
    return tf.image.hsv_to_rgb(tf.stack([h, s, v], axis=-1))


def random_augment(image: tf.Tensor, boxes: tf.Tensor, input_hw: tf.Tensor, seed: tf.Tensor,
                   cfg: AugmentConfig) -> Tuple[tf.Tensor, tf.Tensor]:
    """One image -> ``(input_hw + (3,))`` canvas and its ``(m, 5)`` boxes (m <= n)."""
    image_hw = tf.shape(image)[:2]
    p = sample_params(seed, image_hw, input_hw, cfg)
    crop, paddings = visible_part(image, p["new_hw"], p["offset_hw"], input_hw)
    pad_value = tf.constant(PAD_VALUE, tf.float32)
    if cfg.hue or cfg.saturation != 1 or cfg.value != 1:
        # Colour only the placed image; the gray padding changes only in value (hue and saturation
        # leave gray alone), exactly as distorting the whole canvas would.
        crop = distort_hsv(crop, p["hue"], p["sat"], p["val"])
        pad_value = tf.clip_by_value(pad_value * p["val"], 0.0, 1.0)
    out = tf.ensure_shape(tf.pad(crop, paddings, constant_values=pad_value), [None, None, 3])
    out = tf.cond(p["flip"], lambda: tf.reverse(out, axis=[1]), lambda: out)
    b = transform_boxes(boxes, image_hw, p["new_hw"], p["offset_hw"], input_hw, p["flip"],
                        cfg.min_box_size)
    return out, b


def mosaic(images: Sequence[tf.Tensor], boxes: Sequence[tf.Tensor], input_hw: tf.Tensor,
           seed: tf.Tensor, min_size: float = 1.0) -> Tuple[tf.Tensor, tf.Tensor]:
    """Combine 4 canvases: top-left of #0, top-right of #1, bottom-left of #2, bottom-right of #3.

    The split point is uniform in the middle half of the canvas; boxes are clipped to their quarter.
    """
    H = tf.cast(input_hw[0], tf.float32)
    W = tf.cast(input_hw[1], tf.float32)
    u = tf.random.stateless_uniform((2,), seed=tf.cast(seed, tf.int64), minval=0.25, maxval=0.75)
    cy, cx = tf.round(u[0] * H), tf.round(u[1] * W)
    yy = tf.range(input_hw[0], dtype=tf.float32)[:, None, None]
    xx = tf.range(input_hw[1], dtype=tf.float32)[None, :, None]
    top, left = yy < cy, xx < cx
    out = tf.where(top & left, images[0], tf.where(top, images[1], tf.where(left, images[2], images[3])))
    regions = [(0.0, 0.0, cx, cy), (cx, 0.0, W, cy), (0.0, cy, cx, H), (cx, cy, W, H)]
    parts = []
    for b, (rx1, ry1, rx2, ry2) in zip(boxes, regions):
        c = tf.stack([tf.clip_by_value(b[:, 0], rx1, rx2), tf.clip_by_value(b[:, 1], ry1, ry2),
                      tf.clip_by_value(b[:, 2], rx1, rx2), tf.clip_by_value(b[:, 3], ry1, ry2),
                      b[:, 4]], axis=1)
        parts.append(clip_and_filter(c, min_size))
    return out, tf.concat(parts, axis=0)


def letterbox(image: tf.Tensor, boxes: tf.Tensor, input_hw) -> Tuple[tf.Tensor, tf.Tensor]:
    """Plain letterbox (validation): :func:`yolo3.ops.letterbox.letterbox_tf` for the image, the
    boxes mapped alike (:func:`yolo3.ops.letterbox.boxes_to_input`); boxes left empty are
    dropped."""
    image_hw = tf.shape(image)[:2]
    out = letterbox_tf(image, input_hw)
    return out, clip_and_filter(boxes_to_input(boxes, image_hw, input_hw), 0.0)
