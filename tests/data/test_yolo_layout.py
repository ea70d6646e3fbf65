"""yolo3.data.yolo_layout and the YOLO layout through the commands: Ultralytics exports (data.yaml,
images/ and labels/) and Darknet's obj.data of the same images, read into the same records; bad
files named with their line; negatives kept.

The expected pixel boxes are computed here in float64 from the rows as written, independently of
the reader.
"""
from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from yolo3.cli import main as yolo3_main
from yolo3.core.errors import AnnotationError
from yolo3.data.annotations import load_training_records, scan_annotations
from yolo3.data.yolo_layout import (
    image_paths,
    label_file,
    label_rows,
    parse_label_rows,
    read_data_file,
)

NAMES = ["circle", "square", "bar"]
# image name -> (height, width, label text or None for no label file)
IMAGES = {
    "train": {
        "a.jpg": (240, 320, "0 0.5 0.5 0.25 0.5\n2 0.2 0.3 0.05 0.4\n"),
        "b.png": (320, 240, "1 0.1 0.1 0.4 0.1 0.4 0.3 0.25 0.35 0.1 0.3\n"),  # a polygon
        "c.jpg": (288, 288, ""),  # a negative with an empty label file
        "d.jpg": (240, 320, None),  # a negative without a label file
        "e.jpg": (240, 320, "1 0.98 0.5 0.1 0.2\n"),  # past the right edge: clipped
    },
    "val": {
        "f.jpg": (320, 240, "0 0.5 0.5 0.5 0.25\n"),
        "g.jpg": (240, 320, None),
    },
}


def _expected_boxes(text: str, h: int, w: int) -> np.ndarray:
    """Float64 reference: rows -> pixel x1, y1, x2, y2, class, clipped to the image."""
    out = []
    for line in text.splitlines():
        v = [float(x) for x in line.split()]
        if len(v) == 5:
            cls, cx, cy, bw, bh = v
            x1, y1, x2, y2 = cx - bw / 2, cy - bh / 2, cx + bw / 2, cy + bh / 2
        else:
            cls, xs, ys = v[0], v[1::2], v[2::2]
            x1, y1, x2, y2 = min(xs), min(ys), max(xs), max(ys)
        out.append([min(max(x1, 0), 1) * w, min(max(y1, 0), 1) * h, min(max(x2, 0), 1) * w,
                    min(max(y2, 0), 1) * h, cls])
    return np.asarray(out, np.float64).reshape(-1, 5)


def _image(path: Path, h: int, w: int, seed: int) -> None:
    pixels = np.random.default_rng(seed).integers(0, 255, (h, w, 3), dtype=np.uint8)
    Image.fromarray(pixels).save(path)


@pytest.fixture
def ultralytics(tmp_path):
    """An Ultralytics-style export: data.yaml (names as a mapping, nc), images/ and labels/."""
    root = tmp_path / "export"
    for split, images in IMAGES.items():
        (root / "images" / split).mkdir(parents=True)
        (root / "labels" / split).mkdir(parents=True)
        for k, (name, (h, w, text)) in enumerate(images.items()):
            _image(root / "images" / split / name, h, w, k)
            if text is not None:
                (root / "labels" / split / (Path(name).stem + ".txt")).write_text(text)
    (root / "data.yaml").write_text(
        "path: .\ntrain: images/train\nval: images/val\nnc: 3\nnames:\n  0: circle\n"
        "  1: square\n  2: bar\n")
    return root


