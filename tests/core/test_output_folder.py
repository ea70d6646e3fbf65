"""The ownership rule (yolo3.core.output_folder), file by file: only a file yolo3 wrote and that is
unchanged since is replaced or removed; a folder holding anything else, at any depth, is refused
unless exist_ok, and even then nothing of the user's is replaced. Each case compares hashes of
everything in the folder before and after."""
from __future__ import annotations

import hashlib
import json
import os
import stat
from pathlib import Path
from typing import Dict

import pytest

from yolo3.core.errors import SettingError
from yolo3.core.fileio import TEMP_PREFIX
from yolo3.core.output_folder import (
    JOURNAL,
    MARKER,
    OutputFolder,
    check_output_folder,
    read_contents,
    write_output_folder,
)


def tree(root: Path) -> Dict[str, str]:
    """Relative path -> SHA-256 (files) or '<dir>' of everything under ``root``, the marker and
    temporaries included."""
    out = {}
    for path in sorted(root.rglob("*")):
        key = str(path.relative_to(root))
        out[key] = "<dir>" if path.is_dir() else hashlib.sha256(path.read_bytes()).hexdigest()
    return out


def user_folder(tmp_path: Path) -> Path:
    folder = tmp_path / "out"
    (folder / "notes").mkdir(parents=True)
    (folder / "notes" / "a.txt").write_text("mine")
    (folder / "readme.md").write_text("my readme")
    return folder


def export_like(folder: Path) -> None:
    (folder / "variables").mkdir()
    (folder / "variables" / "v.data").write_bytes(b"\x00\x01")
    (folder / "model.pb").write_text("graph")


def test_a_new_folder_is_written_whole_with_its_marker_and_ordinary_permissions(tmp_path):
    out = tmp_path / "new" / "out"
    write_output_folder(out, export_like, "out_dir")
    assert sorted(os.listdir(out)) == sorted([MARKER, "model.pb", "variables"])
    marker = json.loads((out / MARKER).read_text())
    assert sorted(marker["files"]) == ["model.pb", "variables/v.data"]
    assert marker["files"]["model.pb"]["sha256"] == hashlib.sha256(b"graph").hexdigest()
    umask = os.umask(0)
    os.umask(umask)
    assert stat.S_IMODE(out.stat().st_mode) == 0o777 & ~umask  # not mkdtemp's private 0700
    assert not [p for p in (tmp_path / "new").iterdir() if p.name.startswith(TEMP_PREFIX)]


def test_an_empty_folder_is_written_and_kept(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    inode = out.stat().st_ino
    write_output_folder(out, export_like, "out_dir")
    assert out.stat().st_ino == inode and (out / "model.pb").read_text() == "graph"


def test_a_folder_holding_the_users_files_is_refused_naming_them_and_left_as_it_was(tmp_path):
    out = user_folder(tmp_path)
    before = tree(out)
    with pytest.raises(SettingError) as caught:
        write_output_folder(out, export_like, "out_dir")
    message = str(caught.value)
    assert str(out) in message and "out_dir" in message and "exist_ok" in message
    assert "notes/a.txt" in message and "readme.md" in message
    assert set(caught.value.settings) == {"out_dir", "exist_ok"}
    assert tree(out) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]  # no temporary left beside it


def test_exist_ok_writes_beside_the_users_files_and_keeps_them_byte_identical(tmp_path):
    out = user_folder(tmp_path)
    before = tree(out)
    write_output_folder(out, export_like, "out_dir", exist_ok=True)
    after = tree(out)
    assert {k: v for k, v in after.items() if k in before} == before
    assert {"model.pb", "variables", os.path.join("variables", "v.data"), MARKER} <= set(after)
    contents = read_contents(out)
    assert contents.ours == ("model.pb", "variables/v.data")
    assert contents.foreign == ("notes/a.txt", "readme.md")


