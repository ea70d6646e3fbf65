"""What a command may write into: the one rule by which nothing a user owns is lost.

A folder the user names as a command's output (``--output``, ``--out``, ``--save-txt``,
``--saved-model``, ``--openvino`` ...) is written only when it is new, empty, or holds nothing but
what yolo3 wrote there itself: the entries its marker file :data:`MARKER` lists (names, and name
patterns for writers such as training whose files are not known in advance). A folder holding
anything else is refused before any work (:class:`~yolo3.core.errors.SettingError` naming the
folder, the flag and some of the entries) unless ``exist_ok`` (``--exist-ok`` on the command line):
then those entries are kept, and only entries of the names the command writes are replaced.

A writer claims its entries in the marker before it creates them, so that an interrupted run
leaves only claimed entries (and its temporaries, swept by the next write:
:mod:`yolo3.core.fileio`).
:func:`write_output_folder` fills a whole folder (an exported model, a converted dataset) beside
its destination and moves it into place. No TensorFlow here.
"""
from __future__ import annotations

import fnmatch
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable, List, Sequence, Tuple

from yolo3.core.errors import PathLike, SettingError
from yolo3.core.fileio import (
    fsync_dir,
    fsync_tree,
    is_temporary,
    make_temporary_folder,
    remove_entry,
    remove_stale_temporaries,
    replace_entry,
    write_text_atomic,
)
from yolo3.core.paths import check_output_dir

MARKER = ".yolo3-output.json"
EXIST_OK = "exist_ok"  # the setting (``--exist-ok``) that lets a command write beside other files
_SHOWN = 5  # entries a refusal lists

__all__ = ["MARKER", "EXIST_OK", "FolderContents", "read_contents", "check_output_folder",
           "claim", "write_output_folder", "written_by_yolo3", "check_side_files",
           "YOLO3_SOFTWARE"]
YOLO3_SOFTWARE = "yolo3"  # the Software text of the PNG files yolo3 writes (yolo3.evaluation.visualize)


@dataclass(frozen=True)
class FolderContents:
    """What an output folder holds: ``names`` and ``patterns`` its marker claims, the entries
    that are yolo3's (``ours``: claimed, or matching the writer's own patterns where there is no
    marker) and the ``foreign`` ones (everything else but the marker and yolo3's temporaries)."""

    path: str
    exists: bool
    names: Tuple[str, ...] = ()
    patterns: Tuple[str, ...] = ()
    ours: Tuple[str, ...] = ()
    foreign: Tuple[str, ...] = ()


def _read_marker(folder: str) -> Tuple[List[str], List[str]]:
    """``(names, patterns)`` the marker of ``folder`` claims; empty when there is none (a marker
    that cannot be read claims nothing: its folder's entries count as the user's)."""
    try:
        with open(os.path.join(folder, MARKER), encoding="utf-8") as f:
            data = json.load(f)
    except (OSError, ValueError):
        return [], []
    if not isinstance(data, dict):
        return [], []
    names, patterns = data.get("names", []), data.get("patterns", [])
    if not (isinstance(names, list) and isinstance(patterns, list)):
        return [], []
    return ([n for n in names if isinstance(n, str)], [p for p in patterns if isinstance(p, str)])


def _matches(name: str, names: set, patterns: Sequence[str]) -> bool:
    return name in names or any(fnmatch.fnmatchcase(name, p) for p in patterns)


def read_contents(path: PathLike, own_patterns: Sequence[str] = ()) -> FolderContents:
    """The :class:`FolderContents` of ``path``. ``own_patterns``: name patterns of what the
    calling writer makes, counted as its own in a folder without a marker (training's run folders
    of yolo3 0.3 and earlier, which had none)."""
    path = os.fspath(path)
    if not os.path.isdir(path):
        return FolderContents(path, False)
    names, patterns = _read_marker(path)
    entries = sorted(e for e in os.listdir(path) if e != MARKER and not is_temporary(e))
    if not names and not patterns and not os.path.exists(os.path.join(path, MARKER)):
        patterns = list(own_patterns)
    claimed = set(names)
    ours = tuple(e for e in entries if _matches(e, claimed, patterns))
    foreign = tuple(e for e in entries if not _matches(e, claimed, patterns))
    return FolderContents(path, True, tuple(names), tuple(patterns), ours, foreign)


def _listed(entries: Sequence[str]) -> str:
    shown = ", ".join(entries[:_SHOWN])
    return shown + (f" and {len(entries) - _SHOWN} more" if len(entries) > _SHOWN else "")


def _refuse_foreign(contents: FolderContents, flag: str, exist_ok: bool,
                    writes: Sequence[str] = (), names: Iterable[str] = ()) -> None:
    """The rule: a folder holding entries yolo3 did not write is refused unless ``exist_ok``, and
    even then none of them is ever replaced: one named as the command writes is refused too."""
    if not contents.foreign:
        return
    path = contents.path
    count = len(contents.foreign)
    if not exist_ok:
        raise SettingError(
            f"{path}: {flag} holds {count} {'entry' if count == 1 else 'entries'} yolo3 did not "
            f"write ({_listed(contents.foreign)}); choose a new or empty folder, or give "
            f"{EXIST_OK} to write beside them (they are kept)", flag, EXIST_OK)
    exact = set(names)
    clashes = [e for e in contents.foreign if _matches(e, exact, writes)]
    if clashes:
        raise SettingError(
            f"{path}: {flag} holds {_listed(clashes)}, which yolo3 did not write and this command "
            f"would replace: yolo3 never replaces what it did not write, not even with "
            f"{EXIST_OK}; move {'it' if len(clashes) == 1 else 'them'} away or choose another "
            "folder", flag, EXIST_OK)


