"""Data command-line tools, run in-process through their ``main(argv)``."""
from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from yolo3.cli import (
    check_dataset,
    coco_annotation,
    kmeans,
    make_synthetic_dataset,
    voc_annotation,
)
from yolo3.data.annotations import load_annotations
from yolo3.data.class_names import read_classes
from yolo3.ops.anchors import read_anchors


@pytest.fixture
def shapes(tmp_path):
    out = tmp_path / "shapes"
    assert make_synthetic_dataset.main(["--out", str(out), "--num-images", "12", "--size", "64", "96",
                                        "--val-fraction", "0.25", "--seed", "2"]) == 0
    return out


def test_make_synthetic_dataset_cli(shapes):
    recs = load_annotations(shapes / "annotations.txt", read_classes(shapes / "classes.txt"))
    assert len(recs) == 12 and recs[0].image_hw == (64, 96)
    assert len(load_annotations(shapes / "train.txt")) == 9 and len(load_annotations(shapes / "val.txt")) == 3


def test_check_dataset_ok_and_draws(shapes, tmp_path, capsys):
    draw = tmp_path / "drawn"
    rc = check_dataset.main(["--annotations", str(shapes / "annotations.txt"), "--classes",
                             str(shapes / "classes.txt"), "--draw", "3", "--draw-dir", str(draw)])
    out = capsys.readouterr().out
    assert rc == 0 and "images: 12" in out and "no problems" in out and "circle" in out
    files = sorted(f for f in os.listdir(draw) if not f.startswith("."))  # the marker is hidden
    assert len(files) == 3 and all(f.endswith(".png") for f in files)
    assert Image.open(draw / files[0]).size == (96, 64)


def test_check_draws_the_labels_into_its_plots_folder(shapes, tmp_path, capsys, monkeypatch):
    from cli_harness import assert_refused, run_cli
    plots = tmp_path / "plots"
    common = ["check", "--annotations", shapes / "annotations.txt", "--classes",
              shapes / "classes.txt"]
    anchors = Path(__file__).resolve().parents[2] / "model_data" / "tiny_yolo_anchors.txt"
    code, err = run_cli([*common, "--plots", plots, "--anchors", anchors], capsys)
    assert code == 0, err
    with Image.open(plots / "labels.png") as im:
        assert im.format == "PNG"
    code, err = run_cli([*common, "--anchors", anchors], capsys)
    assert_refused(code, err, "--anchors needs --plots")
    # the first batches as the pipeline delivers them: a grid of 12 augmented mosaics
    code, err = run_cli([*common, "--plots", plots, "--batches", 2, "--mosaic", 1,
                         "--input-size", 64], capsys)
    assert code == 0, err
    for k in (0, 1):
        with Image.open(plots / f"train_batch{k}.jpg") as im:
            assert im.size == (4 * 64, 3 * 64)  # 12 images: 3 rows of 4
    for flags, named in ((["--batches", 2], "--batches needs --plots"),
                         (["--plots", plots, "--mosaic", 1], "--mosaic needs --batches")):
        code, err = run_cli([*common, *flags], capsys)
        assert_refused(code, err, named)
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "labels.png").write_bytes(b"my own picture")
    code, err = run_cli([*common, "--plots", mine], capsys)
    assert_refused(code, err, "labels.png")
    assert (mine / "labels.png").read_bytes() == b"my own picture"
    # without matplotlib: one line, the rest of the check as ever
    import yolo3.core.extras as extras
    monkeypatch.setattr(extras, "installed", lambda name: name != "matplotlib")
    assert check_dataset.main([str(a) for a in common[1:]] + ["--plots", str(tmp_path / "p2")]) \
        == 0
    out = capsys.readouterr().out
    assert "plots skipped: matplotlib is not installed (pip install 'yolo3[plot]'" in out
    assert "no problems" in out


def test_check_dataset_reports_every_problem(shapes, capsys):
    ann = shapes / "annotations.txt"
    lines = ann.read_text().splitlines()
    lines[1] = lines[1].split()[0] + " 5,5,1,9,0"          # x2 <= x1
    lines[4] = "images/missing.png 1,1,5,5,0"               # missing image
    lines[6] = lines[6].split()[0] + " 1,1,5,5,7"          # class outside the list
    ann.write_text("\n".join(lines) + "\n")
    rc = check_dataset.main(["--annotations", str(ann), "--classes", str(shapes / "classes.txt")])
    err = capsys.readouterr().err
    assert rc == 1
    for line_no, reason in [(2, "x2 <= x1"), (5, "image file not found"), (7, "outside the class list")]:
        assert f"{ann}:{line_no}:" in err and reason in err
    assert "3 problems" in err


def test_kmeans_cli_writes_anchor_file(shapes, tmp_path, capsys):
    out = tmp_path / "anchors.txt"
    rc = kmeans.main(["--annotations", str(shapes / "annotations.txt"), "--clusters", "6", "--out", str(out),
                      "--restarts", "2"])
    text = capsys.readouterr().out
    assert rc == 0 and "new anchors" in text and "default yolov3" in text
    anchors = read_anchors(out)
    assert anchors.shape == (6, 2) and np.all(np.diff(anchors.prod(1)) >= 0)


def _voc_year(year: Path, image: str = "a b.jpg") -> Path:
    """A VOC year folder with one image and its XML: a dog, and a cat marked difficult."""
    for sub in ("Annotations", "ImageSets/Main", "JPEGImages"):
        (year / sub).mkdir(parents=True)
    Image.fromarray(np.zeros((40, 50, 3), np.uint8)).save(year / "JPEGImages" / image)
    (year / "Annotations" / "ab.xml").write_text(
        f"<annotation><filename>{image}</filename>"
        "<object><name>dog</name><difficult>0</difficult><bndbox><xmin>1</xmin><ymin>2</ymin><xmax>30</xmax>"
        "<ymax>20</ymax></bndbox></object><object><name>cat</name><difficult>1</difficult><bndbox><xmin>1</xmin>"
        "<ymin>2</ymin><xmax>9</xmax><ymax>9</ymax></bndbox></object></annotation>")
    (year / "ImageSets" / "Main" / "val.txt").write_text("ab\n")
    return year


