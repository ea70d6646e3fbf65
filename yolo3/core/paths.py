"""Output paths checked before anything is written: the right kind (a folder where a folder is
written, a file where a file is), a parent that can be made, and never an input.

Every command calls these on its outputs before it creates or changes anything, so a refused run
leaves the disk as it was. Plain Python (no TensorFlow). Errors read ``PATH: reason``; ``flag`` is
the flag or setting that named the path (a :class:`~yolo3.core.errors.SettingError` lists it).
"""
from __future__ import annotations

import os
from typing import Iterable, Optional, Sequence, Tuple

from yolo3.core.errors import ArgumentError, PathLike, SettingError
from yolo3.core.manifest import is_bookkeeping

__all__ = ["check_output_dir", "check_output_file", "check_outputs", "refuse_overwriting_inputs",
           "same_or_inside", "user_cache_dir"]


def user_cache_dir() -> str:
    """yolo3's cache folder: ``$YOLO3_CACHE_DIR``, else ``$XDG_CACHE_HOME/yolo3``, else
    ``~/.cache/yolo3`` (what is cached there only saves time: deleting it is always safe)."""
    return os.environ.get("YOLO3_CACHE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache"),
        "yolo3")


def _blocking_ancestor(path: str) -> Optional[str]:
    """The nearest existing ancestor of ``path`` that is not a folder (nothing can be made under it)."""
    parent = os.path.dirname(os.path.abspath(path))
    while parent and not os.path.exists(parent):
        up = os.path.dirname(parent)
        if up == parent:
            return None
        parent = up
    return parent if parent and not os.path.isdir(parent) else None


def check_output_dir(path: PathLike, flag: str) -> str:
    """``path`` must be a folder or not exist yet (with a parent that can be made); returns it."""
    path = os.fspath(path)
    if os.path.exists(path) and not os.path.isdir(path):
        raise SettingError(f"{path}: {flag} must be a folder, and this is a file", flag)
    blocker = _blocking_ancestor(path)
    if blocker:
        raise SettingError(f"{path}: {flag} cannot be made: {blocker} is a file, not a folder", flag)
    return path


def check_output_file(path: PathLike, flag: str) -> str:
    """``path`` must be a file or not exist yet (its folder existing or makeable), and never an
    output folder's record (``.yolo3-output.json``, its journal, a temporary); returns it."""
    path = os.fspath(path)
    if os.path.isdir(path):
        raise SettingError(f"{path}: {flag} must be a file, and this is a folder", flag)
    if is_bookkeeping(os.path.basename(path)):
        raise SettingError(f"{path}: {flag} names yolo3's record of an output folder (which files "
                           "there are yolo3's): it is never replaced; choose another name", flag)
    blocker = _blocking_ancestor(path)
    if blocker:
        raise SettingError(f"{path}: {flag} cannot be written: {blocker} is a file, not a folder", flag)
    return path


def _real(path: PathLike) -> str:
    return os.path.normcase(os.path.realpath(os.fspath(path)))


def _within(a: str, b: str) -> bool:
    """Whether the resolved path ``a`` is the resolved path ``b`` or lies inside it."""
    return a == b or a.startswith(b.rstrip(os.sep) + os.sep)


def same_or_inside(inner: PathLike, outer: PathLike) -> bool:
    """True when ``inner`` is ``outer`` or lies inside it (links resolved)."""
    return _within(_real(inner), _real(outer))


def refuse_overwriting_inputs(outputs: Iterable[Tuple[str, Optional[PathLike]]],
                              inputs: Sequence[PathLike],
                              files: Iterable[Tuple[str, Optional[PathLike]]] = ()) -> None:
    """Refuse an output (``(flag, path)`` pairs; None is skipped) that is an input, contains one,
    or, an output folder, lies inside an input folder; ``files``: output files, refused when
    they are an input, or an existing file inside an input folder (a new one may go there).

    An output folder that holds an input (``detect --input photos --output photos``) could replace
    it with a written copy of the same name; an output file equal to an input would destroy it; an
    output folder inside an input folder (``annotations --out images/train/copy``) would be read
    as input the next time that folder is read. Each path is resolved once (an annotation file
    may list a hundred thousand images).
    """
    sources = [(os.fspath(p), _real(p), os.path.isdir(p)) for p in inputs if p is not None]
    for flag, out in files:
        if out is None:
            continue
        real, exists = _real(out), os.path.lexists(out)
        for source, real_source, is_dir in sources:
            if real_source == real:
                raise ArgumentError(f"{os.fspath(out)}: {flag} is the input {source}; "
                                    "choose an output that is not an input")
            if exists and is_dir and _within(real, real_source):
                raise ArgumentError(f"{os.fspath(out)}: {flag} is a file inside the input "
                                    f"folder {source}, which may be one of the files read; "
                                    "choose an output outside it, or a new file")
    for flag, out in outputs:
        if out is None:
            continue
        real = _real(out)
        for source, real_source, is_dir in sources:
            if _within(real_source, real):
                what = "is" if real_source == real else "contains"
                raise ArgumentError(f"{os.fspath(out)}: {flag} {what} the input {source}; "
                                    "choose an output that does not hold any input")
            if is_dir and _within(real, real_source):
                raise ArgumentError(f"{os.fspath(out)}: {flag} lies inside the input folder "
                                    f"{source}, where what it writes would be read as input; "
                                    "choose an output outside it")


def check_outputs(files: Sequence[Tuple[str, Optional[PathLike]]] = (),
                  inputs: Sequence[Optional[PathLike]] = (),
                  dirs: Sequence[Tuple[str, Optional[PathLike]]] = ()) -> None:
    """A command's outputs before it writes, the one check of them: each of ``files``
    (``(flag, path)``; None skipped) a file, each of ``dirs`` a folder, no file an input, and no
    folder an input, holding one or inside an input folder
    (:func:`refuse_overwriting_inputs`)."""
    for flag, path in files:
        if path is not None:
            check_output_file(path, flag)
    for flag, path in dirs:
        if path is not None:
            check_output_dir(path, flag)
    refuse_overwriting_inputs(list(dirs), [p for p in inputs if p is not None], files=files)
