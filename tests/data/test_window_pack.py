"""yolo3.data.window_pack: the windows the host cuts for the device's resampling. Read back in
float64 they are the canvas the draws describe (an independent per-pixel reference), within
OpenCV's 1/32-pixel positions of the host's uint8 placement; cuts are the source's own pixels,
no more than the samples read; rows pack by powers of two."""
from __future__ import annotations

import numpy as np
import pytest
from window_reference import canvas_from_draws, read_windows

from yolo3.data.image_ops import letterbox_u8, mosaic_regions, place_image_u8
from yolo3.data.planner import AugmentDraw
from yolo3.data.window_pack import (
    MIN_ROW_PIXELS,
    WINDOW_PLAN_WIDTH,
    element_windows,
    letterbox_window,
    pack_windows,
    placed_window,
)

H, W = 96, 128


def _scene(rng: np.random.Generator, h: int, w: int, smooth: bool) -> np.ndarray:
    """uint8 ``(h, w, 3)``: noise, or a smooth scene (gradients and a few discs)."""
    if not smooth:
        return rng.integers(0, 256, (h, w, 3), dtype=np.uint8)
    yy, xx = np.mgrid[0:h, 0:w] / max(h, w)
    image = np.stack([128 + 100 * np.sin(6 * xx + k) * np.cos(4 * yy - k) for k in range(3)], -1)
    for _ in range(3):
        cy, cx, radius = rng.uniform(0, 1, 3) * (h, w, min(h, w) / 3)
        image[(yy * max(h, w) - cy) ** 2 + (xx * max(h, w) - cx) ** 2 < radius ** 2] = \
            rng.uniform(0, 255, 3)
    return image.clip(0, 255).astype(np.uint8)


def _element(rng: np.random.Generator, mosaic: bool, smooth: bool):
    """Four sources with random draws (mirrored or not, shown partly, enlarged or reduced, and
    some not at all) and their regions: a mosaic's four, or one image over the canvas."""
    sources = []
    for _ in range(4):
        image = _scene(rng, *rng.integers(30, 260, 2), smooth)
        nh, nw = int(rng.integers(10, 300)), int(rng.integers(10, 300))
        draw = AugmentDraw((nh, nw), (int(rng.integers(-nh, H)), int(rng.integers(-nw, W))),
                           bool(rng.integers(2)), 0.0, 1.0, 1.0)
        sources.append((image, draw))
    split = (int(rng.integers(0, H + 1)), int(rng.integers(0, W + 1))) if mosaic else (H, W)
    regions = mosaic_regions(split, (H, W)) if mosaic else [(0, H, 0, W)] + [(0, 0, 0, 0)] * 3
    return sources, regions, split


def _host_u8(sources, regions) -> np.ndarray:
    canvas = np.empty((H, W, 3), np.uint8)
    for (image, draw), (y1, y2, x1, x2) in zip(sources, regions):
        if y2 > y1 and x2 > x1:
            place_image_u8(image, draw, (H, W), (y1, y2, x1, x2), out=canvas[y1:y2, x1:x2])
    return canvas


@pytest.mark.parametrize("mosaic", [False, True], ids=["one image", "mosaic"])
def test_packed_windows_read_back_are_the_canvas_of_the_draws(mosaic):
    rng = np.random.default_rng(7 + mosaic)
    elements = [_element(rng, mosaic, smooth=bool(i % 2)) for i in range(12)]
    pixels, plans = pack_windows([element_windows(s, (H, W), r) for s, r, _ in elements])
    got = read_windows(pixels, plans, (H, W), [split for _, _, split in elements])
    for b, (sources, regions, _) in enumerate(elements):
        want = canvas_from_draws(sources, regions, (H, W))
        # the plans are float32: positions to about 1e-5 pixel, a few thousandths of a level
        np.testing.assert_allclose(got[b], want, rtol=0, atol=0.01)