@pytest.fixture
def darknet(tmp_path, ultralytics):
    """Darknet's layout of the same images: labels beside the images, list files, obj.data."""
    root = tmp_path / "darknet"
    (root / "data" / "obj").mkdir(parents=True)
    lists = {}
    for split, images in IMAGES.items():
        rows = []
        for name, (_, _, text) in images.items():
            target = root / "data" / "obj" / f"{split}_{name}"
            target.write_bytes((ultralytics / "images" / split / name).read_bytes())
            if text is not None:
                target.with_suffix(".txt").write_text(text)
            rows.append(f"data/obj/{split}_{name}")
        lists[split] = root / "data" / f"{split}.txt"
        lists[split].write_text("\n".join(rows) + "\n")
    (root / "data" / "obj.names").write_text("\n".join(NAMES) + "\n")
    (root / "data" / "obj.data").write_text(
        "classes = 3\ntrain = data/train.txt\nvalid = data/val.txt\nnames = data/obj.names\n"
        "backup = backup/\n")
    return root


def _by_name(records):
    return {os.path.basename(r.path).split("_", 1)[-1]: r for r in records}


def test_ultralytics_export_reads_boxes_polygons_negatives_and_sizes(ultralytics):
    data = read_data_file(ultralytics / "data.yaml")
    assert data.names == NAMES and set(data.splits) == {"train", "val"}
    result = scan_annotations(data.sources("train"), data.names)
    assert result.problems == [] and result.clipped_boxes == 1
    records = _by_name(result.records)
    assert sorted(records) == sorted(IMAGES["train"])
    for name, (h, w, text) in IMAGES["train"].items():
        assert records[name].image_hw == (h, w)
        np.testing.assert_allclose(records[name].boxes, _expected_boxes(text or "", h, w),
                                   atol=1e-3)


def test_darknet_obj_data_of_the_same_images_gives_the_same_records(ultralytics, darknet,
                                                                    monkeypatch):
    monkeypatch.chdir(darknet.parent)  # not Darknet's folder: paths resolve beside obj.data
    ours = read_data_file(darknet / "data" / "obj.data")
    theirs = read_data_file(ultralytics / "data.yaml")
    assert ours.names == theirs.names
    for split in ("train", "val"):
        a = _by_name(scan_annotations(ours.sources(split), ours.names).records)
        b = _by_name(scan_annotations(theirs.sources(split), theirs.names).records)
        assert sorted(a) == sorted(b)
        for name in a:
            np.testing.assert_array_equal(a[name].boxes, b[name].boxes)


def test_an_image_folder_and_an_image_list_are_annotation_sources(ultralytics, tmp_path):
    folder = ultralytics / "images" / "val"
    listing = tmp_path / "val.txt"
    listing.write_text("".join(f"{folder / n}\n" for n in IMAGES["val"]))
    a = load_training_records(str(folder), NAMES)
    b = load_training_records(str(listing), NAMES)
    assert [r.path for r in a] == [r.path for r in b] == sorted(str(folder / n) for n in IMAGES["val"])
    assert label_file(str(folder / "f.jpg")) == str(ultralytics / "labels" / "val" / "f.txt")
    assert label_file(str(folder / "g.jpg")) is None


def test_label_rows_written_are_read_back(tmp_path):
    boxes = np.array([[10, 20, 110, 70, 2], [0, 0, 320, 240, 0]], np.float64)
    text = label_rows(boxes, (240, 320))
    read = parse_label_rows(text, "x.txt", 3)
    np.testing.assert_allclose(read.boxes * [320, 240, 320, 240, 1], boxes, atol=1e-3)
    with_scores = label_rows(boxes, (240, 320), scores=np.array([0.9, 0.25]))
    assert [line.split()[-1] for line in with_scores.splitlines()] == ["0.900000", "0.250000"]


@pytest.mark.parametrize("row,reason", [
    ("0 0.5 0.5 0.2", "4 numbers"),
    ("0 0.5 0.5 0.2 0.2 0.1 0.1", "7 numbers"),
    ("0 0.5 0.5 -0.2 0.2", "not positive"),
    ("3 0.5 0.5 0.2 0.2", "class id 3 is outside the class list (0..2)"),
    ("0 0.5 zero 0.2 0.2", "'zero' is not a number"),
    ("0 160 120 50 40", "pixel values"),
    ("0 1.2 0.5 0.1 0.1", "no area inside the image"),
])
def test_bad_rows_are_dropped_with_file_and_line(row, reason):
    read = parse_label_rows(f"1 0.5 0.5 0.1 0.1\n{row}\n", "labels/a.txt", len(NAMES))
    assert read.lines == [1] and len(read.refused) == 1
    assert str(read.refused[0]).startswith("labels/a.txt:2: ") and reason in str(read.refused[0])


