"""yolo3.core.paths: output paths are checked for their kind, a makeable parent and never an input,
before anything is written."""
from __future__ import annotations

import os

import pytest

from yolo3.core.errors import ArgumentError, SettingError
from yolo3.core.paths import (
    check_output_dir,
    check_output_file,
    check_outputs,
    refuse_overwriting_inputs,
    same_or_inside,
    user_cache_dir,
)


def test_cache_folder_follows_the_environment(monkeypatch, tmp_path):
    monkeypatch.setenv("YOLO3_CACHE_DIR", str(tmp_path / "mine"))
    assert user_cache_dir() == str(tmp_path / "mine")
    monkeypatch.delenv("YOLO3_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert user_cache_dir() == os.path.join(str(tmp_path / "xdg"), "yolo3")
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert user_cache_dir() == os.path.join(str(tmp_path / "home"), ".cache", "yolo3")


def test_output_folder_may_exist_or_be_made_and_is_never_a_file(tmp_path):
    assert check_output_dir(tmp_path, "--out") == str(tmp_path)
    assert check_output_dir(tmp_path / "new" / "deeper", "--out") == str(tmp_path / "new" / "deeper")
    assert not (tmp_path / "new").exists()  # checking makes nothing
    afile = tmp_path / "a.txt"
    afile.write_text("x")
    with pytest.raises(SettingError, match=r"a\.txt: --out must be a folder, and this is a file") as e:
        check_output_dir(afile, "--out")
    assert e.value.settings == ("--out",)
    with pytest.raises(SettingError, match=r"--out cannot be made: .*a\.txt is a file"):
        check_output_dir(afile / "sub" / "deeper", "--out")
    assert afile.read_text() == "x"


def test_output_file_may_exist_or_be_made_and_is_never_a_folder(tmp_path):
    assert check_output_file(tmp_path / "out.json", "--json") == str(tmp_path / "out.json")
    assert check_output_file(tmp_path / "new" / "out.json", "--json")
    with pytest.raises(SettingError, match="--json must be a file, and this is a folder"):
        check_output_file(tmp_path, "--json")
    (tmp_path / "f").write_text("x")
    with pytest.raises(SettingError, match=r"--json cannot be written: .*f is a file"):
        check_output_file(tmp_path / "f" / "out.json", "--json")


def test_same_or_inside_resolves_links_and_does_not_match_prefixes(tmp_path):
    (tmp_path / "data").mkdir()
    (tmp_path / "data2").mkdir()
    os.symlink(tmp_path / "data", tmp_path / "link")
    assert same_or_inside(tmp_path / "data", tmp_path / "data")
    assert same_or_inside(tmp_path / "data" / "x.jpg", tmp_path / "data")
    assert same_or_inside(tmp_path / "link" / "x.jpg", tmp_path / "data")
    assert not same_or_inside(tmp_path / "data2" / "x.jpg", tmp_path / "data")
    assert not same_or_inside(tmp_path, tmp_path / "data")


def test_an_output_that_is_or_holds_an_input_is_refused(tmp_path):
    photos = tmp_path / "photos"
    photos.mkdir()
    image = photos / "a.jpg"
    image.write_bytes(b"jpeg")
    with pytest.raises(ArgumentError, match=r"--output contains the input .*a\.jpg"):
        refuse_overwriting_inputs([("--output", photos)], [image])
    with pytest.raises(ArgumentError, match=r"--json is the input .*a\.jpg"):
        refuse_overwriting_inputs([("--output", None), ("--json", image)], [None, image])
    refuse_overwriting_inputs([("--output", tmp_path / "elsewhere")], [image])  # accepted
    assert image.read_bytes() == b"jpeg"


def test_check_outputs_checks_kinds_before_inputs(tmp_path):
    (tmp_path / "in.txt").write_text("x")
    check_outputs(files=[("--json", tmp_path / "e.json"), ("--plot", None)],
                  inputs=[tmp_path / "in.txt", None], dirs=[("--out", tmp_path / "o")])
    with pytest.raises(SettingError, match="--out must be a folder"):
        check_outputs(dirs=[("--out", tmp_path / "in.txt")], inputs=[tmp_path / "in.txt"])
    with pytest.raises(ArgumentError, match="--json is the input"):
        check_outputs(files=[("--json", tmp_path / "in.txt")], inputs=[tmp_path / "in.txt"])
