"""The one atomic writer (yolo3.core.fileio): old or new file, never half; stale temporaries removed."""
from __future__ import annotations

import os

import pytest

from yolo3.core.fileio import (
    TEMP_PREFIX,
    atomic_directory,
    atomic_write,
    is_temporary,
    remove_entry,
    remove_stale_temporaries,
    temporary_folder,
    temporary_owner,
    temporary_prefix,
    write_text_atomic,
)


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


def _dead_pid() -> int:
    """The pid of a process that has ended."""
    import subprocess
    import sys
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def test_temporaries_carry_host_and_pid_and_are_read_back():
    name = temporary_prefix("last.keras") + "abc.keras"
    assert name.startswith(TEMP_PREFIX) and is_temporary(name)
    host, pid = temporary_owner(name)
    assert pid == os.getpid() and host.isalnum()
    assert temporary_owner("last.keras") is None and temporary_owner(".tmp-x-1-y") is None


def test_remove_stale_temporaries_takes_only_dead_writers_leftovers(tmp_path):
    host, _ = temporary_owner(temporary_prefix("x"))
    dead = _dead_pid()
    (tmp_path / f"{TEMP_PREFIX}{host}-{dead}-last.keras-abc.keras").write_text("half")
    (tmp_path / f"{TEMP_PREFIX}{host}-{dead}-out-xyz").mkdir()
    (tmp_path / f"{TEMP_PREFIX}{host}-{dead}-out-xyz" / "a.txt").write_text("half")
    live = tmp_path / f"{temporary_prefix('best.keras')}q.keras"  # this process: a live writer
    live.write_text("being written")
    other_host = tmp_path / f"{TEMP_PREFIX}elsewhere{host}-{dead}-f-1"  # another machine's
    other_host.write_text("theirs")
    users = [tmp_path / ".tmp-notes.txt", tmp_path / "last.keras", tmp_path / "resume-00001"]
    users[0].write_text("the user's own hidden file")
    users[1].write_text("whole")
    users[2].mkdir()
    assert remove_stale_temporaries(tmp_path) == 2
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        [live.name, other_host.name] + [u.name for u in users])


def test_legacy_temporaries_only_where_asked(tmp_path):
    (tmp_path / ".tmp-last.keras-abc.keras").write_text("half")
    (tmp_path / ".tmp-resume-00002-xyz").mkdir()
    (tmp_path / "last.keras").write_text("whole")
    assert remove_stale_temporaries(tmp_path) == 0
    assert remove_stale_temporaries(tmp_path, legacy=True) == 2
    assert [p.name for p in tmp_path.iterdir()] == ["last.keras"]


def test_the_next_write_sweeps_a_killed_writers_temporary(tmp_path):
    host, _ = temporary_owner(temporary_prefix("x"))
    stale = tmp_path / f"{TEMP_PREFIX}{host}-{_dead_pid()}-out.json-abc.json"
    stale.write_text("half")
    write_text_atomic(tmp_path / "other.json", "{}")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["other.json"]


def test_an_interrupted_writer_leaves_nothing(tmp_path):
    target = tmp_path / "f.txt"

    def interrupted(tmp):
        with open(tmp, "w") as f:
            f.write("half")
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        atomic_write(target, interrupted)

    def interrupted_folder(folder):
        (folder / "a").write_text("half")
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        atomic_directory(tmp_path / "state", interrupted_folder)
    assert os.listdir(tmp_path) == []


def _interrupt_after_mkdir(monkeypatch):
    """``os.mkdir`` that makes the folder, then is interrupted before its caller goes on: the
    moment CI's SIGINT once hit (a conversion left an empty temporary folder behind)."""
    real = os.mkdir

    def mkdir(path, *args, **kwargs):
        real(path, *args, **kwargs)
        raise KeyboardInterrupt

    monkeypatch.setattr(os, "mkdir", mkdir)


def test_an_interrupt_just_after_the_temporary_folder_is_made_leaves_nothing(tmp_path,
                                                                           monkeypatch):
    from yolo3.core.output_folder import write_output_folder

    (tmp_path / "keep.txt").write_text("the user's")
    _interrupt_after_mkdir(monkeypatch)
    with pytest.raises(KeyboardInterrupt):
        atomic_directory(tmp_path / "state", lambda folder: None)
    with pytest.raises(KeyboardInterrupt):
        write_output_folder(tmp_path / "out", lambda folder: None, "out")
    with pytest.raises(KeyboardInterrupt):
        with temporary_folder(tmp_path, "x"):
            pass
    assert os.listdir(tmp_path) == ["keep.txt"]


def test_a_temporary_folder_is_new_and_removed_unless_kept(tmp_path):
    with temporary_folder(tmp_path, "out") as first, temporary_folder(tmp_path, "out") as second:
        assert first != second and first.is_dir() and second.is_dir()
        assert first.name.startswith(temporary_prefix("out"))
        (first / "a").write_text("a")
    assert os.listdir(tmp_path) == []
    with temporary_folder(tmp_path, "kept", keep=True) as kept:
        pass
    assert kept.is_dir()
    with pytest.raises(ValueError), temporary_folder(tmp_path, "kept", keep=True) as failed:
        raise ValueError("a failure removes it even when kept")
    assert not failed.exists()
    with pytest.raises(FileNotFoundError) as caught, \
            temporary_folder(tmp_path / "missing", "out"):
        pass
    assert caught.value.filename == str(tmp_path / "missing" / "out")  # the destination named


def test_a_failed_write_names_the_path_asked_for_not_the_temporary(tmp_path):
    def denied(tmp):
        raise PermissionError(13, "Permission denied", tmp)

    with pytest.raises(PermissionError) as caught:
        atomic_write(tmp_path / "out.json", denied)
    assert caught.value.filename == str(tmp_path / "out.json")
    assert os.listdir(tmp_path) == []


def test_remove_entry_removes_a_link_never_its_target(tmp_path):
    target = tmp_path / "data"
    target.mkdir()
    (target / "keep.txt").write_text("keep")
    link = tmp_path / "link"
    link.symlink_to(target)
    remove_entry(link)
    assert not os.path.lexists(link) and (target / "keep.txt").read_text() == "keep"


def test_an_unsynced_write_still_lands_whole_or_not_at_all(tmp_path, monkeypatch):
    from yolo3.core import fileio
    synced = []
    monkeypatch.setattr(fileio, "fsync_file", lambda p: synced.append(p))
    monkeypatch.setattr(fileio, "fsync_dir", lambda p: synced.append(p))
    target = tmp_path / "entry.bin"
    fileio.atomic_write(target, lambda tmp: open(tmp, "wb").write(b"abc"), sync=False)
    assert target.read_bytes() == b"abc" and synced == []

    def fail(tmp):
        open(tmp, "wb").write(b"half")
        raise KeyboardInterrupt
    with pytest.raises(KeyboardInterrupt):
        fileio.atomic_write(target, fail, sync=False)
    assert target.read_bytes() == b"abc" and sorted(os.listdir(tmp_path)) == ["entry.bin"]
    fileio.atomic_write(target, lambda tmp: open(tmp, "wb").write(b"x"))
    assert len(synced) == 2
