"""Darknet's published weights: their sizes against the layouts, the real tiny file by checksum,
and the one line for a download that went wrong (read through ``yolo3 convert``)."""
from __future__ import annotations

import hashlib

import pytest
from locations import shared

from yolo3.cli import main as yolo3_main
from yolo3.darknet.cfg import parse_cfg_text
from yolo3.darknet.layout import layout_cfg_text
from yolo3.darknet.published import PUBLISHED, identify, refusal
from yolo3.darknet.random_weights import write_random_weights
from yolo3.darknet.weights import Header, expected_size


@pytest.mark.parametrize("entry", PUBLISHED, ids=lambda p: p.name)
def test_each_published_size_is_its_variants_layout_with_darknets_header(entry):
    header = Header(0, 2, 0)
    header.seen = 0
    cfg = parse_cfg_text(layout_cfg_text(entry.variant))
    assert expected_size(cfg, header) == entry.size


def test_the_real_tiny_file_is_recognised_by_its_checksums():
    path = shared("darknet", "yolov3-tiny.weights")
    data = path.read_bytes()
    tiny = next(p for p in PUBLISHED if p.name == "yolov3-tiny.weights")
    assert (len(data), hashlib.sha256(data).hexdigest(), hashlib.md5(data).hexdigest()) == \
        (tiny.size, tiny.sha256, tiny.md5)
    assert identify(path) is tiny


def _tiny_weights(folder, name="yolov3-tiny.weights", seed=1):
    cfg = folder / "yolov3-tiny.cfg"
    cfg.write_text(layout_cfg_text("tiny"))
    weights = folder / name
    write_random_weights(cfg, weights, seed=seed)
    return cfg, weights


def test_a_file_of_the_published_size_but_another_checksum_is_not_theirs(tmp_path):
    _, weights = _tiny_weights(tmp_path)
    assert weights.stat().st_size == next(p.size for p in PUBLISHED if p.variant == "tiny")
    assert identify(weights) is None  # the right layout, other numbers: a user's own training
    assert refusal(weights) is None


def test_a_users_own_weights_under_a_published_name_convert(tmp_path, capsys):
    cfg, weights = _tiny_weights(tmp_path)
    assert yolo3_main(["convert", str(cfg), str(weights), str(tmp_path / "m.keras"),
                       "--no-progress"]) == 0
    assert "recognised" not in capsys.readouterr().out


@pytest.mark.parametrize("damage, message", [
    ("cut", "bytes, where yolov3-tiny.weights as Darknet published it has 35,434,956: cut short: "
            "the download is incomplete; download it again, e.g. from https://github.com/hank-ai/"
            "darknet/releases/download/v2.0/yolov3-tiny.weights"),
    ("page", "this is a web page or a text file, not Darknet weights: the download was answered "
             "with a page instead of the file"),
])
def test_a_download_gone_wrong_gets_one_line(tmp_path, capsys, damage, message):
    cfg, weights = _tiny_weights(tmp_path)
    if damage == "cut":
        weights.write_bytes(weights.read_bytes()[:1_000_000])
    else:
        weights.write_text("<!DOCTYPE html>\n<html><head><title>Darknet</title></head></html>\n")
    out = tmp_path / "m.keras"
    assert yolo3_main(["convert", str(cfg), str(weights), str(out), "--no-progress"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"yolo3 convert: error: {weights}: ")
    assert message in err[0]
    assert not out.exists()


def test_a_published_file_with_another_cfg_names_its_own(tmp_path, capsys):
    weights = shared("darknet", "yolov3-tiny.weights")
    cfg = tmp_path / "yolov3.cfg"
    cfg.write_text(layout_cfg_text("yolov3"))
    assert yolo3_main(["convert", str(cfg), str(weights), str(tmp_path / "m.keras"),
                       "--no-progress"]) == 2
    assert "this is Darknet's published yolov3-tiny.weights (tiny, COCO's 80 classes; cfg " \
           "yolov3-tiny.cfg): convert it with its own cfg, yolov3-tiny.cfg" in capsys.readouterr().err
