"""The manifest of an output folder (yolo3.core.manifest): records against an independent hash,
the unchanged test's fast path and its fallback, the journal's replay, old markers."""
from __future__ import annotations

import hashlib
import json
import os

from yolo3.core.manifest import (
    JOURNAL,
    MARKER,
    FileRecord,
    classify,
    fingerprint,
    matches,
    read_manifest,
    unchanged,
    write_manifest,
)


def test_a_files_record_is_its_sha256_size_and_time(tmp_path):
    path = tmp_path / "a.bin"
    data = os.urandom(3 << 20)  # several read blocks
    path.write_bytes(data)
    record = fingerprint(path)
    assert record.sha256 == hashlib.sha256(data).hexdigest()
    assert record.size == len(data) and record.mtime_ns == path.stat().st_mtime_ns
    os.symlink(path, tmp_path / "link")
    assert fingerprint(tmp_path / "link") == FileRecord(link=str(path))


def test_unchanged_trusts_size_and_time_and_otherwise_compares_bytes(tmp_path):
    path = tmp_path / "a.txt"
    path.write_text("same")
    record = fingerprint(path)
    assert unchanged(path, os.lstat(path), [record])
    os.utime(path, ns=(record.mtime_ns + 10**9, record.mtime_ns + 10**9))
    assert unchanged(path, os.lstat(path), [record])  # touched: the bytes decide
    path.write_text("diff")  # same size, new bytes
    assert not unchanged(path, os.lstat(path), [record])
    path.write_text("longer now")
    assert not unchanged(path, os.lstat(path), [record])
    os.symlink("elsewhere", tmp_path / "l")
    assert not unchanged(tmp_path / "l", os.lstat(tmp_path / "l"), [record])


def test_the_manifest_and_its_journal_are_read_together_and_a_cut_line_is_skipped(tmp_path):
    (tmp_path / "a.txt").write_text("a")
    write_manifest(tmp_path, {"a.txt": fingerprint(tmp_path / "a.txt")}, ["logs/*"])
    (tmp_path / "b.txt").write_text("b")
    line = json.dumps({"path": "b.txt", **fingerprint(tmp_path / "b.txt").as_json()})
    (tmp_path / JOURNAL).write_text(line + "\n" + line[:20])  # the second line cut by a kill
    manifest = read_manifest(tmp_path)
    assert sorted(manifest.files) == ["a.txt", "b.txt"] and manifest.patterns == ["logs/*"]
    data = json.loads((tmp_path / MARKER).read_text())
    assert data["version"] == 2 and data["written_by"] == "yolo3"


def test_an_old_marker_claims_its_entries_names_literally(tmp_path):
    (tmp_path / MARKER).write_text(json.dumps({"names": ["x[1].jpg"], "patterns": ["resume-*"]}))
    legacy = read_manifest(tmp_path).legacy
    assert matches("x[1].jpg", legacy) and not matches("x1.jpg", legacy)
    assert matches("resume-00003", legacy)


def test_classify_sorts_every_depth_and_skips_bookkeeping(tmp_path):
    (tmp_path / "deep" / "er").mkdir(parents=True)
    (tmp_path / "deep" / "er" / "ours.txt").write_text("o")
    (tmp_path / "deep" / "er" / "theirs.txt").write_text("t")
    write_manifest(tmp_path, {"deep/er/ours.txt": fingerprint(tmp_path / "deep/er/ours.txt")}, [])
    (tmp_path / JOURNAL).write_text("")
    assert classify(str(tmp_path)) == (["deep/er/ours.txt"], ["deep/er/theirs.txt"])
