"""yolo3.data.planner: the augmentation draws within their ranges, every box transformation against
plain loops (and TensorFlow's letterbox mapping), the Planner's orders, multi-scale groups, mosaic
share and its purity (a plan is a function of seed, epoch and index)."""
from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

from yolo3.data.annotations import Record
from yolo3.data.dataset_config import DatasetConfig, make_planner
from yolo3.data.planner import (
    AugmentConfig,
    AugmentDraw,
    MultiScale,
    Planner,
    TileSampling,
    augment_boxes,
    draw_augment,
    letterbox_boxes,
    mosaic_boxes,
    pad_boxes_np,
)
from yolo3.ops.letterbox import boxes_to_input


def _boxes(rng, h, w, n):
    xy = rng.uniform(0, [w - 10, h - 10], (n, 2))
    wh = rng.uniform(2, 60, (n, 2))
    return np.concatenate([xy, np.minimum(xy + wh, [w, h]), rng.integers(0, 3, (n, 1))],
                          1).astype(np.float32)


def test_draws_stay_in_their_ranges_and_follow_the_generator():
    cfg = AugmentConfig()
    flips = []
    for s in range(300):
        d = draw_augment(np.random.default_rng(s), (120, 200), (96, 128), cfg)
        nh, nw = d.new_hw
        scale = nh / 96 if nw < nh else nw / 128
        assert 0.25 - 0.02 <= scale <= 2.0 + 0.02
        assert 0.7 / 1.3 - 0.05 <= (nw / nh) / (200 / 120) <= 1.3 / 0.7 + 0.05
        room = np.array([96, 128]) - d.new_hw
        assert np.all(np.minimum(room, 0) <= d.offset_hw) and np.all(d.offset_hw <= np.maximum(room, 0))
        assert abs(d.hue) <= 0.1 and 1 / 1.5 - 1e-9 <= d.sat <= 1.5 + 1e-9
        assert 1 / 1.5 - 1e-9 <= d.val <= 1.5 + 1e-9
        flips.append(d.flip)
    assert 0.4 < np.mean(flips) < 0.6
    assert draw_augment(np.random.default_rng(7), (50, 60), (64, 64), cfg) == draw_augment(
        np.random.default_rng(7), (50, 60), (64, 64), cfg)


def _reference_draw(u, image_hw, input_hw, cfg):
    """The draw's geometry as arrays (float64 NumPy): size, then offset."""
    ih, iw = map(float, image_hw)
    h, w = map(float, input_hw)
    j = cfg.jitter
    new_ar = iw / ih * (1 - j + 2 * j * u[0]) / (1 - j + 2 * j * u[1])
    scale = cfg.scale[0] + (cfg.scale[1] - cfg.scale[0]) * u[2]
    nh, nw = (scale * h, scale * h * new_ar) if new_ar < 1 else (scale * w / new_ar, scale * w)
    new_hw = np.maximum(np.round([nh, nw]), 1.0).astype(np.int64)
    room = np.array([h, w]) - new_hw
    offset = np.floor(u[3:5] * (room + np.sign(room)))
    offset = np.clip(offset, np.minimum(room, 0), np.maximum(room, 0)).astype(np.int64)
    return tuple(new_hw.tolist()), tuple(offset.tolist())


def test_a_draws_geometry_is_its_array_formula_over_every_size():
    """The draw works in Python numbers (a third of the planner's time went to NumPy calls on
    two values): the same sizes and offsets as the array formula, for images from 1 px to
    8K, canvases from 32 px, every jitter and scale range."""
    rng = np.random.default_rng(3)
    for case in range(3000):
        image_hw = tuple(int(v) for v in rng.integers(1, 8000, 2))
        input_hw = tuple(int(v) for v in rng.integers(1, 40, 2) * 32)
        low = float(rng.uniform(0.05, 1.0))
        cfg = AugmentConfig(jitter=float(rng.uniform(0, 0.9)),
                            scale=(low, low + float(rng.uniform(0, 2.0))))
        got = draw_augment(np.random.default_rng(case), image_hw, input_hw, cfg)
        u = np.random.default_rng(case).random(11)
        assert (got.new_hw, got.offset_hw) == _reference_draw(u, image_hw, input_hw, cfg), case
        assert all(type(v) is int for v in (*got.new_hw, *got.offset_hw))


