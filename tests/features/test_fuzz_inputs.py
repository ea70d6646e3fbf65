"""Fuzzing the readers, the writers and the flags (hypothesis): whatever a file or a flag holds,
the answer is a result or one named error, never another exception; writers round-trip; and the
command-line cases leave every input and every file beside the output byte-identical."""
from __future__ import annotations

import math
import os
import shutil
import string

import numpy as np
import pytest
import yaml
from cli_harness import run_cli, snapshot
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from yolo3.core.errors import (
    AnnotationError,
    DarknetError,
    FileFormatError,
    InvalidBoxError,
)

FAST = settings(max_examples=150, deadline=None,
                suppress_health_check=[HealthCheck.function_scoped_fixture])
SLOW = settings(max_examples=12, deadline=None,
                suppress_health_check=[HealthCheck.function_scoped_fixture,
                                       HealthCheck.too_slow])

# class names a user could write: any text on one line that is not blank
NAME = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\n\r\x0b\x0c"
                             "\x1c\x1d\x1e\x85\u2028\u2029"), min_size=1, max_size=24).filter(
    lambda n: n.strip() != "")
NAMES = st.lists(NAME, min_size=1, max_size=12, unique=True)
YAML_SCALAR = st.one_of(st.none(), st.booleans(), st.integers(-5, 10**6),
                        st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=12))
YAML_VALUE = st.recursive(YAML_SCALAR, lambda inner: st.one_of(
    st.lists(inner, max_size=5), st.dictionaries(YAML_SCALAR.filter(
        lambda k: k is None or isinstance(k, (str, int, bool))), inner, max_size=4)),
    max_leaves=20)


# ---------------------------------------------------------------------------------- writers


@FAST
@given(NAMES)
def test_any_class_names_round_trip_through_a_data_yaml(names):
    from yolo3.data.yolo_layout import data_yaml_text, load_yaml_bounded
    text = data_yaml_text({"train": "images/train"}, names)
    document = load_yaml_bounded(text, "data.yaml")
    assert [document["names"][k] for k in range(len(names))] == names


@FAST
@given(NAMES)
def test_a_classes_file_reads_back_what_it_was_given_or_refuses_before_writing(tmp_path_factory,
                                                                               names):
    from yolo3.data.class_names import read_classes, write_classes
    path = tmp_path_factory.mktemp("classes") / "classes.txt"
    try:
        write_classes(path, names)
    except FileFormatError as e:
        assert str(e).startswith(str(path)) and not path.exists()
        assert any(n != n.strip() for n in names)
        return
    assert read_classes(path) == names


# ---------------------------------------------------------------------------------- readers


def _named(error: Exception, path) -> None:
    assert isinstance(error, FileFormatError), repr(error)
    assert str(error).startswith(str(path)), str(error)
    assert len(str(error)) < 3000


NAMES_ISH = st.one_of(st.lists(st.one_of(YAML_SCALAR, st.sampled_from(["a", "b", "a", " "])),
                               max_size=6),
                      st.dictionaries(st.one_of(st.integers(-1, 4), st.sampled_from(
                          ["0", "1", "x", "0.5"]), st.floats(0, 3)), YAML_SCALAR, max_size=5),
                      YAML_VALUE)
DATA_YAML = st.fixed_dictionaries(
    {"train": st.sampled_from(["images", "images", "missing", "../images"])},
    optional={"names": NAMES_ISH, "nc": YAML_SCALAR, "val": YAML_VALUE, "path": YAML_SCALAR})


@FAST
@given(st.one_of(DATA_YAML, st.dictionaries(st.sampled_from(["train", "val", "test", "names",
                                                             "nc", "path"]), YAML_VALUE,
                                            max_size=6)))
def test_any_data_yaml_is_read_or_refused_naming_the_file(tmp_path_factory, document):
    from yolo3.data.yolo_layout import read_data_file
    root = tmp_path_factory.mktemp("yaml")
    (root / "images").mkdir()
    path = root / "data.yaml"
    path.write_text(yaml.safe_dump(document, allow_unicode=True), encoding="utf-8")
    try:
        data = read_data_file(path)
    except AnnotationError as e:
        _named(e, path)
        return
    assert data.names and all(isinstance(n, str) and n.strip() for n in data.names)
    assert len(set(data.names)) == len(data.names)
    names = document["names"]
    listed = list(names.values()) if isinstance(names, dict) else names
    assert all(isinstance(n, (str, int, float)) and not isinstance(n, bool) for n in listed)
    nc = document.get("nc")
    assert nc is None or (type(nc) is int and nc == len(data.names))


