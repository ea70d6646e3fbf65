"""The device's pixel steps (uint8 + colour plan -> float image) against a float64 NumPy HSV
reference, region by region; exact where a region's plan leaves the colours; the wrapped training
model equal to its template on the same pixels."""
from __future__ import annotations

import colorsys

import keras
import numpy as np
import pytest

from yolo3.config.specs import get_spec
from yolo3.heads import as_head
from yolo3.modeling.bodies import build_spec_body
from yolo3.modeling.pixel_input import COLOUR_PLAN_WIDTH, PlannedPixels, with_planned_pixels


def reference(image: np.ndarray, plan: np.ndarray) -> np.ndarray:
    """float64, pixel by pixel with Python's colorsys: each region's hue shift (mod 1) and
    clipped saturation and value scales."""
    h, w, _ = image.shape
    cy, cx = plan[0], plan[1]
    out = np.empty((h, w, 3))
    for y in range(h):
        for x in range(w):
            region = 2 * int(y >= cy) + int(x >= cx)
            hue, sat, val = plan[2 + 3 * region:5 + 3 * region]
            r, g, b = image[y, x] / 255.0
            if (hue, sat, val) == (0.0, 1.0, 1.0):
                out[y, x] = r, g, b
                continue
            hh, ss, vv = colorsys.rgb_to_hsv(r, g, b)
            out[y, x] = colorsys.hsv_to_rgb((hh + hue) % 1.0, min(max(ss * sat, 0.0), 1.0),
                                            min(max(vv * val, 0.0), 1.0))
    return out


def plans(h: int, w: int) -> np.ndarray:
    one = np.array([h, w, 0.07, 1.3, 0.8] + [0.0, 1.0, 1.0] * 3, np.float32)
    mosaic = np.array([5, 9, -0.08, 0.7, 1.4, 0.0, 1.0, 1.0, 0.02, 1.5, 0.67, 0.09, 0.9, 1.2],
                      np.float32)
    plain = np.array([h, w] + [0.0, 1.0, 1.0] * 4, np.float32)
    return np.stack([one, mosaic, plain])


def test_each_region_gets_its_colours_as_a_float64_reference_says():
    rng = np.random.default_rng(0)
    image = rng.integers(0, 256, (3, 12, 16, 3), dtype=np.uint8)
    image[:, :2, :2] = 128  # gray, as the canvas pads
    plan = plans(12, 16)
    assert plan.shape[1] == COLOUR_PLAN_WIDTH
    out = keras.ops.convert_to_numpy(PlannedPixels()(image, plan))
    assert out.dtype == np.float32 and out.shape == image.shape
    for k in range(3):
        np.testing.assert_allclose(out[k], reference(image[k], plan[k]), atol=2e-6)


def test_a_region_whose_colours_stay_is_the_hosts_scaling_to_the_bit():
    rng = np.random.default_rng(1)
    image = rng.integers(0, 256, (2, 8, 8, 3), dtype=np.uint8)
    plan = np.tile(np.array([8, 8] + [0.0, 1.0, 1.0] * 4, np.float32), (2, 1))
    out = keras.ops.convert_to_numpy(PlannedPixels()(image, plan))
    np.testing.assert_array_equal(out, image.astype(np.float32) * np.float32(1 / 255))


def test_the_layer_round_trips_through_its_config():
    layer = PlannedPixels(name="pixels")
    again = PlannedPixels.from_config(layer.get_config())
    assert again.name == "pixels" and again.dtype_policy.name == "float32"
    assert keras.saving.get_registered_object("yolo3>PlannedPixels") is PlannedPixels


@pytest.mark.parametrize("variant", ["yolov3-tiny", "tiny-af"])
def test_the_wrapped_training_model_gives_its_templates_loss(variant):
    spec = get_spec(variant)
    head = as_head(spec.default_head())
    keras.utils.set_random_seed(0)
    body = build_spec_body(spec, 2, head.anchors_per_scale, (64, 64))
    template = head.training_model(body, 2, max_boxes=4)
    wrapped = with_planned_pixels(template)
    assert [v.path for v in wrapped.trainable_variables] == [
        v.path for v in template.trainable_variables]
    assert wrapped.inputs[0].dtype == "uint8" and wrapped.inputs[1].shape[1:] == (14,)
    rng = np.random.default_rng(2)
    image = rng.integers(0, 256, (2, 64, 64, 3), dtype=np.uint8)
    rest = [np.zeros((2, *t.shape[1:]), np.float32) for t in template.inputs[1:]]
    plan = np.tile(np.array([64, 64] + [0.0, 1.0, 1.0] * 4, np.float32), (2, 1))
    plan[0, 2:5] = 0.1, 1.2, 0.9
    pixels = keras.ops.convert_to_numpy(PlannedPixels()(image, plan))
    expected = keras.ops.convert_to_numpy(template([pixels, *rest]))
    got = keras.ops.convert_to_numpy(wrapped([image, plan, *rest]))
    np.testing.assert_array_equal(got, expected)


def test_a_training_step_through_the_wrapper_is_the_templates_step():
    """Where no colour changes, one optimiser step from uint8 pixels moves every weight exactly
    as the same step from the host's float pixels."""
    from yolo3.modeling.loss import identity_loss
    spec = get_spec("tiny-af")
    head = as_head(spec.default_head())
    keras.utils.set_random_seed(0)
    body = build_spec_body(spec, 2, head.anchors_per_scale, (64, 64))
    template = head.training_model(body, 2, max_boxes=4)
    start = template.get_weights()
    rng = np.random.default_rng(3)
    image = rng.integers(0, 256, (2, 64, 64, 3), dtype=np.uint8)
    boxes = np.zeros((2, 4, 5), np.float32)
    boxes[:, 0] = [8, 8, 40, 40, 1]
    plan = np.tile(np.array([64, 64] + [0.0, 1.0, 1.0] * 4, np.float32), (2, 1))
    after = []
    for model, inputs in ((template, [image.astype(np.float32) * np.float32(1 / 255), boxes]),
                          (with_planned_pixels(template), [image, plan, boxes])):
        template.set_weights(start)
        model.compile(optimizer=keras.optimizers.SGD(0.01), loss=identity_loss)
        model.train_on_batch(inputs, np.zeros(2, np.float32))
        after.append(template.get_weights())
    assert any(not np.array_equal(a, b) for a, b in zip(after[0], start))
    for a, b in zip(*after):
        np.testing.assert_array_equal(a, b)
