"""Writing files so that a crash never leaves half of one: the one place that renames into place.

Everything yolo3 writes (models, weights, checkpoints, resume state, anchors and class lists,
history.csv, detection JSON, exported models, caches) is first written to a temporary name starting
with :data:`TEMP_PREFIX` in the destination's folder, flushed to disk (``fsync``), then renamed over
the destination, and the folder is flushed too. A crash, even SIGKILL, leaves the old file or the
new one. The temporaries a killed writer leaves behind are recognised by their prefix and removed by
:func:`remove_stale_temporaries`. No TensorFlow here.
"""
from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path
from typing import Callable

from yolo3.errors import PathLike

TEMP_PREFIX = ".tmp-"

__all__ = ["TEMP_PREFIX", "atomic_write", "atomic_directory", "write_text_atomic",
           "remove_stale_temporaries", "fsync_file", "fsync_dir"]


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


def _fsync_tree(folder: Path) -> None:
    for root, _, files in os.walk(folder):
        for name in files:
            fsync_file(os.path.join(root, name))
        fsync_dir(root)


def atomic_write(path: PathLike, writer: Callable[[str], None], suffix: str = "") -> Path:
    """Call ``writer(tmp_path)`` to create a temporary file beside ``path`` (its name ending in
    ``suffix``, for writers that check it), then flush it and rename it over ``path``. The temporary
    file is removed when ``writer`` fails; ``path`` is then untouched. Returns ``path``."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f"{TEMP_PREFIX}{path.name}-", suffix=suffix, dir=path.parent)
    os.close(fd)
    os.unlink(tmp)  # some writers (Keras) refuse to overwrite a file: let the writer create it
    try:
        writer(tmp)
        fsync_file(tmp)
        os.replace(tmp, path)
        fsync_dir(path.parent)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return path


def atomic_directory(path: PathLike, writer: Callable[[Path], None]) -> Path:
    """Call ``writer(tmp_folder)`` to fill a temporary folder beside ``path``, flush every file in
    it, then put it in place of ``path`` (an older folder there is removed first: between the two a
    crash leaves no folder, never a mixed one). Returns ``path``."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f"{TEMP_PREFIX}{path.name}-", dir=path.parent))
    try:
        writer(tmp)
        _fsync_tree(tmp)
        if path.is_dir():
            shutil.rmtree(path)
        os.replace(tmp, path)
        fsync_dir(path.parent)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    return path


def write_text_atomic(path: PathLike, text: str) -> Path:
    """Write UTF-8 ``text`` to ``path`` through a temporary file: never half-written."""
    def write(tmp: str) -> None:
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(text)
    return atomic_write(path, write, suffix=Path(path).suffix)


def remove_stale_temporaries(folder: PathLike) -> int:
    """Delete the temporary files and folders a killed writer left in ``folder``; returns how many.

    Call it only where no other process writes into ``folder`` at the same time.
    """
    removed = 0
    for path in Path(folder).glob(f"{TEMP_PREFIX}*"):
        if path.is_dir():
            shutil.rmtree(path, ignore_errors=True)
        else:
            path.unlink(missing_ok=True)
        removed += 1
    return removed
