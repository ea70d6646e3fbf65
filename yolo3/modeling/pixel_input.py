"""The pixels' last steps on the device: uint8 batches and each element's colour plan in, the
float32 images in ``[0, 1]`` a body takes out, inside the compiled training step.

The host places each image on its canvas as uint8 (resize, crop, pad, mirror, mosaic:
:func:`yolo3.data.image_ops.place_image_u8`) and sends the canvas with one row per element, its
colour plan (:data:`COLOUR_PLAN_WIDTH` float32: the mosaic split ``(cy, cx)``, then ``(hue, sat,
val)`` for each of the four regions). :class:`PlannedPixels` scales to ``[0, 1]`` and applies the
HSV distortion of each region, in ``keras.ops`` (every backend): a quarter of the bytes cross
from host to device, and the host's costliest step (the float colour conversion) runs where the
model does. Regions: top-left ``[0, cy) x [0, cx)``, top-right, bottom-left, bottom-right (the
host's :func:`~yolo3.data.image_ops.mosaic_regions`); one image is region 0 with ``(cy, cx) =
(h, w)``. A region whose plan is ``(0, 1, 1)`` keeps ``image / 255`` exactly.
"""
from __future__ import annotations

import keras
from keras import ops

__all__ = ["COLOUR_PLAN_WIDTH", "PlannedPixels", "with_planned_pixels"]

COLOUR_PLAN_WIDTH = 14  # cy, cx, then (hue, sat, val) x 4 regions


@keras.saving.register_keras_serializable(package="yolo3")
class PlannedPixels(keras.layers.Layer):
    """``(image, plan)`` -> float32 ``image / 255`` with each region's HSV distortion.

    ``image``: uint8 ``(batch, h, w, 3)`` RGB; ``plan``: float32 ``(batch, 14)`` (module
    docstring). Hue shifts by ``hue`` (mod 1), saturation and value scale by ``sat`` and ``val``,
    clipped to ``[0, 1]``: ``tf.image``'s and OpenCV's float HSV, to float rounding."""

    def __init__(self, **kwargs):
        kwargs.setdefault("dtype", "float32")
        super().__init__(**kwargs)

    def call(self, image, plan):
        x = ops.cast(image, "float32") * (1.0 / 255.0)  # the host's scaling, to the bit
        height, width = ops.shape(x)[1], ops.shape(x)[2]
        plan = ops.cast(plan, "float32")
        rows = ops.cast(ops.arange(height), "float32")[None, :, None]
        cols = ops.cast(ops.arange(width), "float32")[None, None, :]
        lower = ops.cast(rows >= plan[:, 0, None, None], "int32")
        right = ops.cast(cols >= plan[:, 1, None, None], "int32")
        region = ops.one_hot(2 * lower + right, 4, dtype="float32")  # (b, h, w, 4)
        per_region = ops.reshape(plan[:, 2:], (-1, 4, 3))  # (b, 4, [hue, sat, val])
        factors = ops.einsum("bhwr,brc->bhwc", region, per_region)
        hue, sat, val = factors[..., 0], factors[..., 1], factors[..., 2]
        hsv = keras.ops.image.rgb_to_hsv(x)
        h = ops.mod(hsv[..., 0] + hue, 1.0)
        s = ops.clip(hsv[..., 1] * sat, 0.0, 1.0)
        v = ops.clip(hsv[..., 2] * val, 0.0, 1.0)
        distorted = keras.ops.image.hsv_to_rgb(ops.stack([h, s, v], axis=-1))
        unchanged = (hue == 0.0) & (sat == 1.0) & (val == 1.0)
        return ops.where(unchanged[..., None], x, distorted)

    def compute_output_spec(self, image, plan):
        return keras.KerasTensor(image.shape, dtype="float32")


def with_planned_pixels(template: keras.Model) -> keras.Model:
    """``template`` (inputs ``[image, *rest]``, image float32 in ``[0, 1]``) taking ``[image
    (uint8), plan (batch, 14), *rest]`` instead: the same variables, the same output."""
    first, *rest = template.inputs
    image = keras.Input(shape=first.shape[1:], dtype="uint8", name="image")
    plan = keras.Input(shape=(COLOUR_PLAN_WIDTH,), dtype="float32", name="colour_plan")
    others = [keras.Input(shape=t.shape[1:], dtype=t.dtype, name=t.name.split(":")[0])
              for t in rest]
    pixels = PlannedPixels(name="planned_pixels")(image, plan)
    return keras.Model([image, plan, *others], template([pixels, *others]),
                       name=f"{template.name}_planned")
