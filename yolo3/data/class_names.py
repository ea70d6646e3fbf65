"""Class names, checked by one rule in every layout that carries them (classes files, data.yaml,
obj.data names files, COCO categories, model info).

A class name is text (a number, as a YAML list may hold, is taken as its text), not empty or blank,
on one line, and no two are the same. Anything else (null, a list or mapping, a repeated name) is a
:class:`~yolo3.core.errors.FileFormatError` naming the file, the place and the entry, before any work.
No TensorFlow here.
"""
from __future__ import annotations

from typing import List, Optional, Sequence, Type

from yolo3.core.errors import FileFormatError, PathLike

_SHOWN = 60  # characters of a bad entry a message shows

__all__ = ["check_class_names", "shown_value"]


def shown_value(value: object, limit: int = _SHOWN) -> str:
    """``repr(value)`` cut at ``limit`` characters (a YAML value can be megabytes long)."""
    text = repr(value)
    return text if len(text) <= limit else text[:limit] + "..."


def check_class_names(names: Sequence[object], path: Optional[PathLike], where: str = "names",
                      error: Type[FileFormatError] = FileFormatError,
                      lines: Optional[Sequence[int]] = None) -> List[str]:
    """``names`` as a list of strings, or ``error`` naming ``path`` (at ``lines[k]``, or ``where``)
    and the first entry that is not a class name: null, a list or mapping, a boolean, empty or
    blank text, text over several lines, or a name given twice."""
    out: List[str] = []
    seen = {}
    for k, name in enumerate(names):
        def refuse(reason: str) -> FileFormatError:
            if lines is not None:
                return error(path, reason, line=lines[k])
            return error(path, f"{where}: {reason}")
        if isinstance(name, bool) or name is None or not isinstance(name, (str, int, float)):
            kind = "null" if name is None else type(name).__name__
            raise refuse(f"class {k} is {shown_value(name)} ({kind}): a class name is text")
        text = name if isinstance(name, str) else str(name)
        if not text.strip():
            raise refuse(f"class {k} has an empty name")
        if len(text.splitlines()) != 1 or text.endswith(("\n", "\r")):
            raise refuse(f"class {k} name {shown_value(text)} spans several lines")
        if text in seen:
            first = f"line {lines[seen[text]]}" if lines is not None else f"class {seen[text]}"
            raise refuse(f"class name {shown_value(text)} repeats {first}")
        seen[text] = k
        out.append(text)
    return out
