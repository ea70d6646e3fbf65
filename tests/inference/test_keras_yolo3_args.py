"""yolo3.inference.keras_yolo3_args: keras-yolo3's ``YOLO()`` keywords and defaults resolved to
yolo3's (plain Python: files in a temporary working folder stand in for model_data/)."""
from __future__ import annotations

import pytest

from yolo3.inference.keras_yolo3_args import KERAS_YOLO3_DEFAULTS, resolve_yolo_kwargs


@pytest.fixture
def workdir(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    return tmp_path


def _model_data(folder, anchors=True, classes=True):
    (folder / "model_data").mkdir(exist_ok=True)
    if anchors:
        (folder / "model_data" / "yolo_anchors.txt").write_text("10,13, 16,30, 33,23\n")
    if classes:
        (folder / "model_data" / "coco_classes.txt").write_text("person\nbicycle\n")


def test_defaults_are_keras_yolo3s(workdir):
    assert KERAS_YOLO3_DEFAULTS["model_image_size"] == (416, 416)
    assert (KERAS_YOLO3_DEFAULTS["score"], KERAS_YOLO3_DEFAULTS["iou"]) == (0.3, 0.45)
    assert resolve_yolo_kwargs(None, None, None, None, None, {}) == \
        ("model_data/yolo.h5", None, None, None)  # no model file here: nothing else is guessed


def test_yolo_video_flags_are_aliases_and_its_own_flags_are_ignored(workdir):
    flags = {"model": "m.h5", "anchors": "a.txt", "classes": "c.txt",
             "image": True, "input": "in.mp4", "output": ""}
    assert resolve_yolo_kwargs(None, None, None, None, None, flags) == \
        ("m.h5", "a.txt", "c.txt", None)
    # an explicit *_path wins over its alias
    assert resolve_yolo_kwargs("x.h5", None, "mine.txt", None, None, flags) == \
        ("x.h5", "a.txt", "mine.txt", None)


def test_an_unknown_keyword_is_a_type_error(workdir):
    with pytest.raises(TypeError, match="unexpected keyword argument 'gpus'"):
        resolve_yolo_kwargs(None, None, None, None, None, {"gpus": 2})


def test_a_model_without_facts_takes_model_data_defaults_that_exist(workdir):
    (workdir / "plain.h5").write_bytes(b"not a zip: a keras-yolo3 .h5 carries no yolo3 facts")
    _model_data(workdir)
    assert resolve_yolo_kwargs("plain.h5", None, None, None, None, {}) == \
        ("plain.h5", "model_data/yolo_anchors.txt", "model_data/coco_classes.txt", None)
    (workdir / "model_data" / "coco_classes.txt").unlink()
    assert resolve_yolo_kwargs("plain.h5", None, None, None, None, {}) == \
        ("plain.h5", "model_data/yolo_anchors.txt", None, None)


def test_files_beside_the_model_win_over_model_data(workdir):
    run = workdir / "run"
    run.mkdir()
    (run / "final.h5").write_bytes(b"weights")
    (run / "anchors.txt").write_text("10,14, 23,27, 37,58\n")  # what a training run writes
    (run / "classes.txt").write_text("cat\n")
    _model_data(workdir)
    assert resolve_yolo_kwargs("run/final.h5", None, None, None, None, {}) == \
        ("run/final.h5", None, None, None)


@pytest.mark.parametrize("size, want", [((320, 416), (320, 416)), ([256, 256], (256, 256)),
                                        ((None, None), "image")])
def test_model_image_size_becomes_the_input_size(workdir, size, want):
    assert resolve_yolo_kwargs("m.h5", "a", "c", None, size, {})[3] == want


def test_input_size_and_model_image_size_together_are_refused(workdir):
    with pytest.raises(TypeError, match="not both"):
        resolve_yolo_kwargs("m.h5", "a", "c", (416, 416), (416, 416), {})