@pytest.mark.parametrize("flip", [False, True])
def test_boxes_move_with_the_pixels_as_a_plain_loop_moves_them(flip):
    rng = np.random.default_rng(1)
    boxes = _boxes(rng, 90, 120, 12)
    draw = AugmentDraw((60, 200), (-5, -30), flip, 0.0, 1.0, 1.0)
    got = augment_boxes(boxes, (90, 120), draw, (64, 160), 1.0)
    want = []
    for x1, y1, x2, y2, c in boxes.astype(np.float64):
        sx, sy = 200 / 120, 60 / 90
        nx1, nx2 = x1 * sx - 30, x2 * sx - 30
        ny1, ny2 = y1 * sy - 5, y2 * sy - 5
        if flip:
            nx1, nx2 = 160 - nx2, 160 - nx1
        nx1, nx2 = np.clip([nx1, nx2], 0, 160)
        ny1, ny2 = np.clip([ny1, ny2], 0, 64)
        if nx2 - nx1 > 1 and ny2 - ny1 > 1:
            want.append([nx1, ny1, nx2, ny2, c])
    np.testing.assert_allclose(got, np.array(want).reshape(-1, 5), atol=1e-4)


def test_moved_boxes_are_the_column_formulas_bit_for_bit():
    """One float32 call per step (the planner's hot path) gives the column-by-column float32
    results exactly, flipped or not, and the mosaic's clip each quarter's."""
    rng = np.random.default_rng(4)
    for case in range(200):
        boxes = _boxes(rng, 90, 120, int(rng.integers(0, 9)))
        draw = draw_augment(np.random.default_rng(case), (90, 120), (64, 96), AugmentConfig())
        sy, sx = draw.new_hw[0] / 90.0, draw.new_hw[1] / 120.0
        (oy, ox), (h, w) = draw.offset_hw, (64.0, 96.0)
        x1, x2 = boxes[:, 0] * sx + ox, boxes[:, 2] * sx + ox
        y1, y2 = boxes[:, 1] * sy + oy, boxes[:, 3] * sy + oy
        if draw.flip:
            x1, x2 = w - x2, w - x1
        want = np.stack([np.clip(x1, 0, w), np.clip(y1, 0, h), np.clip(x2, 0, w),
                         np.clip(y2, 0, h), boxes[:, 4]], axis=1).astype(np.float32)
        want = want[(want[:, 2] - want[:, 0] > 1.0) & (want[:, 3] - want[:, 1] > 1.0)]
        got = augment_boxes(boxes, (90, 120), draw, (64, 96), 1.0)
        assert got.dtype == np.float32
        np.testing.assert_array_equal(got, want)
        parts = [augment_boxes(boxes[k::2], (90, 120), draw, (64, 96), 0.0) for k in range(2)]
        parts += parts
        cy, cx = 20.0, 41.0
        regions = [(0.0, 0.0, cx, cy), (cx, 0.0, w, cy), (0.0, cy, cx, h), (cx, cy, w, h)]
        want = []
        for b, (rx1, ry1, rx2, ry2) in zip(parts, regions):
            c = np.stack([np.clip(b[:, 0], rx1, rx2), np.clip(b[:, 1], ry1, ry2),
                          np.clip(b[:, 2], rx1, rx2), np.clip(b[:, 3], ry1, ry2), b[:, 4]], 1)
            want.append(c[(c[:, 2] - c[:, 0] > 1.0) & (c[:, 3] - c[:, 1] > 1.0)])
        np.testing.assert_array_equal(mosaic_boxes(parts, (20, 41), (64, 96), 1.0),
                                      np.concatenate(want).astype(np.float32))


def test_mosaic_boxes_are_clipped_to_their_quarter():
    full = np.array([[0, 0, 60, 40, 1]], np.float32)
    got = mosaic_boxes([full] * 4, (15, 25), (40, 60), 1.0)
    np.testing.assert_allclose(got[:, :4], [[0, 0, 25, 15], [25, 0, 60, 15], [0, 15, 25, 40],
                                            [25, 15, 60, 40]])
    # a quarter too thin for a box leaves it out
    assert len(mosaic_boxes([full] * 4, (1, 25), (40, 60), 1.0)) == 2


def test_letterbox_boxes_are_tensorflows():
    rng = np.random.default_rng(2)
    boxes = _boxes(rng, 70, 130, 10)
    want = boxes_to_input(tf.constant(boxes), tf.constant([70, 130]), tf.constant([96, 96]))
    want = want.numpy()
    keep = (want[:, 2] > want[:, 0]) & (want[:, 3] > want[:, 1])
    np.testing.assert_allclose(letterbox_boxes(boxes, (70, 130), (96, 96)), want[keep], atol=1e-4)