@FAST
@given(st.text(max_size=400))
def test_any_yaml_text_is_read_or_refused_naming_the_file(tmp_path_factory, text):
    from yolo3.data.yolo_layout import load_yaml_bounded
    path = str(tmp_path_factory.mktemp("yaml") / "data.yaml")
    try:
        load_yaml_bounded(text, path)
    except AnnotationError as e:
        _named(e, path)


ROW_TOKEN = st.one_of(st.sampled_from(["0", "1", "2", "7", "-1", "0.5", "0.25", "1.5", "nan",
                                       "inf", "1e9", "x", "", "0.0", "0.999999"]),
                      st.floats(-2, 2).map(lambda v: f"{v:.4f}"))


@FAST
@given(st.lists(st.lists(ROW_TOKEN, max_size=11).map(" ".join), max_size=8))
def test_any_label_file_keeps_good_rows_and_names_each_refused_one(rows):
    from yolo3.data.yolo_layout import parse_label_rows
    path = "/data/labels/train/x.txt"
    read = parse_label_rows("\n".join(rows), path, 3)
    assert read.boxes.shape == (len(read.lines), 5)
    if len(read.boxes):
        assert np.all((read.boxes[:, :4] >= 0) & (read.boxes[:, :4] <= 1))
        assert np.all(read.boxes[:, 2] > read.boxes[:, 0]) and np.all(read.boxes[:, 3] > read.boxes[:, 1])
        assert set(np.unique(read.boxes[:, 4])) <= {0.0, 1.0, 2.0}
    for error in read.refused:
        assert isinstance(error, InvalidBoxError) and str(error).startswith(f"{path}:")
    assert len(read.lines) + len(read.refused) == sum(1 for r in rows if r.split())


TEXT_TOKEN = st.one_of(st.sampled_from(["img.jpg", "a b.png", "1,2,3,4,0", "10,10,5,5,1",
                                        "0,0,9,9,7", "x,y,z", "1,2,3", "\t", "#", "nan,1,2,3,0"]),
                       st.text(string.printable, max_size=10))


@FAST
@given(st.lists(st.lists(TEXT_TOKEN, max_size=5).map(" ".join), max_size=8))
def test_any_text_annotation_rows_are_read_or_each_bad_line_named(rows):
    from yolo3.data.annotations import parse_text_annotations
    path = "/data/train.txt"
    text = "\n".join(rows)
    try:
        parsed = parse_text_annotations(text, path, 3)
    except AnnotationError as e:
        assert str(e).startswith(path)
        return
    for image, boxes, line in parsed:
        assert boxes.shape[1:] == (5,) and 1 <= line <= len(text.splitlines())


@FAST
@given(st.text(string.printable, max_size=80))
def test_any_anchor_text_is_read_or_refused_naming_the_file(text):
    from yolo3.ops.anchors import parse_anchors
    try:
        anchors = parse_anchors(text, "a.txt")
    except FileFormatError as e:
        assert str(e).startswith("a.txt")
        return
    assert anchors.shape[1] == 2 and np.all(np.isfinite(anchors)) and np.all(anchors > 0)


CFG_LINE = st.one_of(st.sampled_from(["[net]", "[convolutional]", "[yolo]", "[route]",
                                      "[upsample]", "[maxpool]", "[shortcut]", "filters=16",
                                      "size=3", "stride=2", "layers=-1,-3", "from=-3",
                                      "mask=0,1,2", "anchors=1,2,3,4", "classes=2", "num=2",
                                      "activation=leaky", "width=64", "height=64", "channels=3",
                                      "batch_normalize=1", "pad=1", "layers=99", "size=-1",
                                      "filters=x", "= =", "# note"]),
                     st.text(string.printable, max_size=12))


@FAST
@given(st.lists(CFG_LINE, max_size=30))
def test_any_darknet_cfg_is_parsed_or_refused_naming_the_file(lines):
    from yolo3.darknet.cfg import parse_cfg_text
    try:
        parse_cfg_text("\n".join(lines), "x.cfg")
    except DarknetError as e:
        assert str(e).startswith("x.cfg")


@FAST
@given(st.binary(max_size=300))
def test_any_image_bytes_are_read_or_refused_naming_the_file(tmp_path_factory, raw):
    from yolo3.data.images import load_image, probe_image
    path = tmp_path_factory.mktemp("img") / "x.png"
    path.write_bytes(raw)
    for read in (probe_image, load_image):
        try:
            read(path)
        except AnnotationError as e:
            assert str(e).startswith(str(path))