def test_training_drops_bad_rows_with_a_warning_and_strict_refuses_them(ultralytics, caplog):
    label = ultralytics / "labels" / "train" / "a.txt"
    label.write_text(label.read_text() + "5 0.5 0.5 0.1 0.1\n")
    records = load_training_records(read_data_file(ultralytics / "data.yaml").sources("train"),
                                    NAMES)
    assert len(_by_name(records)["a.jpg"].boxes) == 2
    assert f"{label}:3: class id 5" in caplog.text
    with pytest.raises(AnnotationError, match=f"{label}:3: class id 5"):
        load_training_records(str(ultralytics / "images" / "train"), NAMES, strict=True)


@pytest.mark.parametrize("text,message", [
    ("val: images/val\nnames: [a]\n", "no train"),
    ("train: images/train\nval: images/val\n", "no names"),
    ("train: images/train\nval: images/val\nnc: 2\nnames: [a, b, c]\n", "nc is 2 but names has 3"),
    ("train: images/nowhere\nval: images/val\nnames: [a]\n", "nowhere does not exist"),
    ("train: [images/train\n", "not valid YAML"),
    ("names: {0: a, 2: b}\ntrain: images/train\nval: images/val\n", "are not 0..1"),
])
def test_bad_data_yaml_is_named(ultralytics, text, message):
    bad = ultralytics / "bad.yaml"
    bad.write_text(text)
    with pytest.raises(AnnotationError, match=message) as e:
        read_data_file(bad)
    assert str(e.value).startswith(str(bad))


def test_a_data_file_without_val_is_read_and_refused_where_val_is_needed(ultralytics, tmp_path,
                                                                       capsys):
    one = ultralytics / "train_only.yaml"
    one.write_text("train: images/train\nnames: [circle, square, bar]\n")
    data = read_data_file(one)
    assert list(data.splits) == ["train"]
    with pytest.raises(AnnotationError, match="train_only.yaml: no val: the val split is needed"):
        data.sources("val")
    assert yolo3_main(["train", "--data", str(one), "--variant", "tiny", "--output",
                       str(tmp_path / "run")]) == 2
    assert "train_only.yaml: no val" in capsys.readouterr().err
    assert not (tmp_path / "run").exists()


def test_bad_obj_data_is_named_with_its_line(darknet):
    bad = darknet / "data" / "bad.data"
    bad.write_text("classes = 4\ntrain = data/train.txt\nvalid = data/val.txt\n"
                   "names = data/obj.names\n")
    with pytest.raises(AnnotationError, match=r"bad.data:1: classes is 4 but .* has 3 names"):
        read_data_file(bad)
    bad.write_text("train = data/train.txt\nnames = data/obj.names\n")
    with pytest.raises(AnnotationError, match="bad.data: no valid"):
        read_data_file(bad).sources("val")
    bad.write_text("valid = data/val.txt\nnames = data/obj.names\n")
    with pytest.raises(AnnotationError, match="no train"):
        read_data_file(bad)


def test_a_missing_labels_folder_is_an_error_not_a_training_on_nothing(ultralytics):
    import shutil
    shutil.rmtree(ultralytics / "labels")
    with pytest.raises(AnnotationError, match="no label files for its 5 images .*labels"):
        load_training_records(str(ultralytics / "images" / "train"), NAMES)


