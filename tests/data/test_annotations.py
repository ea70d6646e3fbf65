"""Annotation readers: text rows, Pascal VOC XML, COCO JSON; errors name file, place and reason."""
from __future__ import annotations

import json
import os
import tempfile
import warnings
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from PIL import Image

from yolo3.core.errors import AnnotationError, FileFormatError
from yolo3.data.annotations import (
    Record,
    coco_class_names,
    load_annotations,
    scan_annotations,
    write_annotations,
)

NAMES = ["a", "b", "c"]


def _img(path: Path, w: int = 40, h: int = 30) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(np.full((h, w, 3), 90, np.uint8)).save(path)
    return path


def _write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


def test_text_relative_quoted_and_tab_paths(tmp_path):
    _img(tmp_path / "imgs" / "x.png")
    _img(tmp_path / "my dir" / "y z.png")
    _img(tmp_path / "t a b.png")
    ann = _write(tmp_path / "ann.txt",
                 "imgs/x.png 1,2,11,12,0 3,4,20,25,2\n"
                 "\n# comment line\n"
                 '"my dir/y z.png" 0,0,5,5,1\n'
                 "t a b.png\t2.5,3,7.5,9,1 4,4,6,6,0\n"
                 "imgs/x.png\n")
    recs = load_annotations(ann, NAMES)
    assert [r.path for r in recs] == [str(tmp_path / "imgs" / "x.png"), str(tmp_path / "my dir" / "y z.png"),
                                      str(tmp_path / "t a b.png"), str(tmp_path / "imgs" / "x.png")]
    np.testing.assert_array_equal(recs[0].boxes, [[1, 2, 11, 12, 0], [3, 4, 20, 25, 2]])
    np.testing.assert_array_equal(recs[2].boxes, [[2.5, 3, 7.5, 9, 1], [4, 4, 6, 6, 0]])
    assert recs[3].boxes.shape == (0, 5) and recs[0].boxes.dtype == np.float32
    assert recs[0].image_hw == (30, 40)


def test_write_read_round_trip(tmp_path):
    paths = [_img(tmp_path / "plain.png"), _img(tmp_path / "with space.png"), _img(tmp_path / "sub" / "q r.png")]
    rng = np.random.default_rng(0)
    recs = []
    for p in paths:
        n = int(rng.integers(0, 4))
        xy = rng.uniform(0, 15, size=(n, 2))
        wh = rng.uniform(1, 15, size=(n, 2))
        cls = rng.integers(0, 3, size=(n, 1))
        recs.append(Record(str(p), np.round(np.concatenate([xy, xy + wh, cls], 1), 3).astype(np.float32)))
    for relative in (False, True):
        out = tmp_path / f"out{relative}.txt"
        write_annotations(out, recs, relative=relative)
        back = load_annotations(out, NAMES)
        assert [r.path for r in back] == [r.path for r in recs]
        for a, b in zip(recs, back):
            np.testing.assert_allclose(a.boxes, b.boxes, atol=1e-3)


@pytest.mark.parametrize("row,reason", [
    ("x.png 1,2,3,4", "has 4 fields"),
    ("x.png 1,2,3,4,0,5", "has 6 fields"),
    ("x.png 1,two,3,4,0", "y1 'two' is not a number"),
    ("x.png 1,2,3,4,zero", "class 'zero' is not a number"),
    ("x.png 5,2,5,4,0", "x2 <= x1"),
    ("x.png 5,2,4,4,0", "x2 <= x1"),
    ("x.png 1,6,3,4,0", "y2 <= y1"),
    ("x.png -1,2,3,4,0", "negative coordinate"),
    ("x.png 1,2,3,4,3", "outside the class list"),
    ("x.png 1,2,3,4,-1", "class id -1 is outside the class list"),
    ("x.png 1,2,3,4,1.5", "not an integer"),
    ("x.png 1,2,nan,4,0", "not finite"),
    ("missing.png 1,2,3,4,0", "image file not found"),
    ("bad.png 1,2,3,4,0", "cannot read image"),
    ("x.png 100,2,300,4,0", "lies outside"),
    ('"x.png 1,2,3,4,0', "unterminated quote"),
])
def test_text_errors_name_file_line_reason(tmp_path, row, reason):
    _img(tmp_path / "x.png")
    (tmp_path / "bad.png").write_bytes(b"this is not a PNG")
    ann = _write(tmp_path / "ann.txt", "x.png 1,1,5,5,0\n\n" + row + "\n")
    with pytest.raises(AnnotationError) as info:
        load_annotations(ann, NAMES)
    err = info.value
    assert isinstance(err, FileFormatError)
    assert err.path == str(ann) and err.line == 3, str(err)
    assert reason in err.reason, str(err)
    assert str(err).startswith(f"{ann}:3: ")


