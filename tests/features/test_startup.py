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


@pytest.mark.slow  # 29 s: the whole benchmark end to end (its parts: tests/features/test_benchmarks.py)
def test_the_data_benchmark_reads_a_data_file(tmp_path, capsys):
    from yolo3.cli import main
    yaml = write_scale_dataset(str(tmp_path), 24, distinct=3, boxes_per_image=2.0, seed=2, val=4)
    assert main(["benchmark", "data", "--data", yaml, "--batches", "1", "--warmup", "0",
                 "--batch-size", "2", "--size", "64", "--mosaic", "0", "1", "--workers", "2",
                 "--no-grain"]) == 0
    out = capsys.readouterr().out
    assert f"20 images from {yaml}" in out
    for row in ("| tf.data (yolo3.data.pipeline) |", "| NumPy pipeline, PyDataset, 2 thread(s) |",
                "mosaic 0 (none)", "mosaic 1 (every image a mosaic of four)",
                "NumPy pipeline / tf.data", "feeding 1000 images/s takes about"):
        assert row in out, row
    assert out.count("| classic Python generator") == 1  # mosaic 0 only
