"""Declared flag types (yolo3.cli.flags): numbers in their range, paths in their role, text, the
environment variables, and the inputs and outputs read back off the declarations."""
from __future__ import annotations

import argparse
import os

import pytest

from yolo3.cli.flags import (
    CPU_REPLICAS,
    ENVIRONMENT,
    INPUT_SIDE,
    MAX_CPU_REPLICAS_PER_CORE,
    InputPath,
    MediaSource,
    Number,
    OutputPath,
    Text,
    check_environment,
    declared_paths,
)
from yolo3.core.errors import ArgumentError


def _refused(declared, text: str) -> str:
    with pytest.raises(argparse.ArgumentTypeError) as caught:
        declared(text)
    return str(caught.value)


def test_a_number_takes_its_range_and_words_and_says_what_it_takes():
    tile = Number(int, 32, 16384, words=("auto",))
    assert tile("32") == 32 and tile("auto") == "auto"
    assert "a whole number from 32 to 16384, or auto, got '31'" in _refused(tile, "31")
    for bad in ("nan", "inf", "1e3", "", "99999999999999999999999", "32.5"):
        _refused(tile, bad)
    share = Number(float, 0.0, 1.0, lo_open=True)
    assert share("1") == 1.0 and "above 0, up to 1" in _refused(share, "0")
    assert INPUT_SIDE("416") == 416 and "a multiple of 32" in _refused(INPUT_SIDE, "400")


def test_cpu_replicas_are_bounded_by_the_machine_with_the_figure():
    cap = max(8, MAX_CPU_REPLICAS_PER_CORE * (os.cpu_count() or 1))
    assert CPU_REPLICAS(str(cap)) == cap
    message = _refused(CPU_REPLICAS, "100000")
    assert f"from 1 to {cap}" in message and f"{os.cpu_count()} cores" in message
    _refused(CPU_REPLICAS, "0")


def test_an_input_path_exists_is_the_right_kind_and_text_where_read_as_text(tmp_path):
    text, binary = tmp_path / "a.txt", tmp_path / "b.bin"
    text.write_text("ok\n")
    binary.write_bytes(b"\x00\x01\xff")
    as_text = InputPath(text=True, words=("auto",))
    assert as_text(str(text)) == str(text) and as_text("auto") == "auto"
    assert "not a text file" in _refused(as_text, str(binary))
    assert "no such file" in _refused(as_text, str(tmp_path / "none"))
    assert "a folder" in _refused(as_text, str(tmp_path))
    assert "not a folder" in _refused(InputPath("folder"), str(text))
    assert InputPath("any")(str(tmp_path)) == str(tmp_path)
    source = MediaSource()
    assert source("0") == "0" and source(str(tmp_path / "*.txt")) == str(tmp_path / "*.txt")
    assert "no file matches" in _refused(source, str(tmp_path / "*.jpg"))


def test_an_output_path_is_its_kind_under_a_folder_that_can_be_made(tmp_path):
    (tmp_path / "f").write_text("a file")
    out_file, out_dir = OutputPath("file"), OutputPath("folder")
    assert out_file(str(tmp_path / "new" / "x.json")) == str(tmp_path / "new" / "x.json")
    assert "a folder" in _refused(out_file, str(tmp_path))
    assert "is a file, not a folder" in _refused(out_file, str(tmp_path / "f" / "x.json"))
    assert "a file" in _refused(out_dir, str(tmp_path / "f"))
    assert out_dir(str(tmp_path / "a" / "b")) == str(tmp_path / "a" / "b")


def test_text_is_bounded_and_patterned():
    fourcc = Text(length=4, pattern=r"[ -~]{4}", example="mp4v")
    assert fourcc("MJPG") == "MJPG" and fourcc.example == "mp4v"
    for bad in ("", "mp4", "mp4vv"):
        _refused(fourcc, bad)
    assert Text(5)("abc") == "abc" and "6 characters" in _refused(Text(5), "abcdef")


def test_the_environment_is_checked_by_its_declarations(tmp_path):
    assert set(ENVIRONMENT) == {"KERAS_BACKEND", "YOLO3_CACHE_DIR"}
    check_environment({"KERAS_BACKEND": "jax", "YOLO3_CACHE_DIR": str(tmp_path / "cache")})
    check_environment({"KERAS_BACKEND": ""})  # empty: the default
    with pytest.raises(ArgumentError, match=r"KERAS_BACKEND=bogus: the Keras backend"):
        check_environment({"KERAS_BACKEND": "bogus"})
    (tmp_path / "file").write_text("")
    with pytest.raises(ArgumentError, match="YOLO3_CACHE_DIR="):
        check_environment({"YOLO3_CACHE_DIR": str(tmp_path / "file")})


def test_declared_paths_are_read_off_the_parser(tmp_path):
    (tmp_path / "in.txt").write_text("x")
    parser = argparse.ArgumentParser()
    parser.add_argument("--anchors", type=InputPath(text=True, words=("auto",)))
    parser.add_argument("--data", nargs="+", type=InputPath())
    parser.add_argument("--json", type=OutputPath("file"))
    parser.add_argument("--out", type=OutputPath("folder"))
    args = parser.parse_args(["--anchors", "auto", "--data", str(tmp_path / "in.txt"),
                              "--json", "a.json", "--out", "o"])
    outputs, inputs = declared_paths(parser, args)
    assert outputs == [("--json", "a.json", "file"), ("--out", "o", "folder")]
    assert inputs == [str(tmp_path / "in.txt")]  # the word auto is no path
    parser.add_argument("--input", type=MediaSource())
    for source in ("0", str(tmp_path / "*.txt")):  # a webcam index, a glob: no path of their own
        outputs, inputs = declared_paths(parser, parser.parse_args(["--input", source]))
        assert inputs == []


def test_a_named_output_that_exists_must_be_of_the_kind_written(tmp_path):
    model, rows, old = tmp_path / "final.keras", tmp_path / "train.txt", tmp_path / "old.json"
    model.write_bytes(b"PK\x03\x04\x14\x00\x00\x00 a zip")
    rows.write_text("img.jpg 1,2,3,4,0\n")
    old.write_text('[{"image": "a.jpg"}]')
    as_json = OutputPath("file", format="json")
    assert as_json(str(old)) == str(old)  # a JSON file of the kind written: replaced
    assert as_json(str(tmp_path / "new.json")) == str(tmp_path / "new.json")
    for other in (model, rows):
        assert "is not a JSON file" in _refused(as_json, str(other))
    (tmp_path / "empty").write_bytes(b"")
    assert as_json(str(tmp_path / "empty"))  # nothing in it to lose
    assert "not a text file" in _refused(OutputPath("file", format="text"), str(model))
    with pytest.raises(ValueError):
        OutputPath("folder", format="json")
