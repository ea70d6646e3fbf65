"""yolo3.config.settings_file: settings written and read back, and each way a file can be wrong
named by file, line and reason."""
from __future__ import annotations

import pytest

from yolo3.config.settings_file import read_settings_file, setting_problem, settings_text
from yolo3.config.train_config import TrainConfig
from yolo3.core.errors import FileFormatError


def test_settings_round_trip_through_the_file(tmp_path):
    settings = {"variant": "tiny-af", "lr": 0.0021, "mosaic": 0.5, "multi_scale": (320, 608),
                "input_size": (288, 512), "batch_size": "auto", "ema": False, "anchors": None}
    path = tmp_path / "s.yaml"
    path.write_text(settings_text(settings, "a comment\nof two lines"))
    assert path.read_text().startswith("# yolo3 training settings")
    assert "# of two lines\n" in path.read_text()
    assert read_settings_file(path) == settings
    config = TrainConfig(annotations="a", classes="c", output="o", **read_settings_file(path))
    assert config.data.multi_scale == (320, 608) and config.model.variant == "tiny-af"


def test_an_empty_file_holds_no_settings_and_old_names_are_read(tmp_path):
    (tmp_path / "e.yaml").write_text("# nothing\n")
    assert read_settings_file(tmp_path / "e.yaml") == {}
    (tmp_path / "m.yaml").write_text("model: tiny\n")
    assert read_settings_file(tmp_path / "m.yaml") == {"variant": "tiny"}


@pytest.mark.parametrize("text, message", [
    ("lr: 0.001\nlrr: 0.1\n", ":2: no setting 'lrr' (did you mean lr?)"),
    ("mosaic: 2\n", ":1: mosaic must be in [0, 1] (a probability), got 2"),
    ("batch_size: 2.5\n", ":1: batch_size must be a whole number or auto, got 2.5"),
    ("optimizer: rmsprop\n", ":1: optimizer must be one of adam, sgd, got 'rmsprop'"),
    ("lr: 0.1\nlr: 0.2\n", ":2: settings file: lr is given twice"),
    ("- lr\n", ":1: settings file: expected a mapping of names to values"),
    ("lr: [1, 2\n", ":2: settings file is not YAML"),
    ("a: &x 1\nb: *x\n", ":2: settings file: YAML aliases (*name) are not allowed"),
])
def test_a_bad_file_is_named_with_its_line(tmp_path, text, message):
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    with pytest.raises(FileFormatError) as caught:
        read_settings_file(path)
    assert f"{path}{message}" in str(caught.value)


def test_setting_problem_accepts_what_check_accepts():
    assert setting_problem("lr", 0.01) == "" and setting_problem("batch_size", "auto") == ""
    assert setting_problem("tile", "auto") == "" and setting_problem("anchors", None) == ""
    assert setting_problem("epochs", 0).startswith("epochs must be in")
