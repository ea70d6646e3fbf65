"""Tiled training windows and their boxes (yolo3.data.planner), against plain loops; the windows cut
by the tf.data pipeline."""
from __future__ import annotations

import numpy as np
import pytest

from yolo3.data.tiling import TileSampling, draw_tile_window, window_boxes


def _boxes(rng, h, w, n, lo=8, hi=40):
    out = []
    for _ in range(n):
        bw, bh = rng.uniform(lo, hi, size=2)
        x1, y1 = rng.uniform(0, w - bw), rng.uniform(0, h - bh)
        out.append([x1, y1, x1 + bw, y1 + bh, rng.integers(3)])
    return np.array(out, np.float32).reshape(-1, 5)


def _window(hw, boxes, seed, sampling, input_hw=None):
    return np.array(draw_tile_window(np.random.default_rng(seed), hw, boxes, sampling, input_hw))


def test_windows_hold_the_drawn_object_whole_and_lie_in_the_image():
    rng = np.random.default_rng(0)
    sampling = TileSampling(416, whole=0.0, background=0.0)
    for i in range(60):
        h, w = int(rng.integers(300, 1200)), int(rng.integers(300, 2000))
        box = _boxes(rng, h, w, 1)
        x1, y1, x2, y2 = _window((h, w), box, [i, 5], sampling)
        assert 0 <= x1 < x2 <= w and 0 <= y1 < y2 <= h
        assert (x2 - x1, y2 - y1) == (min(416, w), min(416, h))
        bx1, by1, bx2, by2 = box[0, :4]
        assert x1 <= bx1 and y1 <= by1 and bx2 <= x2 and by2 <= y2


def test_an_object_larger_than_a_tile_keeps_its_centre():
    box = np.array([[100, 100, 900, 500, 0]], np.float32)
    for i in range(20):
        x1, y1, x2, y2 = _window((1000, 1500), box, [i, 1], TileSampling(256, whole=0, background=0))
        assert x1 <= 500 <= x2 and y1 <= 300 <= y2


def test_shares_of_whole_images_and_background_windows():
    rng = np.random.default_rng(1)
    boxes = _boxes(rng, 1080, 1920, 2, 10, 12)
    whole, holding = 0, 0
    sampling = TileSampling(320, whole=0.3, background=0.5)
    for i in range(600):
        x1, y1, x2, y2 = _window((1080, 1920), boxes, [i, 9], sampling)
        if (x1, y1, x2, y2) == (0, 0, 1920, 1080):
            whole += 1
            continue
        inside = ((boxes[:, 0] >= x1) & (boxes[:, 2] <= x2) & (boxes[:, 1] >= y1)
                  & (boxes[:, 3] <= y2))
        holding += bool(inside.any())
    assert whole / 600 == pytest.approx(0.3, abs=0.06)
    # half the tiles are drawn around an object; random ones rarely hold one of two tiny boxes
    assert holding / (600 - whole) == pytest.approx(0.5 + 0.5 * 0.1, abs=0.1)
    assert TileSampling(320, whole=1.0).whole == 1.0
    assert tuple(_window((1080, 1920), boxes, [3, 3], TileSampling(320, whole=1.0))) == (0, 0, 1920, 1080)


def test_boxes_are_shifted_clipped_and_dropped_as_a_plain_loop_does():
    rng = np.random.default_rng(2)
    sampling = TileSampling(200, whole=0.0, background=0.3, min_visible=0.5)
    for i in range(30):
        boxes = _boxes(rng, 500, 700, 12, 10, 120)
        x1, y1, x2, y2 = _window((500, 700), boxes, [i, 4], sampling)
        got = window_boxes(boxes, (x1, y1, x2, y2), 0.5)
        ref = []
        for bx1, by1, bx2, by2, c in boxes.astype(np.float64):
            sx1, sy1, sx2, sy2 = bx1 - x1, by1 - y1, bx2 - x1, by2 - y1
            cx1, cy1 = min(max(sx1, 0), x2 - x1), min(max(sy1, 0), y2 - y1)
            cx2, cy2 = min(max(sx2, 0), x2 - x1), min(max(sy2, 0), y2 - y1)
            visible = max(cx2 - cx1, 0) * max(cy2 - cy1, 0)
            if visible > 0 and visible >= 0.5 * (sx2 - sx1) * (sy2 - sy1):
                ref.append([cx1, cy1, cx2, cy2, c])
        np.testing.assert_allclose(got, np.array(ref).reshape(-1, 5), atol=1e-4)


def test_objects_large_at_the_whole_image_are_shown_whole():
    """1920x1080 into 320x320 (a sixth): an object of side 96 px or more (16 at the input) drawn
    for a window is shown on the whole image, a smaller one in a window that holds it; background
    windows, and images whose input size is not given, are not routed; an image all of whose
    objects are large is shown whole (nothing there for a tile to find)."""
    sampling = TileSampling(320, whole=0.0, background=0.0, whole_from=16)
    whole_image = (0, 0, 1920, 1080)
    small = [100, 100, 110, 110, 1]  # keeps the image from being all large
    for side, whole in ((96, True), (120, True), (95, False), (30, False)):
        boxes = np.array([[900, 500, 900 + side, 500 + side, 0], small], np.float32)
        picks = set()
        for i in range(40):
            drawn = tuple(_window((1080, 1920), boxes, [i, side], sampling, (320, 320)))
            plain = tuple(_window((1080, 1920), boxes, [i, side], TileSampling(
                320, whole=0.0, background=0.0)))
            picked = min(int(np.random.default_rng([i, side]).random(5)[4] * 2), 1)  # its draw
            picks.add(picked)
            # the large object drawn: the whole image; the small one: its window as before
            assert (drawn == whole_image) == (whole and picked == 0), (side, drawn)
            if drawn != whole_image:
                assert drawn == plain
        assert picks == {0, 1}
    big = np.array([[900, 500, 1020, 620, 0]], np.float32)
    background = TileSampling(320, whole=0.0, background=1.0, whole_from=16)
    assert all(tuple(_window((1080, 1920), big, [i, 2], background, (320, 320))) == whole_image
               for i in range(20))  # all large
    assert tuple(_window((1080, 1920), big, [1, 1], background)) != whole_image  # no input size
    mixed = np.concatenate([big, np.array([small], np.float32)])
    assert all(tuple(_window((1080, 1920), mixed, [i, 2], background, (320, 320))) != whole_image
               for i in range(20))  # background windows are not routed


