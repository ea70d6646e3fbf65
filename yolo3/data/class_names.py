"""Class names, checked by one rule in every layout that carries them (classes files, data.yaml,
obj.data names files, COCO categories, model info), and classes files (one name per line, the
class id the line index: keras-yolo3's ``model_data/*_classes.txt``).

A class name is text (a number, as a YAML list may hold, is taken as its text), not empty or blank,
on one line, and no two are the same. Anything else (null, a list or mapping, a repeated name) is a
:class:`~yolo3.core.errors.FileFormatError` naming the file, the place and the entry, before any
work. No TensorFlow here.
"""
from __future__ import annotations

from typing import List, Optional, Sequence, Type

from yolo3.core.errors import FileFormatError, PathLike
from yolo3.core.fileio import read_text, write_text_atomic

_SHOWN = 60  # characters of a bad entry a message shows

__all__ = ["check_class_names", "shown_value", "parse_classes", "read_classes", "classes_text",
           "write_classes", "fits_classes_file"]


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


def parse_classes(text: str, path: Optional[PathLike] = None) -> List[str]:
    """Parse class-list text: one name per line (spaces around it dropped); blank lines only at
    the end; the names checked as every layout's are (:func:`check_class_names`:
    none empty, none repeated)."""
    lines = text.splitlines()
    while lines and not lines[-1].strip():
        lines.pop()
    if not lines:
        raise FileFormatError(path, "class list is empty")
    for line_no, raw in enumerate(lines, start=1):
        if not raw.strip():
            raise FileFormatError(path, "empty class name (blank line inside the class list)",
                                  line=line_no)
    return check_class_names([raw.strip() for raw in lines], path,
                             lines=list(range(1, len(lines) + 1)))


def read_classes(path: PathLike) -> List[str]:
    """Read a classes file (one name per line) into a list; the class id is the line index."""
    return parse_classes(read_text(path, "classes"), path)


def classes_text(names: Sequence[str], path: Optional[PathLike] = None) -> str:
    """The text of a classes file of ``names``, one per line; refuses (naming ``path``) what
    :func:`read_classes` would not read back identically: names that are empty, span lines,
    repeat, or begin or end with spaces."""
    names = check_class_names(list(names), path)
    padded = [n for n in names if n != n.strip()]
    if padded:
        raise FileFormatError(path, f"class name {padded[0]!r} begins or ends with spaces, which "
                                    "a classes file cannot keep (one name per line, read without "
                                    "the spaces around it)")
    return "".join(f"{n}\n" for n in names)


def write_classes(path: PathLike, names: Sequence[str]) -> None:
    """Write one class name per line (:func:`classes_text`: refused before writing what would
    not read back identically)."""
    write_text_atomic(path, classes_text(names, path))


def fits_classes_file(names: Sequence[str]) -> bool:
    """Whether :func:`write_classes` can write ``names`` (as they are) into a classes file."""
    return all(n == n.strip() for n in names)
