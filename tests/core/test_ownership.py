"""The ownership rule (yolo3.core.ownership): a folder the user names as output is written only when
it is new, empty or yolo3's; another is refused unless exist_ok, and even then nothing yolo3 did not
write is replaced. Each case compares hashes of everything in the folder before and after."""
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
from yolo3.core.ownership import (
    MARKER,
    check_output_folder,
    claim,
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
    assert marker["names"] == ["model.pb", "variables"]
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
    assert "notes" in message and "readme.md" in message
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
    assert contents.ours == ("model.pb", "variables")
    assert contents.foreign == ("notes", "readme.md")


def test_exist_ok_never_replaces_a_users_entry_of_a_name_the_command_writes(tmp_path):
    out = user_folder(tmp_path)
    (out / "model.pb").write_text("the user's own graph")
    before = tree(out)
    with pytest.raises(SettingError, match="never replaces"):
        check_output_folder(out, "out_dir", exist_ok=True, writes=["model.pb", "variables"])
    # a name known only once written is refused before anything moves
    with pytest.raises(SettingError, match="model.pb"):
        write_output_folder(out, export_like, "out_dir", exist_ok=True)
    assert tree(out) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]


def test_writing_again_replaces_yolo3s_own_entries_a_folder_whole(tmp_path):
    out = tmp_path / "out"
    write_output_folder(out, export_like, "out_dir")
    (out / "variables" / "stale.data").write_text("from the first export")

    def second(folder: Path) -> None:
        (folder / "variables").mkdir()
        (folder / "variables" / "v.data").write_bytes(b"\x02")
        (folder / "model.pb").write_text("graph 2")
    write_output_folder(out, second, "out_dir")
    assert sorted(os.listdir(out / "variables")) == ["v.data"]
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
    assert tree(out) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]


def test_claimed_names_and_patterns_merge_and_count_as_yolo3s(tmp_path):
    out = tmp_path / "run"
    claim(out, names=["x.jpg"])
    claim(out, patterns=["resume-*"])
    for name in ("x.jpg", "resume-00001", "mine.txt"):
        (out / name).write_text("")
    contents = read_contents(out)
    assert contents.ours == ("resume-00001", "x.jpg") and contents.foreign == ("mine.txt",)
    assert contents.names == ("x.jpg",) and contents.patterns == ("resume-*",)


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
    (out / MARKER).write_text(json.dumps({"names": [], "patterns": []}))
    # with a marker, only what it claims is yolo3's
    assert read_contents(out, own_patterns=["final.*"]).foreign == ("final.keras", "history.csv")


def test_the_refusal_lists_a_few_entries_and_counts_the_rest(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    for k in range(12):
        (out / f"f{k:02d}.txt").write_text("")
    with pytest.raises(SettingError) as caught:
        check_output_folder(out, "--out")
    assert "12 entries" in str(caught.value) and "and 7 more" in str(caught.value)


def test_temporaries_are_not_the_users_entries(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    (out / f"{TEMP_PREFIX}host-1-x-abc").write_text("a killed writer's")
    assert read_contents(out).foreign == ()


def test_a_file_where_the_folder_should_be_is_refused(tmp_path):
    path = tmp_path / "out"
    path.write_text("a file")
    with pytest.raises(SettingError, match="must be a folder"):
        check_output_folder(path, "--out")


def test_claiming_a_folder_sweeps_what_a_killed_writer_left_in_it(tmp_path):
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
    claim(out, names=["dog.jpg"])
    assert sorted(os.listdir(out)) == [MARKER]