def test_the_device_path_is_the_host_placement_within_opencvs_rounding():
    """OpenCV's warp places its samples to 1/32 pixel, the windows' plans exactly: the canvases
    differ by under a level on average (the issue asks 2/255), most on noise, the worst case."""
    rng = np.random.default_rng(3)
    for smooth, mean_limit in ((True, 0.25), (False, 1.0)):
        diffs = []
        for i in range(16):
            sources, regions, split = _element(rng, mosaic=bool(i % 2), smooth=smooth)
            pixels, plans = pack_windows([element_windows(sources, (H, W), regions)])
            device = np.round(read_windows(pixels, plans, (H, W), [split])[0])
            diffs.append(np.abs(device - _host_u8(sources, regions)))
        diffs = np.stack(diffs)
        assert diffs.mean() < mean_limit, (smooth, diffs.mean())
        assert diffs.max() <= (6 if not smooth else 4), (smooth, diffs.max())


def test_cuts_are_the_sources_pixels_and_no_more_than_the_samples_read():
    rng = np.random.default_rng(11)
    image = _scene(rng, 200, 240, smooth=False)
    draw = AugmentDraw((100, 120), (-30, 50), False, 0.0, 1.0, 1.0)  # halved, cut at the top
    cut, plan = placed_window(image, draw, (H, W))
    r0, r1, c0, c1, start, h, w, ay, by, ax, bx = plan
    assert (r0, r1, c0, c1) == (0, 70, 50, 128) and start == 0 and (h, w) == cut.shape[:2]
    assert np.shares_memory(cut, image)  # a view: no resampling, no copy yet
    top = int(np.floor((30 + 0.5) * 2 - 0.5))  # the first source row sampled
    np.testing.assert_array_equal(cut, image[top:top + cut.shape[0], 0:cut.shape[1]])
    last_row = ay * (r1 - r0 - 1) + by  # every sample's neighbours lie in the cut, and no more
    assert int(np.floor(last_row)) + 1 == cut.shape[0] - 1 and by >= 0
    assert int(np.floor(ax * (c1 - c0 - 1) + bx)) + 1 == cut.shape[1] - 1
    mirrored = AugmentDraw((100, 120), (-30, 50), True, 0.0, 1.0, 1.0)
    cut_m, plan_m = placed_window(image, mirrored, (H, W))
    assert plan_m[9] == -ax and plan_m[2:4].tolist() == [0, 78]  # read right to left
    assert placed_window(image, AugmentDraw((20, 20), (H + 5, 0), False, 0, 1, 1), (H, W)) is None


def test_the_letterbox_is_one_window():
    rng = np.random.default_rng(2)
    image = _scene(rng, 150, 90, smooth=True)
    window = letterbox_window(image, (H, W))
    pixels, plans = pack_windows([[window, None, None, None]])
    got = np.round(read_windows(pixels, plans, (H, W), [(H, W)])[0])
    host = letterbox_u8(image, (H, W))
    assert np.abs(got - host).mean() < 0.25 and np.abs(got - host).max() <= 3
    assert (got[:, :plans[0, 0, 2].astype(int)] == 128).all()  # the gray bars
    smaller = image[::2, ::2]  # a cached copy: the geometry of the displayed size
    cut, plan = letterbox_window(smaller, (H, W), image_hw=image.shape[:2])
    np.testing.assert_array_equal(plan[:4], window[1][:4])


def test_rows_pack_one_after_another_by_powers_of_two():
    rng = np.random.default_rng(5)
    a = (rng.integers(0, 256, (10, 20, 3), dtype=np.uint8), np.arange(11.0))
    b = (rng.integers(0, 256, (30, 70, 3), dtype=np.uint8), np.arange(11.0) + 1)
    pixels, plans = pack_windows([[a, None, b, None], [None, None, None, None]])
    assert pixels.dtype == np.uint8 and pixels.shape == (2, MIN_ROW_PIXELS, 3)
    assert plans.shape == (2, 4, WINDOW_PLAN_WIDTH) and plans.dtype == np.float32
    assert plans[0, 0, 4] == 0 and plans[0, 2, 4] == 200  # the second cut starts after the first
    np.testing.assert_array_equal(pixels[0, :200].reshape(10, 20, 3), a[0])
    np.testing.assert_array_equal(pixels[0, 200:2300].reshape(30, 70, 3), b[0])
    assert not pixels[0, 2300:].any() and not pixels[1].any()
    assert not plans[0, 1].any() and not plans[1].any()  # nothing shows: r1 <= r0
    big = (np.zeros((100, 50, 3), np.uint8), np.zeros(11))
    assert pack_windows([[big, None, None, None]])[0].shape[1] == 8192  # 5000 -> 2^13