def test_exist_ok_never_replaces_a_users_file_at_a_path_the_command_writes(tmp_path):
    out = user_folder(tmp_path)
    (out / "model.pb").write_text("the user's own graph")
    before = tree(out)
    with pytest.raises(SettingError, match="never replaces"):
        check_output_folder(out, "out_dir", exist_ok=True, writes=["model.pb", "variables/*"])
    # a path known only once written is refused before anything moves
    with pytest.raises(SettingError, match="model.pb"):
        write_output_folder(out, export_like, "out_dir", exist_ok=True)
    assert tree(out) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]


def test_a_users_file_deep_inside_yolo3s_folder_is_kept_when_the_folder_is_written_again(
        tmp_path):
    out = tmp_path / "out"
    write_output_folder(out, export_like, "out_dir")
    (out / "variables" / "mine.data").write_text("the user's, beside yolo3's")
    with pytest.raises(SettingError, match="variables/mine.data"):
        write_output_folder(out, export_like, "out_dir")

    def second(folder: Path) -> None:
        (folder / "variables").mkdir()
        (folder / "variables" / "w.data").write_bytes(b"\x02")
        (folder / "model.pb").write_text("graph 2")
    write_output_folder(out, second, "out_dir", exist_ok=True)
    assert sorted(os.listdir(out / "variables")) == ["mine.data", "w.data"]  # v.data: yolo3's, gone
    assert (out / "variables" / "mine.data").read_text() == "the user's, beside yolo3's"
    assert read_contents(out).foreign == ("variables/mine.data",)
    # and a user's file of the path yolo3 writes, at depth, is refused
    with pytest.raises(SettingError, match="never replaces"):
        check_output_folder(out, "out_dir", exist_ok=True, writes=["variables/*"])


def test_a_file_yolo3_wrote_and_the_user_changed_is_the_users(tmp_path):
    out = tmp_path / "out"
    write_output_folder(out, export_like, "out_dir")
    (out / "model.pb").write_text("edited by hand")
    before = tree(out)
    assert read_contents(out).foreign == ("model.pb",)
    with pytest.raises(SettingError, match="model.pb"):
        write_output_folder(out, export_like, "out_dir", exist_ok=True)
    assert tree(out) == before


def test_a_file_copied_back_unchanged_is_still_yolo3s(tmp_path):
    out = tmp_path / "out"
    write_output_folder(out, export_like, "out_dir")
    data = (out / "model.pb").read_bytes()
    (out / "model.pb").unlink()
    (out / "model.pb").write_bytes(data)  # a new modification time, the same bytes
    assert read_contents(out).foreign == ()


def test_writing_again_replaces_yolo3s_own_files_and_removes_its_stale_ones(tmp_path):
    out = tmp_path / "out"
    write_output_folder(out, export_like, "out_dir")

    def second(folder: Path) -> None:
        (folder / "variables").mkdir()
        (folder / "variables" / "w.data").write_bytes(b"\x02")
        (folder / "model.pb").write_text("graph 2")
    write_output_folder(out, second, "out_dir")
    assert sorted(os.listdir(out / "variables")) == ["w.data"]
    assert (out / "model.pb").read_text() == "graph 2"
    assert read_contents(out).foreign == ()


@pytest.mark.parametrize("failure", [RuntimeError("crash"), KeyboardInterrupt()])
def test_a_failed_or_interrupted_write_leaves_the_folder_as_it_was(tmp_path, failure):
    out = user_folder(tmp_path)
    before = tree(out)

    def failing(folder: Path) -> None:
        (folder / "model.pb").write_text("half")
        raise failure
    with pytest.raises(type(failure)):
        write_output_folder(out, failing, "out_dir", exist_ok=True)
    after = tree(out)
    assert {k: v for k, v in after.items() if k in before} == before
    assert not [p for p in out.rglob("*") if p.name.startswith(TEMP_PREFIX)]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]


