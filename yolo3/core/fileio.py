"""Writing files so that a crash never leaves half of one: the one place that renames into place.

Everything yolo3 writes (models, weights, checkpoints, resume state, anchors and class lists,
history.csv, detection JSON, exported models, caches) is first written to a temporary name in the
destination's folder, flushed to disk (``fsync``), then renamed over the destination, and the
folder is flushed too. A crash, even SIGKILL, leaves the old file or the new one.

A temporary's name says who made it: ``.yolo3-tmp-<host>-<pid>-<name>-<random>``
(:func:`temporary_owner` reads it back). What a killed writer left behind is swept by the next
write into the same folder (:func:`remove_stale_temporaries`): only yolo3's own temporaries whose
process, on this host, is gone; never a live writer's, never a file yolo3 did not name.
Which folders a command may write into at all is :mod:`yolo3.core.output_folder`'s rule. Small text
files a user gives (anchors, class lists) are read by :func:`read_text`. No TensorFlow here.
"""
from __future__ import annotations

import contextlib
import csv
import errno
import io
import json
import os
import re
import secrets
import shutil
import socket
from pathlib import Path
from typing import Any, Callable, Dict, Iterator, List, Optional, Tuple

from yolo3.core.errors import FileFormatError, PathLike

TEMP_PREFIX = ".yolo3-tmp-"
LEGACY_TEMP_PREFIX = ".tmp-"  # the temporaries of yolo3 0.3 and earlier (no owner in the name)
_OWNER = re.compile(r"^\.yolo3-tmp-(?P<host>[A-Za-z0-9]*)-(?P<pid>\d+)-")

__all__ = ["TEMP_PREFIX", "LEGACY_TEMP_PREFIX", "atomic_file", "atomic_write", "atomic_directory",
           "write_text_atomic", "remove_stale_temporaries", "temporary_prefix", "temporary_owner",
           "is_temporary", "make_temporary_folder", "temporary_folder", "fsync_file", "fsync_dir",
           "fsync_tree", "remove_entry", "replace_entry", "read_text"]


def _host() -> str:
    """This machine's name, letters and digits only (at most 16), as temporaries carry it."""
    return re.sub(r"[^A-Za-z0-9]", "", socket.gethostname())[:16]


def temporary_prefix(name: str) -> str:
    """The prefix of this process's temporaries for the destination ``name``."""
    return f"{TEMP_PREFIX}{_host()}-{os.getpid()}-{name}-"


def temporary_owner(name: str) -> Optional[Tuple[str, int]]:
    """``(host, pid)`` of the process that made the temporary ``name``; None when ``name`` is not
    one of yolo3's temporaries."""
    match = _OWNER.match(name)
    return None if match is None else (match["host"], int(match["pid"]))


def is_temporary(name: str) -> bool:
    """Whether the folder entry ``name`` is one of yolo3's temporaries (this release's or older)."""
    return name.startswith((TEMP_PREFIX, LEGACY_TEMP_PREFIX))


def _alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OSError):
        return True  # another user's process, or no way to tell: keep its file
    return True


def read_text(path: PathLike, what: str) -> str:
    """The UTF-8 text (a byte-order mark dropped) of a small file the user gave; one that cannot
    be read is a FileFormatError naming it and ``what`` it is."""
    try:
        with open(path, encoding="utf-8-sig") as f:
            return f.read()
    except OSError as e:
        raise FileFormatError(path, f"cannot read {what} file: {e.strerror or e}") from None
    except UnicodeDecodeError:
        raise FileFormatError(path, f"{what} file is not UTF-8 text") from None


def read_json(path: PathLike, what: str) -> Any:
    """The JSON value of a file (a byte-order mark dropped): the one reader of the JSON files
    yolo3 writes and reads back (a run's ``run.json``, an evaluation, resume state); a file
    that cannot be read, is not UTF-8 or is not whole JSON is a FileFormatError naming it,
    ``what`` it is, and the line."""
    text = read_text(path, what)
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise FileFormatError(path, f"{what} file is not valid JSON ({e.msg}): cut short or "
                                    "damaged", line=e.lineno) from None