def test_a_label_file_that_is_not_utf8_is_named(ultralytics):
    label = ultralytics / "labels" / "train" / "a.txt"
    label.write_bytes(b"0 0.5 0.5 0.2 0.2 \xff\xfe\n")
    with pytest.raises(AnnotationError, match=f"{label}: not UTF-8"):
        load_training_records(str(ultralytics / "images" / "train"), NAMES)


def test_image_sources_skip_formats_the_pipeline_cannot_decode(tmp_path):
    (tmp_path / "a.jpg").write_bytes(b"")
    (tmp_path / "b.webp").write_bytes(b"")
    assert image_paths(tmp_path) == ([str(tmp_path / "a.jpg")], [str(tmp_path / "b.webp")])
    with pytest.raises(AnnotationError, match="image source not found"):
        image_paths(tmp_path / "a.jpg.missing")
    (tmp_path / "a.jpg").unlink()
    with pytest.raises(AnnotationError, match="no images .* 1 of other formats"):
        image_paths(tmp_path)


# --------------------------------------------------------------------------------- the commands


def _files(root: Path):
    return {str(p): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.mark.slow  # CI runs it (.ci/run); about 22 s on 2 cores
def test_check_train_and_evaluate_take_a_data_yaml_and_an_obj_data(ultralytics, darknet, tmp_path,
                                                                 capsys, monkeypatch):
    monkeypatch.setenv("YOLO3_CACHE_DIR", str(tmp_path / "cache"))
    assert yolo3_main(["check", "--data", str(ultralytics / "data.yaml")]) == 0
    out = capsys.readouterr().out
    assert "images: 7  (without boxes: 3)" in out and "no problems" in out
    run = tmp_path / "run"
    assert yolo3_main(["train", "--data", str(darknet / "data" / "obj.data"), "--variant", "tiny",
                       "--input-size", "64", "96", "--batch-size", "2", "--epochs", "1",
                       "--freeze-epochs", "0", "--output", str(run), "--quiet"]) == 0
    assert (run / "classes.txt").read_text().split() == NAMES
    from yolo3.checkpoint.metadata import read_info
    assert read_info(run / "final.keras").input_size == (64, 96)  # height x width, as trained
    # evaluated at its one epoch: the diagnostics of the validation set (one circle, one negative)
    diagnostics = json.loads((run / "diagnostics" / "diagnostics.json").read_text())
    counts = np.asarray(diagnostics["confusion_matrix"]["counts"])
    assert counts.shape == (4, 4) and counts[:, :3].sum(axis=0).tolist() == [1, 0, 0]
    assert diagnostics["confusion_matrix"]["labels"] == NAMES + ["background"]
    assert 0 <= diagnostics["confidence_curves"]["best"]["confidence"] <= 1
    assert (run / "diagnostics" / "confusion.png").is_file()
    assert (run / "diagnostics" / "confidence.png").is_file()
    assert yolo3_main(["evaluate", "--data", str(ultralytics / "data.yaml"), "--model",
                       str(run / "final.keras"), "--out", str(tmp_path / "ev.json"),
                       "--no-plot"]) == 0
    assert "circle" in capsys.readouterr().out
    # pseudo-labels: one label file per image, the detections of the JSON normalised
    labels, found = tmp_path / "pseudo", tmp_path / "found.json"
    images = ultralytics / "images" / "train"
    assert yolo3_main(["detect", "--model", str(run / "final.keras"), "--input", str(images),
                       "--output", str(tmp_path / "drawn"), "--no-draw", "--json", str(found),
                       "--score", "0.01", "--save-txt", str(labels), "--save-conf"]) == 0
    entries = {Path(e["image"]).stem: e for e in json.loads(found.read_text())}
    assert sorted(p.stem for p in labels.glob("*.txt")) == sorted(entries)
    for stem, entry in entries.items():
        h, w = IMAGES["train"][Path(entry["image"]).name][:2]
        rows = np.loadtxt(labels / f"{stem}.txt", ndmin=2).reshape(-1, 6)
        want = np.asarray(entry["boxes"], np.float64).reshape(-1, 4)
        centre_size = np.stack([(want[:, 0] + want[:, 2]) / 2 / w, (want[:, 1] + want[:, 3]) / 2 / h,
                                (want[:, 2] - want[:, 0]) / w, (want[:, 3] - want[:, 1]) / h], 1)
        np.testing.assert_allclose(rows[:, 1:5], centre_size, atol=2e-5)
        np.testing.assert_array_equal(rows[:, 0], entry["classes"])
        np.testing.assert_allclose(rows[:, 5], entry["scores"], atol=1e-6)
    assert sum(len(e["boxes"]) for e in entries.values()) > 0


@pytest.mark.parametrize("argv,named", [
    (["check", "--data", "{root}/missing.yaml"], "argument --data: expected an existing text "
                                                 "file, got '{root}/missing.yaml' (no such file"),
    (["kmeans", "--data", "{root}/data.yaml", "--clusters", "50", "--out", "{tmp}/a.txt"],
     "4 boxes, fewer than 50 clusters"),
    (["train", "--data", "{root}/data.yaml", "--annotations", "{root}/images/train",
      "--output", "{tmp}/run"], "--data names the train and val sources"),
    (["train", "--annotations", "{root}/images/train", "--output", "{tmp}/run"],
     "--classes is needed with --annotations (a --data brings its names)"),
    (["detect", "--model", "{root}/data.yaml", "--input", "{root}/images/val", "--output",
      "{tmp}/run", "--save-txt", "{root}/images"], "--save-txt"),
    (["detect", "--model", "{root}/data.yaml", "--input", "{root}/images/val", "--output",
      "{tmp}/run", "--save-conf"], "--save-conf needs --save-txt"),
])
def test_bad_data_on_the_command_line_is_named_and_nothing_is_written(ultralytics, tmp_path,
                                                                     capsys, argv, named):
    argv = [a.format(root=ultralytics, tmp=tmp_path) for a in argv]
    before = _files(ultralytics)
    assert yolo3_main(argv) == 2
    err = capsys.readouterr().err
    assert named.format(root=ultralytics) in err and "Traceback" not in err, err
    assert not (tmp_path / "run").exists() and not (tmp_path / "a.txt").exists()
    assert _files(ultralytics) == before


def test_the_whole_file_reader_equals_the_row_by_row_reader():
    """Files of plain box rows are checked together in one array; the result is the row-by-row
    reader's, also when one file among many needs the row-by-row reader."""
    import yolo3.data.yolo_layout as layout
    rng = np.random.default_rng(5)
    rows = [f"{rng.integers(3)} {cx:.6f} {cy:.6f} {w:.6f} {h:.6f}"
            for cx, cy, w, h in rng.uniform([0, 0, 0.01, 0.01], [1, 1, 0.5, 0.5], (200, 4))]
    text = "\n".join(rows[:100]) + "\n\n" + "\n".join(rows[100:]) + "\n"
    fast = parse_label_rows(text, "a.txt", 3)
    slow = layout._rows_one_by_one(text, "a.txt", 3)
    np.testing.assert_array_equal(fast.boxes, slow.boxes)
    assert fast.lines == slow.lines and fast.clipped == slow.clipped and len(fast.clipped) > 10
    assert fast.refused == slow.refused == []
    mixed = layout._parse_texts([text, "0 0.5 0.5 0.1\n1 0.5 0.5 0.2 0.2\n", text],
                                ["a.txt", "b.txt", "c.txt"], 3)
    np.testing.assert_array_equal(mixed[0].boxes, slow.boxes)
    np.testing.assert_array_equal(mixed[2].boxes, slow.boxes)
    assert mixed[1].lines == [2] and str(mixed[1].refused[0]).startswith("b.txt:1: 4 numbers")
