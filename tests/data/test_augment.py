"""yolo3.data.augment against float64 NumPy written here: sampled parameters within their ranges,
canvas placement (crops included), box mapping with flips, HSV against colorsys, mosaic quarters."""
from __future__ import annotations

import colorsys

import numpy as np
import pytest
import tensorflow as tf

from yolo3.data.augment import (
    AugmentConfig,
    clip_and_filter,
    distort_hsv,
    mosaic,
    place_on_canvas,
    random_augment,
    sample_params,
    transform_boxes,
)


def test_presets():
    assert AugmentConfig.preset("full") == AugmentConfig()
    light = AugmentConfig.preset("light")
    assert light.scale == (0.7, 1.3) and light.jitter == 0.1
    assert AugmentConfig.preset("none") is None
    with pytest.raises(ValueError, match="unknown augmentation preset 'heavy'"):
        AugmentConfig.preset("heavy")


def test_sampled_parameters_stay_in_their_ranges_and_follow_the_seed():
    cfg = AugmentConfig()
    seen = []
    for s in range(200):
        p = {k: v.numpy() for k, v in sample_params(tf.constant([s, 7]), tf.constant([120, 200]),
                                                    tf.constant([96, 128]), cfg).items()}
        nh, nw = p["new_hw"]
        # a tall result (aspect < 1) is scale x the input height high, else scale x its width wide
        scale = nh / 96 if nw < nh else nw / 128
        assert 0.25 - 0.01 <= scale <= 2.0 + 0.01
        aspect = (nw / nh) / (200 / 120)  # the jitter: U(0.7, 1.3) / U(0.7, 1.3)
        assert 0.7 / 1.3 - 0.05 <= aspect <= 1.3 / 0.7 + 0.05
        room = np.array([96, 128]) - p["new_hw"]
        assert np.all(np.minimum(room, 0) <= p["offset_hw"]) and np.all(p["offset_hw"] <= np.maximum(room, 0))
        assert abs(p["hue"]) <= 0.1 and 1 / 1.5 - 1e-6 <= p["sat"] <= 1.5 + 1e-6
        seen.append(bool(p["flip"]))
    assert 0.35 < np.mean(seen) < 0.65
    a = sample_params(tf.constant([1, 2]), tf.constant([50, 60]), tf.constant([64, 64]), cfg)
    b = sample_params(tf.constant([1, 2]), tf.constant([50, 60]), tf.constant([64, 64]), cfg)
    assert all(np.array_equal(a[k].numpy(), b[k].numpy()) for k in a)


@pytest.mark.parametrize("offset", [(5, 10), (-6, -9), (20, 40)], ids=["inside", "cropped", "past"])
def test_placement_pastes_and_crops(offset):
    rng = np.random.default_rng(0)
    image = rng.uniform(0, 1, (16, 24, 3)).astype(np.float32)
    canvas = place_on_canvas(tf.constant(image), tf.constant([16, 24]), tf.constant(offset),
                             tf.constant([32, 48]), pad_value=0.25).numpy()
    want = np.full((32, 48, 3), 0.25)
    dy, dx = offset
    for y in range(16):
        for x in range(24):
            if 0 <= y + dy < 32 and 0 <= x + dx < 48:
                want[y + dy, x + dx] = image[y, x]
    np.testing.assert_allclose(canvas, want, atol=1e-6)