def read_csv_rows(path: PathLike, what: str) -> Tuple[List[str], List[Dict[str, str]]]:
    """``(field names, rows)`` of a CSV file yolo3 wrote (a run's ``history.csv``); one that
    cannot be read or is not UTF-8 text is a FileFormatError naming it and ``what`` it is."""
    text = read_text(path, what)
    if "\0" in text:
        raise FileFormatError(path, f"{what} file holds NUL bytes: not text, damaged")
    try:
        reader = csv.DictReader(io.StringIO(text, newline=""))
        return list(reader.fieldnames or []), list(reader)
    except csv.Error as e:
        raise FileFormatError(path, f"{what} file is not CSV: {e}") from None


def fsync_file(path: PathLike) -> None:
    """Flush the file ``path`` to disk."""
    with open(path, "rb") as f:
        os.fsync(f.fileno())


def fsync_dir(path: PathLike) -> None:
    """Flush the folder ``path`` (its entries: a rename in it) to disk, where the system allows."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def fsync_tree(folder: PathLike) -> None:
    """Flush every file under ``folder``, and the folders themselves, to disk."""
    for root, _, files in os.walk(folder):
        for name in files:
            fsync_file(os.path.join(root, name))
        fsync_dir(root)


def _named(e: OSError, temporary: Optional[str], path: PathLike) -> OSError:
    """``e`` naming ``path`` where it names the temporary written for it (or nothing): a user
    reads the path they asked for, never ``.yolo3-tmp-...``."""
    if e.filename is None:
        return e
    name = os.fspath(e.filename)
    if (temporary is not None and name.startswith(temporary)) or \
            is_temporary(os.path.basename(name)):
        return type(e)(e.errno, e.strerror, os.fspath(path))
    return e


def remove_entry(path: PathLike) -> None:
    """Delete the file, link or folder ``path`` (a link is removed, never what it points to)."""
    path = Path(path)
    if path.is_symlink() or not path.is_dir():
        path.unlink(missing_ok=True)
    else:
        shutil.rmtree(path)


def replace_entry(source: PathLike, target: PathLike) -> None:
    """Rename the file or folder ``source`` to ``target``, replacing what is there (a folder
    whole, never merged: it is removed first, so a crash between the two leaves none)."""
    source, target = Path(source), Path(target)
    if os.path.lexists(target) and (source.is_dir() or (target.is_dir() and
                                                        not target.is_symlink())):
        remove_entry(target)
    os.replace(source, target)


@contextlib.contextmanager
def atomic_file(path: PathLike, suffix: str = "", sweep: bool = True,
                before_replace: Optional[Callable[[str], None]] = None,
                sync: bool = True) -> Iterator[str]:
    """A temporary file name beside ``path`` (ending in ``suffix``, for writers that check it;
    not created: some writers, Keras's, refuse to overwrite a file) for the ``with`` body to
    write; on a normal exit it is flushed, ``before_replace(tmp)`` is called (an owner records
    the finished file: :class:`yolo3.core.output_folder.OutputFolder`), and it is renamed over
    ``path``. On an exception (an interrupt included) the temporary file is removed and ``path``
    is untouched. ``sweep``: first remove what killed writers left in the folder (callers writing
    thousands of files into a folder they swept once pass False). ``sync`` False: no flush to
    the disk (a cache whose entries check themselves, where a lost entry only costs time)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    if sweep:
        remove_stale_temporaries(path.parent)
    # the name is free, never created here (the writer creates it), and known before anything
    # can be interrupted: the ``finally`` below removes whatever an interrupt left at it
    tmp = _free_temporary_name(path.parent, path.name, suffix)
    try:
        yield tmp
        if sync:
            fsync_file(tmp)
        if before_replace is not None:
            before_replace(tmp)
        os.replace(tmp, path)
        if sync:
            fsync_dir(path.parent)
    except OSError as e:
        raise _named(e, tmp, path) from None
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def atomic_write(path: PathLike, writer: Callable[[str], None], suffix: str = "",
                 sweep: bool = True, before_replace: Optional[Callable[[str], None]] = None,
                 sync: bool = True) -> Path:
    """Call ``writer(tmp_path)`` to create a temporary file beside ``path``, then flush it and
    rename it over ``path`` (:func:`atomic_file`: ``suffix``, ``sweep``, ``before_replace`` and
    ``sync`` as there). When ``writer`` fails (an interrupt included) ``path`` is untouched. Returns
    ``path``."""
    with atomic_file(path, suffix, sweep, before_replace, sync) as tmp:
        writer(tmp)
    return Path(path)


def _free_temporary_name(parent: PathLike, name: str, suffix: str = "") -> str:
    """A path in ``parent`` named as this process's temporary for ``name`` that nothing holds
    now (the random part never repeats within a process in practice; checked all the same)."""
    for _ in range(100):
        candidate = os.path.join(os.fspath(parent),
                                 f"{temporary_prefix(name)}{secrets.token_hex(6)}{suffix}")
        if not os.path.lexists(candidate):
            return candidate
    raise FileExistsError(errno.EEXIST, "no free temporary name", os.fspath(parent))


def make_temporary_folder(parent: PathLike, name: str) -> Path:
    """A new empty temporary folder in ``parent`` for the destination ``name`` (swept by
    :func:`remove_stale_temporaries` once this process is gone). A folder that cannot be made is
    an OSError naming ``parent/name``. The caller removes it: where an interrupt must leave
    nothing, use :func:`temporary_folder`."""
    with temporary_folder(parent, name, keep=True) as tmp:
        return tmp


@contextlib.contextmanager
def temporary_folder(parent: PathLike, name: str, keep: bool = False) -> Iterator[Path]:
    """A new empty temporary folder in ``parent`` for the destination ``name``, removed on leaving
    when it is still there (not moved into place), an interrupt included: its path is known
    before the folder is made, so no moment leaves a folder nobody removes (``tempfile.mkdtemp``
    has one: between making the folder and returning its name). ``keep``: leave it on a normal
    exit. A folder that cannot be made is an OSError naming ``parent/name``."""
    tmp: Optional[Path] = None
    try:
        while tmp is None:
            tmp = Path(_free_temporary_name(parent, name))  # named before it exists
            try:
                os.mkdir(tmp, 0o700)
            except FileExistsError:  # made meanwhile, by this process (its name says so)
                tmp = None
            except OSError as e:
                raise _named(e, None, Path(parent) / name) from None
        yield tmp
    except BaseException:
        keep = False
        raise
    finally:
        if tmp is not None and not keep and os.path.lexists(tmp):
            remove_entry(tmp)


def atomic_directory(path: PathLike, writer: Callable[[Path], None]) -> Path:
    """Call ``writer(tmp_folder)`` to fill a temporary folder beside ``path``, flush every file in
    it, then put it in place of ``path`` (an older folder there is removed first: between the two a
    crash leaves no folder, never a mixed one). Returns ``path``.

    Only for folders yolo3 names and owns whole (a run's ``resume-<epoch>/``, the engine cache):
    a folder the user names is written by :func:`yolo3.core.output_folder.write_output_folder`, which
    never removes what it did not write.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    remove_stale_temporaries(path.parent)
    with temporary_folder(path.parent, path.name) as tmp:
        writer(tmp)
        fsync_tree(tmp)
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path)
        os.replace(tmp, path)
        fsync_dir(path.parent)
    return path


def write_text_atomic(path: PathLike, text: str, sweep: bool = True) -> Path:
    """Write UTF-8 ``text`` to ``path`` through a temporary file: never half-written."""
    def write(tmp: str) -> None:
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(text)
    return atomic_write(path, write, suffix=Path(path).suffix, sweep=sweep)


def remove_stale_temporaries(folder: PathLike, legacy: bool = False) -> int:
    """Delete the temporaries killed yolo3 writers left in ``folder``; returns how many.

    Only entries named as yolo3's temporaries (:data:`TEMP_PREFIX`) whose process, on this host,
    no longer runs: a live writer's temporary and anything else in the folder are left alone.
    ``legacy``: also the ownerless ``.tmp-*`` names of yolo3 0.3 and earlier (only in a folder
    that yolo3 owns whole, such as a run folder, and where no other process writes).
    """
    removed = 0
    host = _host()
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return 0
    for entry in entries:
        owner = temporary_owner(entry.name)
        stale = (owner is not None and owner[0] == host and not _alive(owner[1])) or (
            legacy and entry.name.startswith(LEGACY_TEMP_PREFIX))
        if not stale:
            continue
        try:
            remove_entry(entry.path)
            removed += 1
        except OSError:
            pass
    return removed