def test_empty_and_missing_files(tmp_path):
    for text in ("", "\n\n", "# only a comment\n"):
        ann = _write(tmp_path / "empty.txt", text)
        with pytest.raises(AnnotationError, match="empty"):
            load_annotations(ann, NAMES)
    with pytest.raises(AnnotationError, match="not found"):
        load_annotations(tmp_path / "nope.txt", NAMES)


def test_partly_outside_boxes_are_clipped_with_warning(tmp_path):
    _img(tmp_path / "x.png", w=40, h=30)
    ann = _write(tmp_path / "ann.txt", "x.png 30,20,50,35,0 1,1,5,5,1\n")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        recs = load_annotations(ann, NAMES)
    assert any("1 boxes" in str(w.message) for w in caught)
    np.testing.assert_array_equal(recs[0].boxes, [[30, 20, 40, 30, 0], [1, 1, 5, 5, 1]])
    # without image checks nothing is clipped (the size is unknown)
    recs = load_annotations(ann, NAMES, check_images=False)
    np.testing.assert_array_equal(recs[0].boxes[0], [30, 20, 50, 35, 0])


def test_scan_collects_every_problem(tmp_path):
    _img(tmp_path / "x.png")
    ann = _write(tmp_path / "ann.txt", "x.png 1,1,5,5,0\nx.png 1,1,5\nmissing.png\nx.png 9,1,5,5,0\n")
    res = scan_annotations(ann, NAMES)
    assert [p.line for p in res.problems] == [2, 3, 4]
    assert len(res.records) == 1


_TOKENS = list("0123456789,.-+ \t\"#eEnaix/\\\n\r") + ["x.png", "1e9", "nan", "\x00", "é", "1,2,3,4,0"]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.one_of(st.lists(st.sampled_from(_TOKENS), max_size=40).map("".join), st.text(max_size=60),
                 st.binary(max_size=60).map(lambda b: b.decode("latin-1"))))
def test_garbage_text_only_raises_annotation_error(text):
    with tempfile.TemporaryDirectory() as d:
        Image.fromarray(np.zeros((20, 20, 3), np.uint8)).save(os.path.join(d, "x.png"))
        path = os.path.join(d, "ann.txt")
        with open(path, "w", encoding="utf-8", newline="") as f:
            f.write(text)
        for check in (True, False):
            try:
                recs = load_annotations(path, NAMES, check_images=check)
            except AnnotationError as e:
                assert str(e).startswith(path)
                continue
            for r in recs:  # whatever parsed is valid
                assert r.boxes.shape[1] == 5
                assert np.all(r.boxes[:, 2] > r.boxes[:, 0]) and np.all(r.boxes[:, 3] > r.boxes[:, 1])
                assert np.all(r.boxes[:, :4] >= 0) and np.all((r.boxes[:, 4] >= 0) & (r.boxes[:, 4] < 3))


# ------------------------------------------------------------------------------------------ VOC


