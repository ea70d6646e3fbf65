"""The manifest of an output folder: what yolo3 wrote there, file by file, and what a folder
holds by it.

``.yolo3-output.json`` (:data:`MARKER`) lists each file yolo3 wrote, at any depth (paths relative
to the folder, ``/`` separated), with its SHA-256, size and modification time (a symbolic link:
its target), and the patterns of files another library writes as it goes (TensorBoard's event
files). ``.yolo3-output.journal`` (:data:`JOURNAL`) holds one JSON line per file finished since
the manifest was last written: a path may then have two versions, the manifest's and the
journal's, and either is yolo3's. Markers of yolo3 0.4 and earlier (``names`` and ``patterns`` of
top-level entries, no hashes) are read as claiming every file under those entries.

:func:`classify` sorts a folder's files into yolo3's (listed and unchanged) and the user's (all
else); the rule built on it is :mod:`yolo3.core.output_folder`'s. No TensorFlow here.
"""
from __future__ import annotations

import fnmatch
import glob
import hashlib
import json
import os
import stat
from dataclasses import dataclass, field
from typing import Dict, Iterable, Iterator, List, Optional, Sequence, Tuple

from yolo3.core.errors import PathLike
from yolo3.core.fileio import LEGACY_TEMP_PREFIX, TEMP_PREFIX, write_text_atomic

MARKER = ".yolo3-output.json"  # the manifest: every file yolo3 wrote in the folder
JOURNAL = ".yolo3-output.journal"  # files finished since the manifest was last written
MANIFEST_VERSION = 2
_CHUNK = 1 << 20

__all__ = ["MARKER", "JOURNAL", "MANIFEST_VERSION", "FileRecord", "Manifest", "FolderContents",
           "fingerprint", "unchanged", "read_manifest", "write_manifest", "matches",
           "is_bookkeeping", "classify", "read_contents"]


# ------------------------------------------------------------------------------ file records


@dataclass(frozen=True)
class FileRecord:
    """What yolo3 wrote at one path: a file's ``sha256``, ``size`` and ``mtime_ns``, or a
    symbolic link's target (``link``)."""

    sha256: str = ""
    size: int = -1
    mtime_ns: int = -1
    link: Optional[str] = None

    def as_json(self) -> dict:
        if self.link is not None:
            return {"link": self.link}
        return {"sha256": self.sha256, "size": self.size, "mtime_ns": self.mtime_ns}

    @staticmethod
    def from_json(data: object) -> Optional["FileRecord"]:
        if not isinstance(data, dict):
            return None
        if isinstance(data.get("link"), str):
            return FileRecord(link=data["link"])
        sha, size, mtime = data.get("sha256"), data.get("size"), data.get("mtime_ns")
        if isinstance(sha, str) and isinstance(size, int) and isinstance(mtime, int):
            return FileRecord(sha, size, mtime)
        return None


def _sha256(path: PathLike) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(_CHUNK), b""):
            digest.update(block)
    return digest.hexdigest()


def fingerprint(path: PathLike) -> FileRecord:
    """The :class:`FileRecord` of the file or link ``path`` as it is now."""
    st = os.lstat(path)
    if stat.S_ISLNK(st.st_mode):
        return FileRecord(link=os.readlink(path))
    return FileRecord(_sha256(path), st.st_size, st.st_mtime_ns)


def unchanged(path: PathLike, st: os.stat_result, versions: Sequence[FileRecord]) -> bool:
    """Whether the entry ``path`` (``st``: its ``lstat``) is one of ``versions``: a link with the
    recorded target, or a regular file of the recorded size whose modification time or, failing
    that, bytes are the recorded ones."""
    if stat.S_ISLNK(st.st_mode):
        target = os.readlink(path)
        return any(v.link == target for v in versions)
    if not stat.S_ISREG(st.st_mode):
        return False
    sized = [v for v in versions if v.link is None and v.size == st.st_size]
    if any(v.mtime_ns == st.st_mtime_ns for v in sized):
        return True
    if not sized:
        return False
    try:
        digest = _sha256(path)
    except OSError:
        return False
    return any(v.sha256 == digest for v in sized)


# --------------------------------------------------------------------------------- manifests


@dataclass
class Manifest:
    """A folder's manifest as read: the versions each path may have (the manifest's and the
    journal's), the patterns of library-written files, and the top-level entries an old marker
    claims (``legacy``: fnmatch patterns)."""

    files: Dict[str, List[FileRecord]] = field(default_factory=dict)
    patterns: List[str] = field(default_factory=list)
    legacy: List[str] = field(default_factory=list)
    exists: bool = False

    def claims(self, rel: str, path: PathLike, st: os.stat_result) -> bool:
        """Whether the entry ``rel`` (at ``path``; ``st``: its ``lstat``) is yolo3's: recorded
        and unchanged, a library's file by pattern, or under an entry an old marker claims."""
        versions = self.files.get(rel)
        return bool(versions and unchanged(path, st, versions)) or \
            matches(rel, self.patterns) or matches(rel.split("/", 1)[0], self.legacy)

    def settled(self, folder: PathLike) -> Dict[str, FileRecord]:
        """The one version of each recorded file of ``folder`` that is there now (the last, or
        an earlier one a cut-off rename left); files gone or changed are left out."""
        out: Dict[str, FileRecord] = {}
        for rel, versions in self.files.items():
            full = os.path.join(folder, rel)
            try:
                st = os.lstat(full)
            except OSError:
                continue
            if unchanged(full, st, versions[-1:]):
                out[rel] = versions[-1]
            elif len(versions) > 1 and unchanged(full, st, versions):
                out[rel] = fingerprint(full)
        return out