def test_padding_keeps_the_first_boxes():
    boxes = np.arange(20, dtype=np.float32).reshape(4, 5)
    np.testing.assert_array_equal(pad_boxes_np(boxes, 6)[:4], boxes)
    assert not pad_boxes_np(boxes, 6)[4:].any()
    np.testing.assert_array_equal(pad_boxes_np(boxes, 2), boxes[:2])


def _planner(n=10, **options):
    rng = np.random.default_rng(3)
    return Planner([(90, 120)] * n, [_boxes(rng, 90, 120, 3) for _ in range(n)], (64, 64), 5,
                   training=True, shuffle=True, batch_size=2, **options)


def test_each_epoch_shuffles_anew_and_every_record_comes_once():
    planner = _planner()
    orders = [[planner.element(e, i).sources[0] for i in range(10)] for e in range(3)]
    assert all(sorted(o) == list(range(10)) for o in orders)
    assert orders[0] != orders[1] != orders[2]
    unshuffled = Planner([(90, 120)] * 4, [np.zeros((0, 5))] * 4, (64, 64), 5, training=False,
                         shuffle=False, batch_size=2)
    assert [unshuffled.element(1, i).sources for i in range(4)] == [(0,), (1,), (2,), (3,)]


def test_multi_scale_sizes_change_by_group_and_mosaic_takes_its_share():
    planner = _planner(n=40, augment=AugmentConfig(mosaic=0.5),
                       multi_scale=MultiScale(((32, 32), (64, 96), (96, 64)), 2))
    sizes = [planner.element(0, i).input_hw for i in range(40)]
    for group in range(10):  # 2 batches of 2 share a size
        assert len(set(sizes[4 * group:4 * group + 4])) == 1
    assert len(set(sizes)) > 1
    fours = [len(planner.element(e, i).sources) == 4 for e in range(5) for i in range(40)]
    assert 0.4 < np.mean(fours) < 0.6
    plan = planner.element(0, 3)
    arrays = plan.as_arrays(7)
    assert arrays["boxes"].shape == (7, 5) and arrays["sources"].shape == (4,)
    assert int(arrays["count"]) == len(plan.sources)
    assert tuple(arrays["input_hw"]) == plan.input_hw


def test_validation_letterboxes_and_ignores_the_training_settings():
    planner = Planner([(90, 120)], [np.array([[10, 10, 50, 40, 2]], np.float32)], (64, 64), 1,
                      training=False, shuffle=False, batch_size=1,
                      augment=AugmentConfig(mosaic=1.0), tiles=TileSampling(32),
                      multi_scale=MultiScale(((32, 32),), 1))
    plan = planner.element(3, 0)
    assert plan.draws is None and plan.windows is None and plan.split_yx is None
    assert plan.input_hw == (64, 64)
    np.testing.assert_allclose(plan.boxes, letterbox_boxes(
        np.array([[10, 10, 50, 40, 2]], np.float32), (90, 120), (64, 64)))


def test_a_plan_needs_one_size_per_record():
    with pytest.raises(ValueError, match="one image size per record"):
        Planner([(10, 10)], [np.zeros((0, 5))] * 2, (32, 32), 0, training=True, shuffle=True,
                batch_size=1)


def test_a_plan_is_a_function_of_seed_epoch_and_index(tmp_path):
    from PIL import Image
    records = []
    for i in range(6):
        Image.new("RGB", (80 + 10 * i, 60)).save(tmp_path / f"{i}.png")
        records.append(Record(str(tmp_path / f"{i}.png"), np.array([[5, 5, 40, 30, i % 3]], np.float32)))
    config = DatasetConfig((64, 64), 3, True, seed=4, tiles=TileSampling(48),
                           augment=AugmentConfig(mosaic=1.0))
    hws = [(60, 80 + 10 * i) for i in range(6)]
    first, second = (make_planner(records, config, 11, hws) for _ in range(2))
    for epoch, index in [(3, 5), (0, 0), (7, 5)]:
        a, b = first.element(epoch, index), second.element(epoch, index)
        assert (a.sources, a.windows, a.draws, a.split_yx) == (b.sources, b.windows, b.draws,
                                                               b.split_yx)
        np.testing.assert_array_equal(a.boxes, b.boxes)
    assert first.element(0, 1).draws != first.element(1, 1).draws