def test_output_folder_writes_records_and_replaces_only_its_own_files(tmp_path):
    out = tmp_path / "run"
    with OutputFolder(out, "--output") as folder:
        folder.write_text("a/b/c.txt", "one")
        folder.write("top.bin", lambda tmp: Path(tmp).write_bytes(b"\x00"))
    assert read_contents(out).ours == ("a/b/c.txt", "top.bin")
    (out / "a" / "b" / "mine.txt").write_text("the user's")
    with pytest.raises(SettingError, match="a/b/mine.txt"):
        OutputFolder(out, "--output")
    with OutputFolder(out, "--output", exist_ok=True) as folder:
        folder.write_text("a/b/c.txt", "two")  # its own: replaced
        with pytest.raises(SettingError, match="never replaces"):
            folder.write_text("a/b/mine.txt", "yolo3's")
        assert folder.remove("top.bin") and not folder.remove("a/b/mine.txt")
        assert folder.remove_tree("a") == ["a/b/mine.txt"]
    assert (out / "a" / "b" / "mine.txt").read_text() == "the user's"
    assert not (out / "top.bin").exists() and not (out / "a" / "b" / "c.txt").exists()


def test_a_killed_writer_leaves_its_finished_files_recorded_in_the_journal(tmp_path):
    out = tmp_path / "run"
    folder = OutputFolder(out, "--output")
    folder.write_text("one.txt", "1")
    folder.write_text("deep/two.txt", "2")
    # no close(): as SIGKILL leaves it, the manifest lists nothing yet, the journal both files
    assert json.loads((out / MARKER).read_text())["files"] == {}
    assert len((out / JOURNAL).read_text().splitlines()) == 2
    assert read_contents(out).ours == ("deep/two.txt", "one.txt")
    OutputFolder(out, "--output").open().close()  # the next writer settles the journal
    assert sorted(json.loads((out / MARKER).read_text())["files"]) == ["deep/two.txt", "one.txt"]
    assert not (out / JOURNAL).exists()


def test_a_file_whose_rename_was_cut_off_keeps_its_old_version_yolo3s(tmp_path):
    out = tmp_path / "run"
    with OutputFolder(out, "--output") as folder:
        folder.write_text("state.json", "old")
    folder = OutputFolder(out, "--output")

    class Killed(Exception):
        pass
    with pytest.raises(Killed):
        with folder.writing("state.json") as tmp:
            Path(tmp).write_text("new")
            folder._record("state.json", __import__("yolo3.core.manifest").core.manifest
                           .fingerprint(tmp))  # journaled, then killed before the rename
            raise Killed()
    assert (out / "state.json").read_text() == "old"
    assert read_contents(out).foreign == ()


def test_library_written_files_are_owned_by_pattern(tmp_path):
    out = tmp_path / "run"
    with OutputFolder(out, "--output") as folder:
        folder.own_patterns(["logs/*/events.out.tfevents.*"])
    (out / "logs" / "train").mkdir(parents=True)
    (out / "logs" / "train" / "events.out.tfevents.1.host").write_bytes(b"tb")
    (out / "logs" / "train" / "notes.txt").write_text("mine")
    assert read_contents(out).foreign == ("logs/train/notes.txt",)


def test_a_subfolder_with_its_own_manifest_is_judged_by_it(tmp_path):
    out = tmp_path / "run"
    with OutputFolder(out, "--output") as folder:
        folder.write_text("history.csv", "epoch\n")
    with OutputFolder(out / ".worker-1", "--output") as worker:
        worker.write_text("history.csv", "epoch\n")
    (out / ".worker-1" / "mine.txt").write_text("the user's")
    contents = read_contents(out)
    assert contents.ours == (".worker-1/history.csv", "history.csv")
    assert contents.foreign == (".worker-1/mine.txt",)


def test_links_are_recorded_by_their_target_and_never_followed(tmp_path):
    target = tmp_path / "image.jpg"
    target.write_bytes(b"jpeg")

    def linked(folder: Path) -> None:
        (folder / "images").mkdir()
        os.symlink(target, folder / "images" / "a.jpg")
    out = tmp_path / "out"
    write_output_folder(out, linked, "out_dir")
    assert read_contents(out).ours == ("images/a.jpg",)
    write_output_folder(out, lambda folder: (folder / "x.txt").write_text("x"), "out_dir")
    assert target.read_bytes() == b"jpeg" and not (out / "images").exists()