def read_manifest(folder: PathLike, own_patterns: Sequence[str] = ()) -> Manifest:
    """The manifest of ``folder`` with its journal replayed. A manifest that cannot be read claims
    nothing (its folder's files count as the user's); a folder without one, nothing but
    ``own_patterns`` (run folders of yolo3 0.3 and earlier)."""
    folder = os.fspath(folder)
    manifest = Manifest()
    path = os.path.join(folder, MARKER)
    if not os.path.lexists(path):
        # an old run folder's own temporaries (ownerless .tmp-*) are its writer's too
        manifest.legacy = [*own_patterns, f"{LEGACY_TEMP_PREFIX}*"] if own_patterns else []
        return manifest
    manifest.exists = True
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except (OSError, ValueError):
        return manifest
    if not isinstance(data, dict):
        return manifest
    if data.get("version") == MANIFEST_VERSION:
        files = data.get("files", {})
        if isinstance(files, dict):
            for rel, entry in files.items():
                record = FileRecord.from_json(entry)
                if isinstance(rel, str) and record is not None:
                    manifest.files[rel] = [record]
        patterns = data.get("patterns", [])
    else:  # yolo3 0.4 and earlier: top-level names (exact) and patterns
        names, patterns = data.get("names", []), data.get("patterns", [])
        if isinstance(names, list):
            manifest.legacy += [glob.escape(n) for n in names if isinstance(n, str)]
        if isinstance(patterns, list):
            manifest.legacy += [p for p in patterns if isinstance(p, str)]
        patterns = []
    if isinstance(patterns, list):
        manifest.patterns = [p for p in patterns if isinstance(p, str)]
    for rel, record in _read_journal(folder):
        manifest.files.setdefault(rel, []).append(record)
    return manifest


def _read_journal(folder: str) -> Iterator[Tuple[str, FileRecord]]:
    try:
        with open(os.path.join(folder, JOURNAL), encoding="utf-8") as f:
            lines = f.read().splitlines()
    except (OSError, UnicodeDecodeError):
        return
    for line in lines:
        try:
            data = json.loads(line)
        except ValueError:
            continue  # a line cut by a kill
        record = FileRecord.from_json(data)
        if isinstance(data, dict) and isinstance(data.get("path"), str) and record is not None:
            yield data["path"], record


def matches(rel: str, patterns: Iterable[str]) -> bool:
    return any(fnmatch.fnmatchcase(rel, p) for p in patterns)


def write_manifest(folder: PathLike, files: Dict[str, FileRecord], patterns: Sequence[str]
                    ) -> None:
    data = {"written_by": "yolo3", "version": MANIFEST_VERSION,
            "note": "every file yolo3 wrote here, with its hash: yolo3 replaces or removes only "
                    "these, and only while they are unchanged",
            "patterns": sorted(set(patterns)),
            "files": {rel: files[rel].as_json() for rel in sorted(files)}}
    write_text_atomic(os.path.join(folder, MARKER), json.dumps(data, indent=0,
                                                              ensure_ascii=False) + "\n",
                      sweep=False)


# ------------------------------------------------------------------------------------ walking


def is_bookkeeping(name: str) -> bool:
    """Whether ``name`` is the manifest, its journal or a temporary of yolo3's (none of them a
    file of the folder's)."""
    return name in (MARKER, JOURNAL) or name.startswith(TEMP_PREFIX)


@dataclass(frozen=True)
class FolderContents:
    """What an output folder holds, as paths relative to it (``/`` separated), at any depth:
    ``ours`` (files yolo3 wrote and that are unchanged since) and ``foreign`` (every other file,
    link or special entry: the user's). ``path``: the folder; ``exists``: whether it does."""

    path: str
    exists: bool
    ours: Tuple[str, ...] = ()
    foreign: Tuple[str, ...] = ()


def classify(root: str, own_patterns: Sequence[str] = ()) -> Tuple[List[str], List[str]]:
    """``(ours, foreign)`` relative paths under ``root`` (subfolders with a manifest of their own
    judged by it)."""
    manifest = read_manifest(root, own_patterns)
    ours: List[str] = []
    foreign: List[str] = []

    def visit(folder: str, prefix: str) -> None:
        try:
            entries = sorted(os.scandir(folder), key=lambda e: e.name)
        except OSError:
            return
        for entry in entries:
            if is_bookkeeping(entry.name):
                continue
            rel = prefix + entry.name
            if entry.is_dir(follow_symlinks=False):
                if os.path.lexists(os.path.join(entry.path, MARKER)):
                    inner_ours, inner_foreign = classify(entry.path)
                    ours.extend(rel + "/" + r for r in inner_ours)
                    foreign.extend(rel + "/" + r for r in inner_foreign)
                else:
                    visit(entry.path, rel + "/")
                continue
            try:
                st = entry.stat(follow_symlinks=False)
            except OSError:
                continue
            (ours if manifest.claims(rel, entry.path, st) else foreign).append(rel)
    visit(root, "")
    return ours, foreign


def read_contents(path: PathLike, own_patterns: Sequence[str] = ()) -> FolderContents:
    """The :class:`FolderContents` of ``path``. ``own_patterns``: patterns of the top-level
    entries the calling writer makes, counted as yolo3's in a folder without a manifest (the run
    folders of yolo3 0.3 and earlier, which had none)."""
    path = os.fspath(path)
    if not os.path.isdir(path):
        return FolderContents(path, False)
    ours, foreign = classify(path, own_patterns)
    return FolderContents(path, True, tuple(ours), tuple(foreign))