# ------------------------------------------------------------------------------------ flags


@FAST
@given(st.one_of(st.floats(allow_nan=True, allow_infinity=True).map(repr), st.text(max_size=8)))
def test_any_threshold_value_is_taken_in_0_to_1_or_refused_naming_the_flag(capsys, text):
    import argparse

    from yolo3.cli.common import add_threshold_arguments
    parser = argparse.ArgumentParser(prog="yolo3 detect")
    add_threshold_arguments(parser)
    for flag in ("--score", "--iou"):
        try:
            value = getattr(parser.parse_args([f"{flag}={text}"]), flag[2:])
        except SystemExit as e:
            assert e.code == 2
            assert f"argument {flag}" in capsys.readouterr().err
            continue
        assert math.isfinite(value) and 0.0 <= value <= 1.0


@FAST
@given(st.text(max_size=8))
def test_any_count_value_is_a_whole_number_in_range_or_refused(text):
    import argparse

    from yolo3.cli.common import non_negative_int, positive_int
    for kind, low in ((positive_int, 1), (non_negative_int, 0)):
        try:
            value = kind(text)
        except argparse.ArgumentTypeError as e:
            assert "expected a whole number" in str(e)
            continue
        assert isinstance(value, int) and value >= low


# --------------------------------------------------------------------------- the command line


@pytest.fixture(scope="module")
def small_set(trained_world, tmp_path_factory):
    """Two images with their boxes (keras-yolo3 text rows) outside any output's parent."""
    root = tmp_path_factory.mktemp("fuzz_set")
    for k, source in enumerate(sorted((trained_world["data"] / "images").iterdir())[:2]):
        shutil.copy(source, root / f"{k}.png")
    (root / "train.txt").write_text(f"{root / '0.png'} 10,10,40,40,0\n"
                                    f"{root / '1.png'} 5,5,30,50,1\n")
    return root


@SLOW
@given(NAMES.filter(lambda names: len(names) >= 2 and all(n == n.strip() for n in names)),
       st.sampled_from(["yolo", "coco", "voc", "text"]))
def test_any_class_names_survive_a_conversion_and_nothing_else_changes(small_set,
                                                                      tmp_path_factory, capsys,
                                                                      names, layout):
    from yolo3.data.annotations import coco_class_names
    from yolo3.data.class_names import read_classes
    from yolo3.data.yolo_layout import read_data_file
    work = tmp_path_factory.mktemp("convert")
    classes = work / "classes.txt"
    classes.write_text("".join(n + "\n" for n in names), encoding="utf-8")
    (work / "keep.txt").write_text("beside the output")
    before = snapshot(small_set, work)
    out = work / "out"
    code, err = run_cli(["annotations", "--annotations", small_set / "train.txt", "--classes",
                         classes, "--to", layout, "--out", out, "--quiet"], capsys)
    assert code == 0, err
    assert {k: v for k, v in snapshot(small_set, work).items() if k in before} == before
    read_back = {"yolo": lambda: read_data_file(out / "data.yaml").names,
                 "coco": lambda: coco_class_names(out / "train.json"),
                 "voc": lambda: read_classes(out / "classes.txt"),
                 "text": lambda: read_classes(out / "classes.txt")}[layout]
    assert read_back() == names


@SLOW
@given(st.dictionaries(st.sampled_from(["train", "val", "names", "nc"]), YAML_VALUE, max_size=4))
def test_check_answers_any_data_yaml_with_a_named_refusal_or_a_report(trained_world,
                                                                      tmp_path_factory, capsys,
                                                                      document):
    root = tmp_path_factory.mktemp("check")
    images = root / "images" / "train"
    images.mkdir(parents=True)
    shutil.copy(sorted((trained_world["data"] / "images").iterdir())[0], images / "a.png")
    (root / "labels" / "train").mkdir(parents=True)
    (root / "labels" / "train" / "a.txt").write_text("0 0.5 0.5 0.2 0.2\n")
    document = {"train": "images/train", "val": "images/train", **document}
    data = root / "data.yaml"
    data.write_text(yaml.safe_dump(document, allow_unicode=True), encoding="utf-8")
    before = snapshot(root)
    code, err = run_cli(["check", "--data", data, "--quiet"], capsys)
    assert code in (0, 1, 2), err
    assert "Traceback" not in err and "unexpected" not in err, err
    if code == 2:
        assert str(data) in err or str(root) in err, err
    assert snapshot(root) == before
    assert not [p for p in os.listdir(root) if p.startswith(".yolo3")]
