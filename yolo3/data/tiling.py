"""Tiled training: windows cut from each training image at its own resolution, on the fly in the
tf.data pipeline (nothing is sliced to disk), chosen with a bias toward objects.

Images are float32 RGB ``(h, w, 3)``; boxes float32 ``(n, 5)`` pixel ``x1, y1, x2, y2, class``.
Per image (stateless randomness from an explicit ``(2,)`` seed):

- with probability ``whole`` the image is kept whole (the usual resize follows: large objects
  and the context of the whole-image pass at inference);
- otherwise a window of ``size`` x ``size`` pixels (an image side shorter than that: the whole
  side) is cut; with probability ``background`` it lies anywhere, else it holds one of the
  image's objects, drawn uniformly, whole where the object fits in a tile (its centre otherwise);
- boxes are shifted into the window and clipped to it; a box left with less than
  ``min_visible`` of its area is dropped.

Augmentation (scale, flip, colour, mosaic) then treats the window as the image.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Tuple

import tensorflow as tf

__all__ = ["TileSampling", "random_tile", "tile_window"]


@dataclass(frozen=True)
class TileSampling:
    """How training windows are drawn (module docstring): ``size`` pixels, shares ``whole``
    and ``background``, and ``min_visible``, each a fraction."""

    size: int
    whole: float = 0.25
    background: float = 0.1
    min_visible: float = 0.5

    def __post_init__(self):
        if int(self.size) != self.size or self.size < 1:
            raise ValueError(f"tile size {self.size!r}: expected a whole number of pixels >= 1")
        for name in ("whole", "background", "min_visible"):
            value = getattr(self, name)
            if not 0.0 <= value <= 1.0:
                raise ValueError(f"tile {name} {value!r}: expected a fraction from 0 to 1")


def _start_range(lo_edge: tf.Tensor, hi_edge: tf.Tensor, tile: tf.Tensor,
                 side: tf.Tensor) -> Tuple[tf.Tensor, tf.Tensor]:
    """The window starts ``[low, high]`` along one side that hold ``[lo_edge, hi_edge]`` (its
    centre where it is longer than the tile), within ``[0, side - tile]``."""
    low, high = hi_edge - tile, lo_edge
    centre = (lo_edge + hi_edge) / 2.0
    too_long = low > high
    low = tf.where(too_long, centre - tile, low)
    high = tf.where(too_long, centre, high)
    top = side - tile
    return tf.clip_by_value(low, 0.0, top), tf.clip_by_value(high, 0.0, top)


def tile_window(image_hw: tf.Tensor, boxes: tf.Tensor, seed: tf.Tensor,
                sampling: TileSampling) -> tf.Tensor:
    """The window ``(4,)`` int32 ``(x1, y1, x2, y2)`` drawn for one image (the whole image when
    the draw keeps it whole)."""
    seeds = tf.random.experimental.stateless_split(tf.cast(seed, tf.int64), num=3)
    h, w = tf.cast(image_hw[0], tf.float32), tf.cast(image_hw[1], tf.float32)
    size = tf.constant(float(sampling.size), tf.float32)
    th, tw = tf.minimum(size, h), tf.minimum(size, w)
    n = tf.shape(boxes)[0]
    u = tf.random.stateless_uniform((4,), seed=seeds[0])
    whole = u[0] < sampling.whole
    around = (u[1] >= sampling.background) & (n > 0)
    k = tf.random.stateless_uniform((), seed=seeds[1], maxval=tf.maximum(n, 1), dtype=tf.int32)
    box = tf.gather(tf.concat([boxes, tf.zeros((1, 5), boxes.dtype)], 0), k)
    x_low, x_high = _start_range(box[0], box[2], tw, w)
    y_low, y_high = _start_range(box[1], box[3], th, h)
    x = tf.where(around, x_low + u[2] * (x_high - x_low), u[2] * (w - tw))
    y = tf.where(around, y_low + u[3] * (y_high - y_low), u[3] * (h - th))
    x, y = tf.floor(x), tf.floor(y)
    window = tf.stack([x, y, x + tw, y + th])
    return tf.cast(tf.where(whole, tf.stack([0.0, 0.0, w, h]), window), tf.int32)


def random_tile(image: tf.Tensor, boxes: tf.Tensor, seed: tf.Tensor,
                sampling: TileSampling) -> Tuple[tf.Tensor, tf.Tensor]:
    """One image -> its drawn window ``(th, tw, 3)`` and the boxes in it ``(m, 5)`` (m <= n),
    in window pixels."""
    window = tile_window(tf.shape(image)[:2], boxes, seed, sampling)
    crop = image[window[1]:window[3], window[0]:window[2]]
    offset = tf.cast(tf.stack([window[0], window[1], window[0], window[1]]), tf.float32)
    limit = tf.cast(tf.stack([window[2] - window[0], window[3] - window[1]]), tf.float32)
    shifted = boxes[:, :4] - offset
    clipped = tf.stack([tf.clip_by_value(shifted[:, 0], 0.0, limit[0]),
                        tf.clip_by_value(shifted[:, 1], 0.0, limit[1]),
                        tf.clip_by_value(shifted[:, 2], 0.0, limit[0]),
                        tf.clip_by_value(shifted[:, 3], 0.0, limit[1])], axis=1)

    def area(b):
        return tf.maximum(b[:, 2] - b[:, 0], 0.0) * tf.maximum(b[:, 3] - b[:, 1], 0.0)
    visible = area(clipped)
    keep = (visible > 0) & (visible >= sampling.min_visible * area(shifted))
    out = tf.concat([clipped, boxes[:, 4:5]], axis=1)
    return crop, tf.boolean_mask(out, keep)
