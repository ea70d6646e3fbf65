"""The one atomic writer (yolo3.fileio): old or new file, never half; stale temporaries removed."""
from __future__ import annotations

import os

import pytest

from yolo3.fileio import (TEMP_PREFIX, atomic_directory, atomic_write, remove_stale_temporaries,
                          write_text_atomic)


def test_atomic_write_keeps_old_file_when_writer_fails(tmp_path):
    target = tmp_path / "f.txt"
    target.write_text("old")

    def bad(tmp):
        with open(tmp, "w") as f:
            f.write("half")
        raise RuntimeError("crash")

    with pytest.raises(RuntimeError):
        atomic_write(target, bad)
    assert target.read_text() == "old"
    assert os.listdir(tmp_path) == ["f.txt"]


def test_atomic_directory_replaces_the_folder_whole_or_not_at_all(tmp_path):
    target = tmp_path / "state"
    atomic_directory(target, lambda d: (d / "a.txt").write_text("one"))
    assert (target / "a.txt").read_text() == "one"

    def bad(folder):
        (folder / "a.txt").write_text("half")
        raise RuntimeError("crash")

    with pytest.raises(RuntimeError):
        atomic_directory(target, bad)
    assert (target / "a.txt").read_text() == "one"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["state"]
    atomic_directory(target, lambda d: (d / "b.txt").write_text("two"))
    assert sorted(p.name for p in target.iterdir()) == ["b.txt"]


def test_write_text_atomic_creates_folders_and_leaves_no_temporary(tmp_path):
    path = write_text_atomic(tmp_path / "deep" / "x.json", "{}\n")
    assert path.read_text(encoding="utf-8") == "{}\n"
    assert not [p for p in path.parent.iterdir() if p.name.startswith(TEMP_PREFIX)]


def test_remove_stale_temporaries_leaves_checkpoints(tmp_path):
    (tmp_path / ".tmp-last.keras-abc.keras").write_text("half")
    (tmp_path / ".tmp-resume-00002-xyz").mkdir()
    (tmp_path / "last.keras").write_text("whole")
    (tmp_path / "resume-00001").mkdir()
    assert remove_stale_temporaries(tmp_path) == 2
    assert sorted(p.name for p in tmp_path.iterdir()) == ["last.keras", "resume-00001"]
