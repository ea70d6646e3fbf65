"""yolo3.benchmarks.startup: the scale benchmark's dataset is a valid YOLO-layout set of the size
asked for (its timing is the benchmark's job, never a test's)."""
from __future__ import annotations

import os

import numpy as np
import pytest

from yolo3.benchmarks.startup import NAMES, write_scale_dataset
from yolo3.cli import build_parser
from yolo3.data.annotations import load_training_records
from yolo3.data.yolo_layout import read_data_file


def test_the_scale_set_reads_back_with_every_box(tmp_path):
    yaml = write_scale_dataset(str(tmp_path), 60, distinct=4, boxes_per_image=3.0, seed=1, val=10)
    data = read_data_file(yaml)
    assert data.names == list(NAMES)
    train = load_training_records(data.sources("train"), data.names)
    val = load_training_records(data.sources("val"), data.names)
    assert (len(train), len(val)) == (50, 10)
    rows = sum(len(open(os.path.join(tmp_path, "labels", split, name)).read().splitlines())
               for split in ("train", "val")
               for name in os.listdir(tmp_path / "labels" / split))
    assert sum(len(r.boxes) for r in train + val) == rows > 60
    assert any(len(r.boxes) == 0 for r in train)  # negatives, as real sets have
    assert {r.image_hw for r in train} == {(480, 640)}
    inodes = {os.stat(r.path).st_ino for r in train + val}
    assert len(inodes) == 4  # hard links to the distinct images
    boxes = np.concatenate([r.boxes for r in train if len(r.boxes)])
    assert boxes[:, 4].max() < len(NAMES) and (boxes[:, 2] > boxes[:, 0]).all()


def test_the_data_benchmark_takes_a_scale():
    args = build_parser().parse_args(["benchmark", "data", "--scale", "118287", "--distinct", "64"])
    assert (args.scale, args.distinct, args.boxes) == (118287, 64, 7.3)


@pytest.mark.slow  # CI runs it: every contender's child once, end to end, on a data file
def test_the_data_benchmark_reads_a_data_file(tmp_path, capsys):
    from yolo3.cli import main
    yaml = write_scale_dataset(str(tmp_path), 24, distinct=3, boxes_per_image=2.0, seed=2, val=4)
    assert main(["benchmark", "data", "--data", yaml, "--batches", "1", "--warmup", "0",
                 "--batch-size", "2", "--size", "64", "--mosaic", "0", "--workers", "2",
                 "--no-grain"]) == 0
    out = capsys.readouterr().out
    assert f"20 images from {yaml}" in out
    for row in ("| tf.data (yolo3.data.pipeline) |", "| NumPy pipeline, PyDataset, 2 thread(s) |",
                "| NumPy pipeline, RAM cache + colours on the device, 2 thread(s) |",
                "| NumPy pipeline, RAM cache + colours on the device, 2 processes |",
                "| NumPy pipeline, RAM cache + geometry and colours on the device, 2 thread(s) |",
                "| NumPy pipeline, images kept on the device (--cache device: plans only), 2 "
                "thread(s) |",
                "| classic Python generator (PIL + NumPy) |", "mosaic 0 (none)",
                "NumPy pipeline / tf.data", "feeding 1000 images/s takes about",
                "the RAM cache: ", "the colours on the device ("):
        assert row in out, row


def test_the_data_benchmarks_tables_skip_the_classic_generator_with_a_mosaic(tmp_path, capsys,
                                                                            monkeypatch):
    """Each contender once per mosaic setting (keras-yolo3's generator only without one), the
    rates in the table as the children gave them, the ratios from them; children faked."""
    from yolo3.benchmarks import data as bench
    from yolo3.cli import main
    rates = iter(range(10, 1000, 10))
    asked = []

    def child(target, payload, **kwargs):
        if target.endswith("time_colours"):
            return {"device": "fake", "images_per_s": 500.0}
        asked.append((payload["kind"], payload["mosaic"]))
        return {"images_per_s": float(next(rates)), "fill_s": 0.5, "cache_bytes": 2 ** 20}
    monkeypatch.setattr(bench, "run_child", child)
    monkeypatch.setattr(bench, "matmul_peak_gflops", lambda: 100.0)
    monkeypatch.setattr(bench, "installed", lambda package: package == "tensorflow")
    monkeypatch.setattr(bench, "cores", lambda: 2)  # tf.data's row: the machine's cores
    yaml = write_scale_dataset(str(tmp_path), 12, distinct=2, boxes_per_image=1.0, seed=2, val=2)
    assert main(["benchmark", "data", "--data", yaml, "--mosaic", "0", "1", "--workers", "1",
                 "--size", "64"]) == 0
    out = capsys.readouterr().out
    kinds = ["tf", "numpy", "numpy-cached", "numpy-windows", "numpy-device-images"]
    assert asked == [(k, 0.0) for k in kinds + ["classic"]] + [(k, 1.0) for k in kinds]
    assert "| tf.data (yolo3.data.pipeline) | 2 | 10.0 | 5.0 |" in out
    assert "| NumPy pipeline, PyDataset, 1 thread(s) | 1 | 20.0 | 20.0 |" in out
    assert "| classic Python generator (PIL + NumPy) | 1 | 60.0 | 60.0 |" in out
    assert "| tf.data (yolo3.data.pipeline) | 2 | 70.0 | 35.0 |" in out  # mosaic 1's rows
    assert out.count("| classic Python generator") == 1
    assert "NumPy pipeline / tf.data, images/s per core: 4.00x" in out  # 20 / (10 / 2)
    assert "NumPy pipeline / tf.data, images/s per core: 2.29x" in out  # 80 / (70 / 2)
    assert "feeding 1000 images/s takes about 50 cores" in out  # 1000 / 20
    assert "1.5x the NumPy pipeline's 20.0" in out  # the cached row 30 / 20
    # the windows' row 40: over the plain pipeline and over the colours alone on the device
    assert "40.0 images/s per thread, 2.0x the NumPy pipeline's 20.0, 1.33x the colours" in out
    assert "(--cache device: plans and targets only): 50.0 images/s per " \
        "thread, 2.5x the NumPy pipeline's 20.0" in out
    assert "the colours on the device (fake): 500 images/s" in out
