"""Anchor and class files, default anchors."""
from __future__ import annotations

import numpy as np
import pytest

from yolo3.core.errors import FileFormatError
from yolo3.data.class_names import read_classes, write_classes
from yolo3.ops.anchors import (
    TINY_YOLO_ANCHORS,
    YOLO_ANCHORS,
    default_anchors,
    read_anchors,
    write_anchors,
)


def test_anchor_round_trip(tmp_path, rng):
    anchors = np.round(rng.uniform(1, 400, (7, 2)), 2)
    anchors[0] = [10, 13]  # whole numbers are written as integers
    path = tmp_path / "anchors.txt"
    write_anchors(path, anchors)
    assert path.read_text().startswith("10,13,  ")
    got = read_anchors(path)
    assert got.dtype == np.float32 and got.shape == (7, 2)
    np.testing.assert_allclose(got, anchors, rtol=1e-6)


def test_anchors_over_several_lines_with_comments(tmp_path):
    path = tmp_path / "a.txt"
    path.write_text("# tiny anchors\n10,14, 23,27\n\n37 58  # third\n")
    np.testing.assert_array_equal(read_anchors(path), [[10, 14], [23, 27], [37, 58]])


@pytest.mark.parametrize("text,line,reason", [
    ("10,13, 16,30\n33,x\n", 2, "not a number"),
    ("10,13, 16\n", 1, "odd number"),
    ("10,13\n16,-30\n", 2, "positive"),
    ("10,13, 0,30\n", 1, "positive"),
    ("10,13, nan,30\n", 1, "positive"),
])
def test_malformed_anchor_files_name_file_and_line(tmp_path, text, line, reason):
    path = tmp_path / "bad_anchors.txt"
    path.write_text(text)
    with pytest.raises(FileFormatError) as info:
        read_anchors(path)
    message = str(info.value)
    assert message.startswith(f"{path}:{line}: ") and reason in message
    assert info.value.line == line and info.value.path == str(path)


@pytest.mark.parametrize("text", ["", "\n  \n# only a comment\n"])
def test_empty_anchor_file_refused(tmp_path, text):
    path = tmp_path / "empty.txt"
    path.write_text(text)
    with pytest.raises(FileFormatError, match="no anchors") as info:
        read_anchors(path)
    assert str(path) in str(info.value)


def test_missing_files_refused(tmp_path):
    with pytest.raises(FileFormatError, match="cannot read anchors") as info:
        read_anchors(tmp_path / "nope.txt")
    assert "nope.txt" in str(info.value)
    with pytest.raises(FileFormatError, match="cannot read classes"):
        read_classes(tmp_path / "nope.txt")


def test_class_round_trip_and_trailing_blank_lines(tmp_path):
    path = tmp_path / "classes.txt"
    write_classes(path, ["person", "traffic light", "dog"])
    assert read_classes(path) == ["person", "traffic light", "dog"]
    path.write_text("cat\ndog\n\n\n")
    assert read_classes(path) == ["cat", "dog"]


@pytest.mark.parametrize("text,line,reason", [
    ("cat\n\ndog\n", 2, "blank line"),
    ("cat\ndog\ncat\n", 3, "repeats line 1"),
    ("cat\n   \ndog\n", 2, "blank line"),
])
def test_malformed_class_files_name_file_and_line(tmp_path, text, line, reason):
    path = tmp_path / "bad_classes.txt"
    path.write_text(text)
    with pytest.raises(FileFormatError) as info:
        read_classes(path)
    assert str(info.value).startswith(f"{path}:{line}: ") and reason in str(info.value)


@pytest.mark.parametrize("text", ["", "\n\n"])
def test_empty_class_file_refused(tmp_path, text):
    path = tmp_path / "none.txt"
    path.write_text(text)
    with pytest.raises(FileFormatError, match="empty") as info:
        read_classes(path)
    assert str(path) in str(info.value)


def test_model_data_files_equal_constants(repo_root):
    data = repo_root / "model_data"
    np.testing.assert_array_equal(read_anchors(data / "yolo_anchors.txt"), YOLO_ANCHORS)
    np.testing.assert_array_equal(read_anchors(data / "tiny_yolo_anchors.txt"), TINY_YOLO_ANCHORS)
    np.testing.assert_array_equal(default_anchors("yolov3"), YOLO_ANCHORS)
    np.testing.assert_array_equal(default_anchors("tiny"), TINY_YOLO_ANCHORS)
    coco = read_classes(data / "coco_classes.txt")
    voc = read_classes(data / "voc_classes.txt")
    assert len(coco) == 80 and coco[0] == "person"
    assert len(voc) == 20 and "aeroplane" in voc
    # Anchors are sorted by area, smallest first (the masks rely on it).
    for anchors in (YOLO_ANCHORS, TINY_YOLO_ANCHORS):
        area = anchors.prod(axis=1)
        assert np.all(np.diff(area) > 0)


def test_anchor_fit_against_a_loop_reference():
    """Best possible recall and mean best IoU, recomputed box by box in float64."""
    from yolo3.ops.anchors import ANCHOR_RATIO_LIMIT, anchor_fit
    rng = np.random.default_rng(4)
    box_wh = rng.uniform(2, 300, (200, 2))
    anchors = np.array([[10, 13], [30, 61], [116, 90], [373, 326]], np.float64)
    recalled, ious = 0, []
    for w, h in box_wh:
        worst = [min(w / aw, aw / w, h / ah, ah / h) for aw, ah in anchors]
        recalled += max(worst) > 1 / ANCHOR_RATIO_LIMIT
        ious.append(max(min(w, aw) * min(h, ah) / (w * h + aw * ah - min(w, aw) * min(h, ah))
                        for aw, ah in anchors))
    fit = anchor_fit(np.vstack([box_wh, [[0, 5]]]), anchors)  # a box without area is ignored
    assert fit.boxes == 200
    assert fit.best_possible_recall == pytest.approx(recalled / 200, abs=1e-12)
    assert fit.mean_best_iou == pytest.approx(np.mean(ious), abs=1e-12)
    assert anchor_fit(np.array([[10, 13]]), anchors).fits
    assert not anchor_fit(np.array([[1000, 1.5]]), anchors).fits
