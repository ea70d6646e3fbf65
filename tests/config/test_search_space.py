"""yolo3.config.search_space: a space read from its YAML file, the default space valid for the
settings it names, and each bad entry named by file, line and reason."""
from __future__ import annotations

import pytest

from yolo3.config.search_space import DEFAULT_SPACE, Dimension, read_search_space, space_text
from yolo3.config.settings_file import setting_problem
from yolo3.core.errors import FileFormatError


def test_a_space_is_read_as_written(tmp_path):
    path = tmp_path / "space.yaml"
    path.write_text("lr: {low: 0.0003, high: 0.01, log: true}  # the learning rate\n"
                    "mosaic: {low: 0, high: 1}\n"
                    "freeze_epochs: {low: 0, high: 5}\n"
                    "optimizer: {choices: [adam, sgd]}\n"
                    "multi_scale: {choices: [[320, 416], [320, 608]]}\n")
    assert read_search_space(path) == [
        Dimension("lr", 0.0003, 0.01, log=True), Dimension("mosaic", 0.0, 1.0),
        Dimension("freeze_epochs", 0.0, 5.0, whole=True),
        Dimension("optimizer", choices=("adam", "sgd")),
        Dimension("multi_scale", choices=((320, 416), (320, 608)))]
    again = tmp_path / "again.yaml"
    again.write_text(space_text(read_search_space(path)))
    assert read_search_space(again) == read_search_space(path)


def test_the_default_space_lies_inside_every_settings_range(tmp_path):
    for d in DEFAULT_SPACE:
        assert d.low < d.high and setting_problem(d.name, d.low) == ""
        assert setting_problem(d.name, d.high) == ""
    path = tmp_path / "default.yaml"
    path.write_text(space_text(DEFAULT_SPACE))
    assert tuple(read_search_space(path)) == DEFAULT_SPACE


@pytest.mark.parametrize("text, message", [
    ("lr: {low: 0.1, high: 0.01}\n", ":1: lr: low (0.1) must be below high (0.01)"),
    ("mosaic: {low: 0, high: 1}\nbox_gain: {low: 0, high: 5}\n",
     ":2: box_gain must be a positive number up to 1000, got 0.0 (low and high lie inside "
     "the setting's range)"),
    ("lrr: {low: 0.1, high: 1}\n", ":1: no setting 'lrr' (did you mean lr?)"),
    ("optimizer: {choices: [adam, rmsprop]}\n",
     ":1: choice 'rmsprop': optimizer must be one of adam, sgd, got 'rmsprop'"),
    ("weight_decay: {low: 0, high: 0.1, log: true}\n",
     ":1: weight_decay: a log scale needs low above 0, got 0"),
    ("variant: {low: 1, high: 2}\n", ":1: variant is not a number: give its choices"),
    ("freeze_epochs: {low: 0.5, high: 3}\n", ":1: freeze_epochs: low and high must be whole "
                                             "numbers, got 0.5"),
    ("lr: 0.01\n", ":1: lr: expected {low: L, high: H[, log: true]} or {choices: [...]}"),
    ("lr: {low: 0.001}\n", ":1: lr: a range needs low and high"),
    ("optimizer: {choices: []}\n", ":1: optimizer: choices must be a non-empty list, alone"),
    ("# nothing\n", ": search space: no setting to search"),
])
def test_a_bad_space_is_named_with_its_line(tmp_path, text, message):
    path = tmp_path / "space.yaml"
    path.write_text(text)
    with pytest.raises(FileFormatError) as caught:
        read_search_space(path)
    assert f"{path}{message}" in str(caught.value)