def test_voc_annotation_cli(tmp_path):
    year = _voc_year(tmp_path / "VOCdevkit" / "VOC2012")
    out = tmp_path / "voc.txt"
    base = ["--voc-root", str(tmp_path / "VOCdevkit"), "--year", "2012", "--image-set", "val", "--out", str(out)]
    assert voc_annotation.main(base) == 0
    recs = load_annotations(out)
    assert recs[0].path == str(year / "JPEGImages" / "a b.jpg")
    np.testing.assert_array_equal(recs[0].boxes, [[1, 2, 30, 20, 11]])  # dog is VOC class 11
    assert voc_annotation.main(base + ["--include-difficult"]) == 0
    assert len(load_annotations(out)[0].boxes) == 2


def test_check_counts_the_ignore_regions(tmp_path, capsys):
    from yolo3.cli import check_dataset
    year = _voc_year(tmp_path / "VOC2012", "a.jpg")
    assert check_dataset.main(["--annotations", str(year / "Annotations")]) == 0
    assert "ignore regions: 1 difficult, 0 crowd: evaluation counts a detection on one neither " \
           "way, training leaves them out" in capsys.readouterr().out


def test_coco_annotation_cli(tmp_path):
    (tmp_path / "imgs").mkdir()
    Image.fromarray(np.zeros((30, 40, 3), np.uint8)).save(tmp_path / "imgs" / "1.png")
    data = {"images": [{"id": 1, "file_name": "1.png"}],
            "categories": [{"id": 3, "name": "car"}, {"id": 1, "name": "person"}],
            "annotations": [{"id": 9, "image_id": 1, "category_id": 3, "bbox": [2, 3, 10, 5], "iscrowd": 0}]}
    (tmp_path / "inst.json").write_text(json.dumps(data))
    out, classes = tmp_path / "coco.txt", tmp_path / "coco_classes.txt"
    assert coco_annotation.main(["--annotations", str(tmp_path / "inst.json"), "--images", str(tmp_path / "imgs"),
                                 "--out", str(out), "--classes-out", str(classes)]) == 0
    assert read_classes(classes) == ["person", "car"]
    recs = load_annotations(out, read_classes(classes))
    np.testing.assert_array_equal(recs[0].boxes, [[2, 3, 12, 8, 1]])


def test_check_prints_the_tile_and_balance_suggestions(tmp_path, capsys):
    from yolo3.data.annotations import Record
    from yolo3.data.synthetic import write_dataset_files
    from yolo3.ops.class_balance import class_weights
    from yolo3.ops.tiles import suggest_tile

    rng = np.random.default_rng(0)
    records = []
    (tmp_path / "images").mkdir()
    for i in range(20):
        path = tmp_path / "images" / f"{i}.png"
        Image.fromarray(np.zeros((540, 960, 3), np.uint8)).save(path)
        boxes = []
        for _ in range(3):
            x, y, s = rng.uniform(0, 900), rng.uniform(0, 500), rng.uniform(6, 20)
            boxes.append([x, y, x + s, y + s, 1 if i == 0 else 0])  # class 1: one image
        records.append(Record(str(path), np.array(boxes, np.float32), (540, 960), 1))
    write_dataset_files(str(tmp_path), records, ["common", "rare"], 0.0, "annotations.txt")
    rc = check_dataset.main(["--annotations", str(tmp_path / "annotations.txt"), "--classes",
                             str(tmp_path / "classes.txt"), "--input-size", "320"])
    out = capsys.readouterr().out
    assert rc == 0, out
    box_wh = np.concatenate([r.boxes[:, 2:4] - r.boxes[:, :2] for r in records])
    tip = suggest_tile(box_wh, np.tile([[540, 960]], (len(box_wh), 1)), (320, 320))
    assert f"tiles: suggested --tile {tip.size} ({tip.reason})" in out
    weights = class_weights([57, 3], "effective")
    assert "class balance: rare: rare (3 boxes, 5.0%)" in out
    assert f"--class-weights auto would weigh common {weights[0]:.2f}, rare {weights[1]:.2f}" in out
    assert "suggested: --repeat-threshold 0.5: repeats 1 of 20 images" in out


def test_check_plots_rerun_with_fewer_batches_removes_its_older_ones(tmp_path, capsys):
    """The second run draws one batch: the first run's train_batch1.jpg goes (it would look
    current), a file of the user's beside it stays."""
    from yolo3.cli import check_dataset
    from yolo3.data.synthetic import make_synthetic_dataset
    make_synthetic_dataset(str(tmp_path / "d"), 6, (64, 64), val_fraction=0.0, seed=1)
    argv = ["--annotations", str(tmp_path / "d" / "annotations.txt"), "--classes",
            str(tmp_path / "d" / "classes.txt"), "--plots", str(tmp_path / "p")]
    assert check_dataset.main(argv + ["--batches", "2"]) == 0
    assert (tmp_path / "p" / "train_batch1.jpg").is_file()
    (tmp_path / "p" / "notes.jpg").write_bytes(b"the user's")
    assert check_dataset.main(argv + ["--batches", "1", "--exist-ok"]) == 0
    assert (tmp_path / "p" / "train_batch0.jpg").is_file()
    assert not (tmp_path / "p" / "train_batch1.jpg").exists()
    assert (tmp_path / "p" / "notes.jpg").read_bytes() == b"the user's"
