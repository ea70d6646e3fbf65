"""yolo3.modeling.planned_canvas: the device's resampling of packed windows equals the float64
reading of them (tests/window_reference.py), rounded to whole levels; gray where nothing shows;
compiled inside a model; saved and loaded."""
from __future__ import annotations

import keras
import numpy as np
from window_reference import read_windows

from yolo3.data.image_ops import mosaic_regions
from yolo3.data.planner import AugmentDraw
from yolo3.data.window_pack import element_windows, pack_windows
from yolo3.modeling.planned_canvas import PlannedCanvas

H, W = 64, 80


def _batch(seed: int, size: int = 4):
    rng = np.random.default_rng(seed)
    elements, splits = [], []
    for b in range(size):
        sources = []
        for _ in range(4):
            image = rng.integers(0, 256, (*rng.integers(20, 160, 2), 3), dtype=np.uint8)
            nh, nw = int(rng.integers(8, 200)), int(rng.integers(8, 200))
            draw = AugmentDraw((nh, nw), (int(rng.integers(-nh, H)), int(rng.integers(-nw, W))),
                               bool(rng.integers(2)), 0.0, 1.0, 1.0)
            sources.append((image, draw))
        split = (int(rng.integers(0, H)), int(rng.integers(0, W))) if b % 2 else (H, W)
        regions = (mosaic_regions(split, (H, W)) if b % 2
                   else [(0, H, 0, W)] + [(0, 0, 0, 0)] * 3)
        elements.append(element_windows(sources, (H, W), regions))
        splits.append(split)
    pixels, plans = pack_windows(elements)
    return pixels, plans, np.array(splits, np.float32)


def test_the_device_reads_the_windows_as_the_float64_reference():
    pixels, plans, splits = _batch(0)
    got = np.asarray(PlannedCanvas((H, W))(pixels, plans, splits))
    want = read_windows(pixels, plans, (H, W), splits)
    assert got.shape == (4, H, W, 3) and got.dtype == np.float32
    assert np.array_equal(got, np.round(got)) and got.min() >= 0 and got.max() <= 255
    diff = np.abs(got - np.round(want))
    assert diff.max() <= 1 and (diff == 0).mean() > 0.999  # ties and float32 round apart


def test_gray_where_no_window_shows():
    pixels, plans, splits = _batch(1, size=1)
    empty = np.zeros_like(plans)
    got = np.asarray(PlannedCanvas((H, W))(pixels, empty, splits))
    assert (got == 128).all()


def test_compiled_in_a_model_and_saved(tmp_path):
    pixels, plans, splits = _batch(2)
    inputs = [keras.Input((None, 3), dtype="uint8", name="window_pixels"),
              keras.Input((4, 11), name="window_plans"), keras.Input((2,), name="split")]
    model = keras.Model(inputs, PlannedCanvas((H, W))(*inputs))
    eager = np.asarray(PlannedCanvas((H, W))(pixels, plans, splits))
    compiled = model.predict([pixels, plans, splits], verbose=0, batch_size=2)
    _same_but_ties(compiled, eager)
    path = tmp_path / "canvas.keras"
    model.save(path)
    loaded = keras.saving.load_model(path)
    assert loaded.layers[-1].input_hw == (H, W)
    _same_but_ties(loaded.predict([pixels, plans, splits], verbose=0), eager)


def _same_but_ties(got: np.ndarray, want: np.ndarray) -> None:
    """Equal but where a compiler's fused multiply-add rounds a half level the other way (XLA
    on JAX: one value in 60,000 here)."""
    diff = np.abs(np.asarray(got) - want)
    assert diff.max() <= 1 and (diff == 0).mean() > 0.9999


def test_images_kept_whole_on_the_device_read_as_the_packed_windows():
    """``shared``: every source stays whole in one buffer (a cache on the device) and the plans
    count from its first pixel (``image_plan``): no pixel crosses per batch, the canvas is the
    packed windows' (to float32 positions: a tie or two)."""
    from yolo3.data.window_pack import image_plan
    rng = np.random.default_rng(4)
    images = [rng.integers(0, 256, (*rng.integers(20, 120, 2), 3), dtype=np.uint8)
              for _ in range(6)]
    starts = np.cumsum([0] + [im.shape[0] * im.shape[1] for im in images])
    cache = np.concatenate([im.reshape(-1, 3) for im in images])
    elements, plans, splits = [], [], []
    for b in range(3):
        picks = rng.choice(6, 4, replace=False)
        split = (int(rng.integers(1, H)), int(rng.integers(1, W)))
        regions = mosaic_regions(split, (H, W))
        draws = [AugmentDraw((int(rng.integers(20, 150)), int(rng.integers(20, 150))),
                             (int(rng.integers(-30, H)), int(rng.integers(-30, W))),
                             bool(rng.integers(2)), 0.0, 1.0, 1.0) for _ in range(4)]
        elements.append(element_windows([(images[i], d) for i, d in zip(picks, draws)], (H, W),
                                        regions))
        plans.append([image_plan(images[i], d, (H, W), r, int(starts[i]))
                      for i, d, r in zip(picks, draws, regions)])
        splits.append(split)
    packed, packed_plans = pack_windows(elements)
    splits = np.array(splits, np.float32)
    want = np.asarray(PlannedCanvas((H, W))(packed, packed_plans, splits))
    got = np.asarray(PlannedCanvas((H, W), shared=True)(cache, np.array(plans), splits))
    _same_but_ties(got, want)