@pytest.mark.parametrize("flip", [False, True])
def test_boxes_follow_scale_offset_and_flip_and_leave_when_outside(flip):
    boxes = np.array([[10, 20, 50, 60, 1], [0, 0, 4, 4, 2], [90, 5, 100, 50, 0]], np.float64)
    image_hw, new_hw, offset, input_hw = (100, 100), (50, 80), (10, -20), (64, 64)
    got = transform_boxes(tf.constant(boxes, tf.float32), tf.constant(image_hw),
                          tf.constant(new_hw), tf.constant(offset), tf.constant(input_hw),
                          flip=flip).numpy()
    want = []
    for x1, y1, x2, y2, c in boxes:
        x1, x2 = x1 * 0.8 - 20, x2 * 0.8 - 20
        y1, y2 = y1 * 0.5 + 10, y2 * 0.5 + 10
        if flip:
            x1, x2 = 64 - x2, 64 - x1
        x1, x2, y1, y2 = np.clip([x1, x2], 0, 64).tolist() + np.clip([y1, y2], 0, 64).tolist()
        if x2 - x1 > 1 and y2 - y1 > 1:
            want.append([x1, y1, x2, y2, c])
    assert len(want) == 2  # the 4-pixel box at the left edge is cropped away
    np.testing.assert_allclose(got, want, atol=1e-4)
    assert clip_and_filter(tf.constant([[0, 0, 2, 2, 0.]]), min_size=2.0).shape[0] == 0


def test_hsv_distortion_against_colorsys():
    rng = np.random.default_rng(1)
    image = rng.uniform(0, 1, (6, 5, 3))
    hue, sat, val = 0.3, 1.4, 0.7
    got = distort_hsv(tf.constant(image, tf.float32), hue, sat, val).numpy()
    want = np.empty_like(image)
    for idx in np.ndindex(6, 5):
        h, s, v = colorsys.rgb_to_hsv(*image[idx])
        want[idx] = colorsys.hsv_to_rgb((h + hue) % 1.0, min(s * sat, 1.0), min(v * val, 1.0))
    np.testing.assert_allclose(got, want, atol=1e-5)


def test_random_augment_moves_the_object_with_its_box():
    """A red square on grey: after any augmentation the red pixels lie inside the returned box."""
    image = np.full((80, 120, 3), 0.5, np.float32)
    image[20:50, 30:70] = (1.0, 0.0, 0.0)
    boxes = tf.constant([[30, 20, 70, 50, 3]], tf.float32)
    cfg = AugmentConfig(hue=0.0, saturation=1.0, value=1.0)
    for s in range(12):
        canvas, kept = random_augment(tf.constant(image), boxes, tf.constant([64, 96]),
                                      tf.constant([s, 1]), cfg)
        canvas, kept = canvas.numpy(), kept.numpy()
        assert canvas.shape == (64, 96, 3)
        red = np.argwhere((canvas[..., 0] > 0.9) & (canvas[..., 1] < 0.1))
        if len(kept):
            x1, y1, x2, y2, c = kept[0]
            assert c == 3 and len(red)
            assert red[:, 0].min() >= y1 - 1 and red[:, 0].max() <= y2
            assert red[:, 1].min() >= x1 - 1 and red[:, 1].max() <= x2
        else:
            assert len(red) <= 2 * 96  # no box: at most a sliver of the square is left


def test_mosaic_takes_one_quarter_of_each_canvas_and_clips_boxes_to_it():
    canvases = [tf.fill([40, 60, 3], float(k) / 4) for k in range(4)]
    boxes = [tf.constant([[0, 0, 60, 40, k]], tf.float32) for k in range(4)]  # each whole canvas
    out, kept = mosaic(canvases, boxes, tf.constant([40, 60]), tf.constant([3, 4]))
    out, kept = out.numpy(), kept.numpy()
    cy = int(np.argmax(out[:, 0, 0] != 0))  # first row of canvas 2 in the left column
    cx = int(np.argmax(out[0, :, 0] != 0))  # first column of canvas 1 in the top row
    assert 10 <= cy <= 30 and 15 <= cx <= 45
    np.testing.assert_array_equal(out[:cy, :cx, 0], 0.0)
    np.testing.assert_array_equal(out[:cy, cx:, 0], 0.25)
    np.testing.assert_array_equal(out[cy:, :cx, 0], 0.5)
    np.testing.assert_array_equal(out[cy:, cx:, 0], 0.75)
    np.testing.assert_allclose(kept, [[0, 0, cx, cy, 0], [cx, 0, 60, cy, 1],
                                      [0, cy, cx, 40, 2], [cx, cy, 60, 40, 3]])