@pytest.mark.parametrize("kwargs", [{"size": 0}, {"size": 2.5}, {"size": 416, "whole": 1.5},
                                    {"size": 416, "background": -0.1},
                                    {"size": 416, "min_visible": 2},
                                    {"size": 416, "whole_from": -1},
                                    {"size": 416, "whole_from": float("nan")}])
def test_bad_settings_are_refused(kwargs):
    with pytest.raises(ValueError, match="tile"):
        TileSampling(**kwargs)


def test_the_pipeline_trains_on_tiles_at_the_input_size(tmp_path):
    from PIL import Image

    from yolo3.data.annotations import Record
    from yolo3.data.pipeline import DatasetConfig, make_dataset

    rng = np.random.default_rng(3)
    records = []
    for i in range(4):
        image = np.full((1080, 1920, 3), 100, np.uint8)
        boxes = _boxes(rng, 1080, 1920, 3, 12, 20)
        for x1, y1, x2, y2, _ in boxes.astype(int):
            image[y1:y2, x1:x2] = (240, 20, 20)
        path = tmp_path / f"{i}.png"
        Image.fromarray(image).save(path)
        records.append(Record(str(path), boxes.astype(np.float64)))
    config = DatasetConfig((128, 128), 4, training=True, augment=None, seed=1,
                           tiles=TileSampling(256, whole=0.0, background=0.0))
    (images, boxes), = list(make_dataset(records, config).take(1))
    assert images.shape == (4, 128, 128, 3)
    real = boxes.numpy()[..., 2] > 0
    sides = (boxes.numpy()[..., 2:4] - boxes.numpy()[..., :2])[real]
    # each image holds at least its drawn object, at half its native size (256 px -> 128)
    assert real.sum(axis=1).min() >= 1
    assert sides.min() >= 12 / 2 * 0.5 - 1e-3 and sides.max() <= 20 / 2 + 1e-3
    # the whole-image resize would have shrunk them 15-fold
    plain = DatasetConfig((128, 128), 4, training=True, augment=None, seed=1)
    (_, whole), = list(make_dataset(records, plain).take(1))
    w = whole.numpy()
    assert ((w[..., 2:4] - w[..., :2])[w[..., 2] > 0]).max() < 2
    # validation is never tiled
    val = DatasetConfig((128, 128), 4, training=False, seed=1, tiles=TileSampling(256))
    (_, vb), = list(make_dataset(records, val).take(1))
    np.testing.assert_allclose(vb.numpy(), list(make_dataset(
        records, DatasetConfig((128, 128), 4, training=False, seed=1)).take(1))[0][1].numpy())


@pytest.mark.parametrize("mosaic", [0.0, 0.5])
def test_images_kept_whole_are_augmented_as_training_without_tiles(mosaic):
    """Tile windows draw from their own stream: where every image is kept whole (all objects
    large at the input, or none), tiled training is resize-only training, plan for plan."""
    from yolo3.data.planner import AugmentConfig, Planner
    rng = np.random.default_rng(8)
    hws = [(960, 1280)] * 12
    # 15-50 px at the 320 input, and every fourth image empty (kept whole too)
    boxes = [_boxes(rng, 960, 1280, 4 if i % 4 else 0, 60, 200) for i in range(12)]
    common = dict(training=True, shuffle=True, batch_size=4, augment=AugmentConfig(mosaic=mosaic))
    plain = Planner(hws, boxes, (320, 320), 5, **common)
    tiled = Planner(hws, boxes, (320, 320), 5, tiles=TileSampling(320, whole_from=6), **common)
    for epoch in range(2):
        for i in range(12):
            a, b = plain.element(epoch, i), tiled.element(epoch, i)
            assert b.windows == tuple((0, 0, 1280, 960) for _ in b.sources)
            assert (a.sources, a.draws, a.split_yx, a.input_hw) == \
                (b.sources, b.draws, b.split_yx, b.input_hw)
            np.testing.assert_array_equal(a.boxes, b.boxes)


def test_an_empty_image_gives_background_windows_only_without_the_hand_over():
    """With the hand-over an image without objects has nothing small for a tile to find and is
    kept whole; without it (``whole_from`` 0, the earlier recipe) it gives background windows."""
    empty = np.zeros((0, 5), np.float32)
    for whole_from, expect_tiles in ((6.0, False), (0.0, True)):
        sampling = TileSampling(320, whole=0.25, whole_from=whole_from)
        windows = [draw_tile_window(np.random.default_rng(i), (960, 1280), empty, sampling,
                                    (320, 320)) for i in range(40)]
        tiles = [wd for wd in windows if wd != (0, 0, 1280, 960)]
        assert bool(tiles) == expect_tiles, whole_from
        assert all(x2 - x1 == 320 and y2 - y1 == 320 for x1, y1, x2, y2 in tiles)