def check_output_folder(path: PathLike, flag: str, exist_ok: bool = False,
                        writes: Sequence[str] = (), own_patterns: Sequence[str] = ()
                        ) -> FolderContents:
    """Refuse, before any work, an output folder that is a file or cannot be made, one that holds
    entries yolo3 did not write unless ``exist_ok``, and, even with it, one whose entries yolo3 did
    not write include one of the names the command writes (``writes``: ``fnmatch`` patterns).
    Returns the folder's contents.

    ``flag`` is the flag or setting that named the folder; the refusal names it and
    :data:`EXIST_OK` as settings, so the command line words them as its flags."""
    path = check_output_dir(path, flag)
    contents = read_contents(path, own_patterns)
    _refuse_foreign(contents, flag, exist_ok, writes)
    return contents


def _unique(names: Iterable[str]) -> List[str]:
    return sorted(set(names))


def claim(path: PathLike, names: Iterable[str] = (), patterns: Iterable[str] = ()) -> None:
    """Record ``names`` (exact entry names) and ``patterns`` (``fnmatch`` patterns) as yolo3's in
    the marker of the folder ``path`` (made if needed), beside what it claims already, and sweep
    what killed writers left there (:func:`~yolo3.core.fileio.remove_stale_temporaries`): a
    writer that then writes many files with ``sweep=False`` starts from a clean folder. Call it
    before creating the entries."""
    os.makedirs(path, exist_ok=True)
    remove_stale_temporaries(path)
    old_names, old_patterns = _read_marker(os.fspath(path))
    new_names = _unique([*old_names, *names])
    new_patterns = _unique([*old_patterns, *patterns])
    if new_names == sorted(set(old_names)) and new_patterns == sorted(set(old_patterns)) and \
            os.path.exists(os.path.join(path, MARKER)):
        return
    _write_marker(path, new_names, new_patterns)


def _write_marker(path: PathLike, names: Sequence[str], patterns: Sequence[str]) -> None:
    text = json.dumps({"written_by": "yolo3", "names": list(names), "patterns": list(patterns),
                       "note": "what yolo3 wrote here: it replaces only these entries"},
                      indent=1, ensure_ascii=False)
    write_text_atomic(os.path.join(path, MARKER), text + "\n", sweep=False)


def _umask() -> int:
    try:
        with open("/proc/self/status", encoding="ascii") as f:
            for line in f:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def write_output_folder(path: PathLike, writer: Callable[[Path], None], flag: str,
                        exist_ok: bool = False, writes: Sequence[str] = ()) -> Path:
    """Call ``writer(tmp_folder)`` to fill a temporary folder beside ``path``, then put its
    entries in place under the ownership rule; returns ``path``.

    A new folder is renamed into place whole (a crash leaves none or all of it). An existing one
    (empty, yolo3's, or with ``exist_ok`` the user's) keeps its entries: the written entries are
    claimed in its marker, then each replaces yolo3's entry of its name (a folder whole). Nothing
    else in it is touched (not even entries an earlier yolo3 write left there); a written name
    that one of the user's entries has is refused before anything moves (``writes``: the names
    known in advance, refused before any work); a failure or an interrupt before the moves
    leaves the folder as it was."""
    path = Path(path)
    check_output_folder(path, flag, exist_ok, writes)
    path.parent.mkdir(parents=True, exist_ok=True)
    remove_stale_temporaries(path.parent)
    tmp = make_temporary_folder(path.parent, path.name)
    try:
        os.chmod(tmp, 0o777 & ~_umask())  # a temporary folder is private; the output is not
        writer(tmp)
        written = sorted(os.listdir(tmp))
        contents = read_contents(path)  # again: the folder may have changed during the work
        _refuse_foreign(contents, flag, exist_ok, names=written)
        if not contents.exists:
            _write_marker(tmp, written, [])
            fsync_tree(tmp)
            replace_entry(tmp, path)
            fsync_dir(path.parent)
            return path
        fsync_tree(tmp)
        claim(path, written)
        for name in written:
            replace_entry(tmp / name, path / name)  # a folder whole, never merged
        fsync_dir(path)
    finally:
        if tmp.exists():
            remove_entry(tmp)
    return path


def written_by_yolo3(path: PathLike) -> bool:
    """Whether the PNG file ``path`` says yolo3 wrote it (its ``Software`` text)."""
    try:
        from PIL import Image
        with Image.open(path) as image:
            return str(getattr(image, "text", {}).get("Software", "")).startswith(YOLO3_SOFTWARE)
    except Exception:  # noqa: BLE001 - anything unreadable is not known to be yolo3's
        return False


def check_side_files(paths: Sequence[PathLike], flag: str, instead: str) -> None:
    """Refuse, before any work, to write files the user did not name (plots beside a named
    output): each of ``paths`` must not exist, or be a PNG yolo3 wrote; ``instead`` says how to
    do without them."""
    for path in paths:
        if os.path.lexists(path) and not written_by_yolo3(path):
            raise SettingError(f"{os.fspath(path)}: yolo3 writes this file beside {flag}, and "
                               f"the one there is not yolo3's: yolo3 never replaces it; choose "
                               f"another {flag}, or {instead}", flag)
