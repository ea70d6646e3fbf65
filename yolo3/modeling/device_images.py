"""The images kept on the accelerator (``--cache device``): the run's decoded images held in one
uint8 buffer where the model runs, and the training model that reads them.

:class:`DeviceImages` holds the buffer (:meth:`yolo3.data.device_cache.DeviceLayout.fill`:
``(P, 3)`` uint8, every training and validation image once) as a non-trainable variable, made
once per run and shared by every stage's model; per batch only the window plans cross
(:meth:`yolo3.data.batch_maker.BatchMaker.device_image_plans`), and it samples each element's
canvas from the buffer (:func:`yolo3.modeling.planned_canvas.sample_canvas`: the resampling,
mirror, mosaic and letterbox, in whole levels), in ``keras.ops`` inside the compiled step.
:func:`with_device_images` puts it, then the colours
(:class:`yolo3.modeling.pixel_input.PlannedPixels`), before a training template. The layer is
never saved: checkpoints hold the template, whose variables are the same.
"""
from __future__ import annotations

import keras
import numpy as np
from keras import ops

from yolo3.modeling.pixel_input import COLOUR_PLAN_WIDTH, PlannedPixels
from yolo3.modeling.planned_canvas import sample_canvas
from yolo3.data.window_pack import WINDOW_PLAN_WIDTH, WINDOWS_PER_ELEMENT

__all__ = ["DeviceImages", "with_device_images"]


class DeviceImages(keras.layers.Layer):
    """``(canvas, windows, starts, colour_plan)`` -> float32 ``(B, H, W, 3)`` canvases in whole
    levels ``[0, 255]``, read from ``images`` (uint8 ``(P, 3)``, copied to the device once).

    ``canvas``: uint8 ``(B, H, W, 0)``, its shape the canvas's (no bytes); ``windows``: float32
    ``(B, 4, 11)`` (:mod:`yolo3.data.window_pack`, ``start`` 0); ``starts``: int32 ``(B, 4)``
    where each window's image begins in the buffer; ``colour_plan``: ``(B, 14)``, its first two
    numbers the mosaic split."""

    def __init__(self, images: np.ndarray, **kwargs):
        kwargs.setdefault("dtype", "float32")
        super().__init__(**kwargs)
        images = np.asarray(images)
        if images.dtype != np.uint8 or images.ndim != 2 or images.shape[1] != 3:
            raise ValueError(f"the device's images are uint8 (pixels, 3), got {images.dtype} "
                             f"{images.shape}")
        self.pixels = int(images.shape[0])
        self.images = self.add_weight(shape=images.shape, dtype="uint8", trainable=False,
                                      initializer=lambda shape, dtype=None: images,
                                      name="images")

    def call(self, canvas, windows, starts, colour_plan):
        hw = (ops.shape(canvas)[1], ops.shape(canvas)[2])
        return sample_canvas(self.images, windows, ops.cast(colour_plan, "float32")[:, :2], hw,
                             shared=True, starts=starts)

    def compute_output_spec(self, canvas, windows, starts, colour_plan):
        return keras.KerasTensor((*canvas.shape[:3], 3), dtype="float32")

    def get_config(self):  # described (TensorBoard's graph), never saved with its images
        return {**super().get_config(), "pixels": self.pixels}

    @classmethod
    def from_config(cls, config):
        raise ValueError("the images kept on the device are not saved with a model: a model "
                         "file holds the template (yolo3.modeling.device_images)")


def with_device_images(template: keras.Model, images: DeviceImages) -> keras.Model:
    """``template`` (inputs ``[image, *rest]``, image float32 in ``[0, 1]``) taking ``[canvas,
    windows, starts, colour_plan, *rest]`` (:class:`DeviceImages`) instead: the same variables,
    the same output. ``images``: the run's one layer (every stage's model shares its buffer)."""
    first, *rest = template.inputs
    canvas = keras.Input(shape=(*first.shape[1:3], 0), dtype="uint8", name="canvas")
    windows = keras.Input(shape=(WINDOWS_PER_ELEMENT, WINDOW_PLAN_WIDTH), dtype="float32",
                          name="window_plans")
    starts = keras.Input(shape=(WINDOWS_PER_ELEMENT,), dtype="int32", name="window_starts")
    plan = keras.Input(shape=(COLOUR_PLAN_WIDTH,), dtype="float32", name="colour_plan")
    others = [keras.Input(shape=t.shape[1:], dtype=t.dtype, name=t.name.split(":")[0])
              for t in rest]
    levels = images(canvas, windows, starts, plan)
    pixels = PlannedPixels(name="planned_pixels")(levels, plan)
    return keras.Model([canvas, windows, starts, plan, *others],
                       template([pixels, *others] if others else pixels),
                       name=f"{template.name}_device_images")
