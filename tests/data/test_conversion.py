"""yolo3.data.conversion and ``yolo3 annotations``: every layout written is read back to the same
boxes (each format, and a chain through all four), and bad requests change nothing."""
from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

from yolo3.cli import main as yolo3_main
from yolo3.core.errors import ArgumentError
from yolo3.data.annotations import load_annotations
from yolo3.data.class_names import read_classes
from yolo3.data.conversion import write_dataset
from yolo3.data.synthetic import make_synthetic_dataset
from yolo3.data.yolo_layout import read_data_file


@pytest.fixture(scope="module")
def source(tmp_path_factory):
    """Non-square images (96 x 160) with boxes, written as keras-yolo3 text rows; two splits."""
    root = tmp_path_factory.mktemp("conversion")
    make_synthetic_dataset(str(root), 8, (96, 160), val_fraction=0.25, seed=2)
    names = read_classes(root / "classes.txt")
    splits = {split: load_annotations(root / f"{split}.txt", names) for split in ("train", "val")}
    assert sum(len(r.boxes) for r in splits["train"]) > 5
    return root, names, splits


def read_back(folder: Path, fmt: str, split: str, names):
    """The records of ``split`` in a folder written as ``fmt``, read by yolo3's readers."""
    if fmt == "text":
        return load_annotations(folder / f"{split}.txt", names)
    if fmt == "coco":
        return load_annotations(folder / f"{split}.json")
    if fmt == "voc":
        return load_annotations(folder / "ImageSets" / "Main" / f"{split}.txt", names)
    data = read_data_file(folder / "data.yaml")
    assert data.names == list(names)
    return load_annotations(data.sources(split), names)


def assert_same(ours, theirs):
    assert len(ours) == len(theirs)
    for a, b in zip(ours, theirs):
        assert a.image_hw == b.image_hw
        assert os.path.samefile(a.path, b.path) or Path(a.path).name.endswith(Path(b.path).name)
        np.testing.assert_allclose(np.asarray(a.boxes).reshape(-1, 5),
                                   np.asarray(b.boxes).reshape(-1, 5), atol=2e-3)


@pytest.mark.parametrize("fmt", ["text", "coco", "voc", "yolo"])
def test_each_layout_reads_back_to_the_same_boxes(source, tmp_path, fmt):
    _, names, splits = source
    out = write_dataset(tmp_path / fmt, fmt, splits, names)
    for split, records in splits.items():
        assert_same(read_back(Path(out), fmt, split, names), records)


def test_a_chain_through_every_layout_and_back(source, tmp_path):
    _, names, splits = source
    current = splits
    for fmt in ("yolo", "coco", "voc", "text"):
        folder = Path(write_dataset(tmp_path / fmt, fmt, current, names))
        current = {split: read_back(folder, fmt, split, names) for split in splits}
    for split in splits:
        assert_same(current[split], splits[split])


def test_write_dataset_refuses_a_folder_with_files_and_leaves_nothing(source, tmp_path):
    _, names, splits = source
    taken = tmp_path / "taken"
    taken.mkdir()
    (taken / "keep.txt").write_text("mine")
    with pytest.raises(ArgumentError, match="holds 1 file yolo3 did not write"):
        write_dataset(taken, "yolo", splits, names)
    assert os.listdir(taken) == ["keep.txt"]
    with pytest.raises(ArgumentError, match="unknown annotation format 'xml'"):
        write_dataset(tmp_path / "x", "xml", splits, names)
    assert sorted(os.listdir(tmp_path)) == ["taken"]  # no working folder left behind


def test_the_command_converts_a_data_file_and_refuses_bad_requests(source, tmp_path, capsys):
    root, names, splits = source
    yolo = tmp_path / "yolo"
    assert yolo3_main(["annotations", "--annotations", str(root / "train.txt"), "--classes",
                       str(root / "classes.txt"), "--to", "yolo", "--out", str(yolo)]) == 0
    coco = tmp_path / "coco"
    assert yolo3_main(["annotations", "--data", str(yolo / "data.yaml"), "--to", "coco",
                       "--out", str(coco)]) == 0
    assert "train 6 images" in capsys.readouterr().out
    assert_same(load_annotations(coco / "train.json"), splits["train"])
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("the user's")
    for argv, message in (
            (["--annotations", str(root / "train.txt"), "--to", "voc", "--out",
              str(tmp_path / "v")], "--classes is needed"),
            (["--data", str(yolo / "data.yaml"), "--to", "text", "--out", str(mine)],
             "yolo3 did not write"),
            (["--data", str(yolo / "data.yaml"), "--to", "text", "--out", str(yolo)],
             "--out")):
        before = sorted(p.name for p in tmp_path.rglob("*"))
        assert yolo3_main(["annotations", *argv]) == 2
        err = capsys.readouterr().err
        assert message in err and "Traceback" not in err, err
        assert sorted(p.name for p in tmp_path.rglob("*")) == before


def test_coco_and_voc_keep_the_ignore_regions_and_coco_its_areas(source, tmp_path, caplog):
    """COCO's crowd regions and VOC's difficult objects move between the two layouts (as
    ``iscrowd: 1`` and ``<difficult>1</difficult>``), COCO's areas stay; text and YOLO, which
    cannot hold a region, leave them out with a warning."""
    import dataclasses
    _, names, splits = source
    first = splits["train"][0]
    with_regions = dataclasses.replace(
        first, ignored=np.array([[2, 3, 40, 50, 1]], np.float32),
        areas=np.arange(1, len(first.boxes) + 1, dtype=np.float64) * 10.5)
    records = {"train": [with_regions] + splits["train"][1:]}
    coco = Path(write_dataset(tmp_path / "coco", "coco", records, names))
    back = read_back(coco, "coco", "train", names)[0]
    np.testing.assert_allclose(back.ignored, [[2, 3, 40, 50, 1]])
    np.testing.assert_allclose(back.areas, with_regions.areas)
    voc = Path(write_dataset(tmp_path / "voc", "voc", {"train": [back]}, names))
    again = read_back(voc, "voc", "train", names)[0]
    np.testing.assert_allclose(again.ignored, [[2, 3, 40, 50, 1]])
    assert again.pixel_indices
    # a record without areas is written with width x height
    coco2 = Path(write_dataset(tmp_path / "coco2", "coco", {"train": [again]}, names))
    third = read_back(coco2, "coco", "train", names)[0]
    widths = again.boxes[:, 2:4] - again.boxes[:, 0:2]
    np.testing.assert_allclose(third.areas, widths.prod(axis=1), rtol=1e-5)
    with caplog.at_level("WARNING"):
        write_dataset(tmp_path / "text", "text", records, names)
    assert "1 ignore regions (COCO crowd, VOC difficult) left out: the text layout" in caplog.text
