"""The benchmarks' own arithmetic and runners (their timings are not tested: they are measured by
running them)."""
from __future__ import annotations

import numpy as np
import pytest

from yolo3.benchmarks.recipe import map_at, time_to_reach
from yolo3.benchmarks.training import forward_gflops


def test_time_to_accuracy_reading():
    times, maps = [10.0, 20.0, 30.0], [0.1, 0.5, 0.7]
    assert time_to_reach(times, maps, 0.5) == 20.0
    assert time_to_reach(times, maps, 0.8) is None
    assert map_at(times, maps, 25.0) == 0.5 and map_at(times, maps, 5.0) == 0.0
    assert map_at(times, maps, 30.0) == 0.7


def test_flop_counts_are_darknets():
    assert forward_gflops("yolov3", 416) == pytest.approx(65.86, abs=0.01)  # Darknet: 65.864 BFLOPs
    assert forward_gflops("tiny", 416) == pytest.approx(5.56, abs=0.01)  # Darknet: 5.571 (with maxpool 1)


def test_opencv_runner_gives_the_raw_maps_of_the_converted_body(tmp_path):
    """The accuracy table decodes OpenCV's maps with our host decoding: they must be the maps our
    converted body computes, in the same layout."""
    from yolo3.benchmarks.export import OpenCVRunner
    from yolo3.darknet.convert import convert
    from yolo3.darknet.layout import layout_cfg_text
    from yolo3.darknet.random_weights import write_random_weights
    from yolo3.detector import YOLO
    cfg, weights, model = tmp_path / "t.cfg", tmp_path / "t.weights", tmp_path / "t.keras"
    cfg.write_text(layout_cfg_text("tiny", num_classes=3, input_size=(96, 96)))
    write_random_weights(str(cfg), str(weights), seed=1)
    convert(str(cfg), str(weights), str(model), progress=False)
    x = np.random.default_rng(0).uniform(0, 1, (2, 96, 96, 3)).astype(np.float32)
    runner = OpenCVRunner(str(cfg), str(weights), (32, 16))
    ours = YOLO(str(model), precision="float32").forward(x)
    theirs = runner.run(x)
    assert sorted(theirs) == ["raw_s16", "raw_s32"]
    for mine, key in zip(ours, ("raw_s32", "raw_s16")):
        assert theirs[key].shape == mine.shape
        err = np.linalg.norm(theirs[key] - mine) / np.linalg.norm(mine)
        assert err < 1e-5, (key, err)
