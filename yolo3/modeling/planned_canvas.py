"""The geometry on the device: each element's packed windows and their plans in, the uint8-valued
canvas out, in ``keras.ops`` (every backend), inside the compiled step (issue 67, item 3).

The host cuts each source's window out of its decoded image and packs them
(:func:`yolo3.data.window_pack.pack_windows`: pixels ``(B, P, 3)`` uint8, plans ``(B, 4, 11)``
float32); :class:`PlannedCanvas` samples them, bilinear with half-pixel centres and the border
replicated, into the ``(B, H, W, 3)`` canvas, gray where no window shows, rounded to whole levels
as the host's uint8 canvas is. :class:`yolo3.modeling.pixel_input.PlannedPixels` then scales it
and applies the colours. Each canvas pixel reads one window (its mosaic region's: the colour
plan's split ``(cy, cx)``), four gathers per channel.
"""
from __future__ import annotations

from typing import Sequence

import keras
from keras import ops

__all__ = ["PlannedCanvas", "sample_canvas"]

PAD_LEVEL = 128.0  # the gray canvas (yolo3.data.image_ops.PAD_U8)


@keras.saving.register_keras_serializable(package="yolo3")
class PlannedCanvas(keras.layers.Layer):
    """``(pixels, windows, split)`` -> float32 ``(B, H, W, 3)`` canvases in whole levels
    ``[0, 255]``.

    ``pixels``: uint8 ``(B, P, 3)``, each element's own row; with ``shared``, one ``(P, 3)``
    buffer every element reads (images kept on the device: the plans' ``start`` counts from its
    first pixel, :func:`yolo3.data.window_pack.image_plan`); ``windows``: float32 ``(B, 4, 11)``
    (:mod:`yolo3.data.window_pack`); ``split``: ``(B, 2)`` each element's mosaic split
    ``(cy, cx)`` (``(H, W)`` for one image; the colour plan's first two numbers). ``input_hw``:
    the canvas ``(H, W)``."""

    def __init__(self, input_hw: Sequence[int], shared: bool = False, **kwargs):
        kwargs.setdefault("dtype", "float32")
        super().__init__(**kwargs)
        self.input_hw = (int(input_hw[0]), int(input_hw[1]))
        self.shared = bool(shared)

    def call(self, pixels, windows, split):
        return sample_canvas(pixels, windows, split, self.input_hw, self.shared)

    def compute_output_spec(self, pixels, windows, split):
        return keras.KerasTensor((windows.shape[0], *self.input_hw, 3), dtype="float32")

    def get_config(self):
        return {**super().get_config(), "input_hw": list(self.input_hw), "shared": self.shared}


def sample_canvas(pixels, windows, split, input_hw, shared: bool = False, starts=None):
    """:class:`PlannedCanvas`'s sampling as a function (its arguments); ``input_hw`` ``(H, W)``
    may be tensors (a canvas whose size each batch gives). ``starts``: int32 ``(B, 4)``, where
    each window's image begins in a shared buffer (added to the plan's ``start``, in integers:
    a float32 ``start`` is exact only below 2**24 pixels). Pixels are gathered as uint8 and
    only then made float (a shared buffer is never converted whole)."""
    H, W = input_hw
    windows = ops.cast(windows, "float32")
    split = ops.cast(split, "float32")
    rows = ops.cast(ops.arange(H), "float32")[None, :, None]  # (1, H, 1)
    cols = ops.cast(ops.arange(W), "float32")[None, None, :]  # (1, 1, W)
    region = (2 * ops.cast(rows >= split[:, 0, None, None], "int32")
              + ops.cast(cols >= split[:, 1, None, None], "int32"))  # (B, H, W)
    batch = ops.shape(windows)[0]
    region = ops.reshape(region, (batch, H * W, 1))
    # each pixel's window: its region's row of numbers, (B, H, W, 11)
    plan = ops.take_along_axis(windows, region, axis=1)
    plan = ops.reshape(plan, (batch, H, W, windows.shape[-1]))
    first = 0
    if starts is not None:
        first = ops.take_along_axis(ops.cast(starts, "int32"), region[..., 0], axis=1)
        first = ops.reshape(first, (batch, H, W))
    r0, r1, c0, c1 = plan[..., 0], plan[..., 1], plan[..., 2], plan[..., 3]
    start, h, w = plan[..., 4], plan[..., 5], plan[..., 6]
    y = plan[..., 7] * (rows - r0) + plan[..., 8]
    x = plan[..., 9] * (cols - c0) + plan[..., 10]
    inside = (rows >= r0) & (rows < r1) & (cols >= c0) & (cols < c1)
    y0, x0 = ops.floor(y), ops.floor(x)
    fy, fx = (y - y0)[..., None], (x - x0)[..., None]
    last_y, last_x = ops.maximum(h - 1.0, 0.0), ops.maximum(w - 1.0, 0.0)
    ya, yb = ops.clip(y0, 0.0, last_y), ops.clip(y0 + 1.0, 0.0, last_y)
    xa, xb = ops.clip(x0, 0.0, last_x), ops.clip(x0 + 1.0, 0.0, last_x)

    def read(yy, xx):  # (B, H, W, 3): the cut's pixel (yy, xx) of each canvas pixel
        index = ops.cast(start + yy * w + xx, "int32") + first
        index = ops.where(inside, index, 0)
        if shared:  # one (P, 3) buffer for the batch, read by row
            got = ops.take(pixels, index, axis=0)
        else:
            index = ops.reshape(index, (batch, H * W, 1))
            got = ops.take_along_axis(pixels, ops.repeat(index, 3, axis=-1), axis=1)
            got = ops.reshape(got, (batch, H, W, 3))
        return ops.cast(got, "float32")

    top = (1.0 - fx) * read(ya, xa) + fx * read(ya, xb)
    bottom = (1.0 - fx) * read(yb, xa) + fx * read(yb, xb)
    value = ops.round((1.0 - fy) * top + fy * bottom)
    return ops.where(inside[..., None], value, PAD_LEVEL)
