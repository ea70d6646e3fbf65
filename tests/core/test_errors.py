"""Error types (yolo3.core.errors): the place in every file message, the hierarchy the command line
maps to exit codes, and settings worded the front end's way."""
from __future__ import annotations

from pathlib import Path

import pytest

from yolo3.core.errors import (
    AnnotationError,
    ArgumentError,
    CommandFailed,
    DarknetError,
    FileFormatError,
    InvalidBoxError,
    SettingError,
    Yolo3Error,
)


@pytest.mark.parametrize("args, message", [
    ((Path("data/train.txt"), "bad box", 12, None), "data/train.txt:12: bad box"),
    (("voc", "no <size>", None, "Annotations/a.xml"), "voc (Annotations/a.xml): no <size>"),
    (("m.keras", "bad model info", None, "yolo3.json"), "m.keras (yolo3.json): bad model info"),
    (("a.txt", "x", 3, "row"), "a.txt:3 (row): x"),
    ((None, "empty input", None, None), "<input>: empty input")])
def test_file_messages_start_with_the_place(args, message):
    e = FileFormatError(*args)
    assert str(e) == message
    assert e.reason == args[1] and e.line == args[2] and e.where == args[3]
    assert e.path == (None if args[0] is None else str(args[0]))


def test_hierarchy():
    for kind in (AnnotationError, DarknetError, InvalidBoxError):
        assert issubclass(kind, FileFormatError)
    assert issubclass(InvalidBoxError, AnnotationError)
    for kind in (FileFormatError, ArgumentError, SettingError):  # bad input: also a ValueError
        assert issubclass(kind, ValueError) and issubclass(kind, Yolo3Error)
    assert issubclass(SettingError, ArgumentError)
    assert issubclass(CommandFailed, Yolo3Error) and not issubclass(CommandFailed, ValueError)


def test_setting_error_words_whole_setting_names_only():
    e = SettingError("batch_size 0 and val_batch_size 2: batch_size must be >= 1", "batch_size")
    assert e.worded({"batch_size": "--batch-size"}.get) == \
        "--batch-size 0 and val_batch_size 2: --batch-size must be >= 1"
    assert e.worded(lambda s: None) == str(e)
    paths = SettingError("runs/resume/resume.json: cannot resume: no resume.", "resume")
    assert paths.worded({"resume": "--resume"}.get) == \
        "runs/resume/resume.json: cannot --resume: no --resume."
    assert isinstance(e, ValueError) and e.settings == ("batch_size",)


def test_an_error_given_more_than_its_message_still_reads_as_the_message():
    from yolo3.core.errors import ArgumentError, CommandFailed
    assert str(ArgumentError("--out x: refused", "OUT")) == "--out x: refused"
    assert str(CommandFailed("it failed", 3)) == "it failed"