def _voc_xml(objects, filename="0001.jpg", w=50, h=40) -> str:
    objs = "".join(
        f"<object><name>{n}</name><difficult>{d}</difficult><bndbox><xmin>{b[0]}</xmin><ymin>{b[1]}</ymin>"
        f"<xmax>{b[2]}</xmax><ymax>{b[3]}</ymax></bndbox></object>" for n, d, b in objects)
    return (f"<annotation><filename>{filename}</filename><size><width>{w}</width><height>{h}</height>"
            f"<depth>3</depth></size>{objs}</annotation>")


@pytest.fixture
def voc_root(tmp_path):
    year = tmp_path / "VOCdevkit" / "VOC2007"
    (year / "Annotations").mkdir(parents=True)
    (year / "ImageSets" / "Main").mkdir(parents=True)
    _img(year / "JPEGImages" / "0001.jpg", 50, 40)
    _img(year / "JPEGImages" / "0002.jpg", 50, 40)
    (year / "Annotations" / "0001.xml").write_text(_voc_xml([("dog", 0, (1, 2, 30, 20)), ("cat", 1, (5, 5, 9, 9))]))
    (year / "Annotations" / "0002.xml").write_text(_voc_xml([("person", 0, (10, 10, 20, 39))], "0002.jpg"))
    (year / "ImageSets" / "Main" / "train.txt").write_text("0001\n0002\n")
    return tmp_path / "VOCdevkit"


def test_voc_image_set_folder_and_difficult(voc_root):
    from yolo3.data.annotations import VOC_CLASSES
    year = voc_root / "VOC2007"
    recs = load_annotations(year / "ImageSets" / "Main" / "train.txt")
    dog, cat, person = VOC_CLASSES.index("dog"), VOC_CLASSES.index("cat"), VOC_CLASSES.index("person")
    assert [os.path.basename(r.path) for r in recs] == ["0001.jpg", "0002.jpg"]
    np.testing.assert_array_equal(recs[0].boxes, [[1, 2, 30, 20, dog]])
    np.testing.assert_array_equal(recs[1].boxes, [[10, 10, 20, 39, person]])
    # the difficult cat is kept as an ignore region, the corners are VOC's pixel indices
    np.testing.assert_array_equal(recs[0].ignored, [[5, 5, 9, 9, cat]])
    assert recs[1].ignored.shape == (0, 5)
    assert recs[0].pixel_indices and recs[0].areas is None
    recs = load_annotations(year / "Annotations", include_difficult=True)
    np.testing.assert_array_equal(recs[0].boxes, [[1, 2, 30, 20, dog], [5, 5, 9, 9, cat]])
    assert recs[0].ignored.shape == (0, 5)
    one = load_annotations(year / "Annotations" / "0002.xml")
    assert len(one) == 1 and one[0].path == str(year / "JPEGImages" / "0002.jpg")


def test_voc_errors_name_the_xml_file(voc_root):
    ann = voc_root / "VOC2007" / "Annotations"
    (ann / "0001.xml").write_text(_voc_xml([("dog", 0, (1, 2, 30, "x"))]))
    with pytest.raises(AnnotationError) as info:
        load_annotations(ann)
    assert info.value.path == str(ann / "0001.xml") and "object 1" in str(info.value)
    (ann / "0001.xml").write_text(_voc_xml([("unicorn", 0, (1, 2, 30, 20))]))
    with pytest.raises(AnnotationError, match="unicorn"):
        load_annotations(ann)
    (ann / "0001.xml").write_text("<annotation><object>")
    with pytest.raises(AnnotationError, match="cannot parse XML"):
        load_annotations(ann)


# ----------------------------------------------------------------------------------------- COCO


def _coco(tmp_path, annotations, categories=None):
    _img(tmp_path / "imgs" / "1.png", 60, 50)
    _img(tmp_path / "imgs" / "2.png", 60, 50)
    data = {"images": [{"id": 10, "file_name": "1.png", "width": 60, "height": 50},
                       {"id": 20, "file_name": "2.png", "width": 60, "height": 50}],
            "categories": categories or [{"id": 7, "name": "seven"}, {"id": 2, "name": "two"},
                                         {"id": 90, "name": "ninety"}],
            "annotations": annotations}
    path = tmp_path / "instances.json"
    path.write_text(json.dumps(data))
    return path