def test_an_older_releases_marker_claims_every_file_under_its_entries(tmp_path):
    out = tmp_path / "run"
    (out / "resume-00001").mkdir(parents=True)
    (out / "resume-00001" / "model.weights.h5").write_bytes(b"w")
    (out / "final.keras").write_bytes(b"k")
    (out / "mine.txt").write_text("the user's")
    (out / MARKER).write_text(json.dumps({"names": ["final.keras"], "patterns": ["resume-*"]}))
    contents = read_contents(out)
    assert contents.ours == ("final.keras", "resume-00001/model.weights.h5")
    assert contents.foreign == ("mine.txt",)
    with OutputFolder(out, "--output", exist_ok=True) as folder:
        folder.open()  # recorded file by file, with hashes
    files = json.loads((out / MARKER).read_text())["files"]
    assert sorted(files) == ["final.keras", "resume-00001/model.weights.h5"]


def test_a_damaged_marker_claims_nothing(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    (out / "model.pb").write_text("graph")
    (out / MARKER).write_text("{not json")
    assert read_contents(out).foreign == ("model.pb",)
    with pytest.raises(SettingError):
        check_output_folder(out, "out_dir")


def test_own_patterns_recognise_an_older_releases_folder_without_a_marker(tmp_path):
    out = tmp_path / "run"
    out.mkdir()
    (out / "final.keras").write_text("")
    (out / "history.csv").write_text("")
    assert read_contents(out, own_patterns=["final.*", "history.csv"]).foreign == ()
    check_output_folder(out, "output_dir", own_patterns=["final.*", "history.csv"])
    (out / MARKER).write_text(json.dumps({"version": 2, "files": {}, "patterns": []}))
    # with a manifest, only what it lists is yolo3's
    assert read_contents(out, own_patterns=["final.*"]).foreign == ("final.keras", "history.csv")


def test_the_refusal_lists_a_few_files_and_counts_the_rest(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    for k in range(12):
        (out / f"f{k:02d}.txt").write_text("")
    with pytest.raises(SettingError) as caught:
        check_output_folder(out, "--out")
    assert "12 files" in str(caught.value) and "and 7 more" in str(caught.value)


def test_temporaries_are_not_the_users_files(tmp_path):
    out = tmp_path / "out"
    (out / "deep").mkdir(parents=True)
    (out / f"{TEMP_PREFIX}host-1-x-abc").write_text("a killed writer's")
    (out / "deep" / f"{TEMP_PREFIX}host-1-y-abc").write_text("a killed writer's")
    assert read_contents(out).foreign == ()


def test_a_file_where_the_folder_should_be_is_refused(tmp_path):
    path = tmp_path / "out"
    path.write_text("a file")
    with pytest.raises(SettingError, match="must be a folder"):
        check_output_folder(path, "--out")
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "images").write_text("a file where a folder goes")
    with OutputFolder(tmp_path / "run", "--out", exist_ok=True) as folder:
        with pytest.raises(SettingError, match="needs a folder"):
            folder.write_text("images/a.txt", "x")


def test_opening_a_folder_sweeps_what_a_killed_writer_left_in_it(tmp_path):
    import subprocess
    import sys

    from yolo3.core.fileio import temporary_owner, temporary_prefix
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    host, _ = temporary_owner(temporary_prefix("x"))
    out = tmp_path / "drawn"
    out.mkdir()
    stale = out / f"{TEMP_PREFIX}{host}-{child.pid}-dog.jpg-abc.jpg"  # a killed detect's image
    stale.write_bytes(b"half")
    OutputFolder(out, "--output").open().close()
    assert sorted(os.listdir(out)) == [MARKER]