def test_coco_boxes_categories_crowd_negatives(tmp_path):
    path = _coco(tmp_path, [
        {"id": 1, "image_id": 10, "category_id": 90, "bbox": [1.5, 2, 10, 20], "iscrowd": 0},
        {"id": 2, "image_id": 10, "category_id": 2, "bbox": [0, 0, 5, 5], "iscrowd": 1},
        {"id": 3, "image_id": 10, "category_id": 7, "bbox": [3, 4, 6, 7]},
    ])
    assert coco_class_names(path) == ["two", "seven", "ninety"]
    recs = load_annotations(path, image_dir=str(tmp_path / "imgs"))
    assert [os.path.basename(r.path) for r in recs] == ["1.png", "2.png"]
    np.testing.assert_allclose(recs[0].boxes, [[1.5, 2, 11.5, 22, 2], [3, 4, 9, 11, 1]])
    assert recs[1].boxes.shape == (0, 5)  # negative image kept
    # the crowd region is kept for the evaluation, not as a box; no 'area' given: NaN
    np.testing.assert_allclose(recs[0].ignored, [[0, 0, 5, 5, 0]])
    assert recs[0].areas.shape == (2,) and np.isnan(recs[0].areas).all()
    assert not recs[0].pixel_indices
    recs = load_annotations(path, image_dir=str(tmp_path / "imgs"), include_crowd=True)
    assert len(recs[0].boxes) == 3 and recs[0].boxes[1, 4] == 0
    assert recs[0].ignored.shape == (0, 5)


def test_coco_areas_follow_their_boxes_through_drops_and_clipping(tmp_path):
    path = _coco(tmp_path, [
        {"id": 1, "image_id": 10, "category_id": 90, "bbox": [1, 2, 10, 20], "area": 150.5},
        {"id": 2, "image_id": 10, "category_id": 7, "bbox": [70, 70, 5, 5], "area": 3},  # outside
        {"id": 3, "image_id": 10, "category_id": 7, "bbox": [50, 40, 30, 30], "area": 400},
        {"id": 4, "image_id": 10, "category_id": 2, "bbox": [40, 30, 40, 40], "iscrowd": 1},
    ])
    result = scan_annotations(path, image_dir=str(tmp_path / "imgs"), drop_invalid_boxes=True)
    record = result.records[0]
    np.testing.assert_allclose(record.boxes, [[1, 2, 11, 22, 2], [50, 40, 60, 50, 1]])
    np.testing.assert_allclose(record.areas, [150.5, 400])  # the file's, not the clipped box's
    np.testing.assert_allclose(record.ignored, [[40, 30, 60, 50, 0]])  # clipped to the image
    assert result.skipped_crowd == 1 and len(result.dropped_boxes) == 1


@pytest.mark.parametrize("area", [-1, "big", True])
def test_a_bad_coco_area_names_its_annotation(tmp_path, area):
    path = _coco(tmp_path, [{"id": 4, "image_id": 10, "category_id": 7, "bbox": [1, 1, 5, 5],
                             "area": area}])
    with pytest.raises(AnnotationError, match="area .* is not a number >= 0") as info:
        load_annotations(path, image_dir=str(tmp_path / "imgs"))
    assert "annotations[0] id=4" in str(info.value)


def test_training_reads_the_boxes_and_leaves_the_regions_out(tmp_path):
    from yolo3.data.annotations import load_training_records
    path = _coco(tmp_path, [
        {"id": 1, "image_id": 10, "category_id": 90, "bbox": [1, 2, 10, 20]},
        {"id": 2, "image_id": 10, "category_id": 2, "bbox": [0, 0, 5, 5], "iscrowd": 1},
    ])
    path = path.rename(tmp_path / "imgs" / path.name)  # the images beside the file
    records = load_training_records(path, ["two", "seven", "ninety"])
    np.testing.assert_allclose(records[0].boxes, [[1, 2, 11, 22, 2]])
    assert len(records[0].ignored) == 1  # there for the evaluation during training


@pytest.mark.parametrize("ann,reason", [
    ({"id": 5, "image_id": 10, "category_id": 3, "bbox": [1, 1, 2, 2]}, "category_id 3"),
    ({"id": 5, "image_id": 99, "category_id": 7, "bbox": [1, 1, 2, 2]}, "image_id 99"),
    ({"id": 5, "image_id": 10, "category_id": 7, "bbox": [1, 1, 0, 2]}, "x2 <= x1"),
    ({"id": 5, "image_id": 10, "category_id": 7, "bbox": [1, "a", 3, 2]}, "non-numeric"),
    ({"id": 5, "image_id": 10, "category_id": 7, "bbox": [1, 1, 3]}, "not a list"),
])
def test_coco_errors_name_the_object(tmp_path, ann, reason):
    path = _coco(tmp_path, [{"id": 1, "image_id": 10, "category_id": 7, "bbox": [1, 1, 2, 2]}, ann])
    with pytest.raises(AnnotationError) as info:
        load_annotations(path, image_dir=str(tmp_path / "imgs"))
    assert info.value.path == str(path) and "annotations[1] id=5" in str(info.value)
    assert reason in info.value.reason


def test_coco_invalid_json_names_line(tmp_path):
    path = _write(tmp_path / "bad.json", '{"images": [\n  {"id": 1,,}\n]}')
    with pytest.raises(AnnotationError) as info:
        load_annotations(path)
    assert info.value.line == 2


def test_lenient_reading_drops_invalid_boxes_and_keeps_their_lines(tmp_path):
    from PIL import Image as _Image

    from yolo3.core.errors import InvalidBoxError
    _Image.fromarray(np.zeros((40, 50, 3), np.uint8)).save(tmp_path / "a.png")
    ann = tmp_path / "ann.txt"
    ann.write_text("a.png 5,5,1,9,0 1,2,10,12,1\n"        # x2 <= x1: dropped, the other box kept
                   "a.png 60,1,70,9,0\t\n"                  # outside the 50x40 image; trailing tab
                   "a.png -3,-2,10,12,1 8,8,8,20,0\n")      # negative: clipped; zero width: dropped
    strict = scan_annotations(ann, ["a", "b"])
    assert [p.line for p in strict.problems] == [1, 2, 3]
    res = scan_annotations(ann, ["a", "b"], drop_invalid_boxes=True)
    assert res.problems == [] and len(res.records) == 3
    assert [r.boxes.tolist() for r in res.records] == [[[1, 2, 10, 12, 1]], [], [[0, 0, 10, 12, 1]]]
    assert [(type(e), e.line) for e in res.dropped_boxes] == [(InvalidBoxError, 1),
                                                              (InvalidBoxError, 2),
                                                              (InvalidBoxError, 3)]
    assert "outside the 50x40 image" in str(res.dropped_boxes[1]) and res.clipped_boxes == 1
    unchecked = scan_annotations(ann, ["a", "b"], drop_invalid_boxes=True, check_images=False)
    assert unchecked.records[2].boxes.tolist() == [[0, 0, 10, 12, 1]]


def test_box_sizes_and_their_image_sizes_go_row_for_row():
    from yolo3.data.annotations import Record, box_image_sizes, box_sizes
    records = [Record("a.jpg", np.array([[0, 0, 10, 20, 0], [5, 5, 9, 7, 1]], np.float32),
                      (100, 200)),
               Record("b.jpg", np.zeros((0, 5), np.float32), (30, 40)),
               Record("c.jpg", np.array([[1, 2, 4, 8, 0]], np.float32), (50, 60))]
    np.testing.assert_array_equal(box_sizes(records), [[10, 20], [4, 2], [3, 6]])
    np.testing.assert_array_equal(box_image_sizes(records), [[100, 200], [100, 200], [50, 60]])
    assert box_image_sizes([]).shape == (0, 2)
