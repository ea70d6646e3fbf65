"""Error types. Every problem with a user's file is reported with the file, the place and the reason."""
from __future__ import annotations

import os
import re
from typing import Callable, Iterable, Optional, Tuple, Union

PathLike = Union[str, os.PathLike]


class Yolo3Error(Exception):
    """Base class of the errors yolo3 raises on purpose."""

    def __str__(self) -> str:
        """The message alone: what else a caller passed never turns it into a tuple."""
        return str(self.args[0]) if self.args else ""


class FileFormatError(Yolo3Error, ValueError):
    """A user's file is malformed.

    The message reads ``PATH:LINE: REASON`` (or ``PATH (WHERE): REASON`` when the place is not a line,
    e.g. an XML file inside a VOC folder or a JSON object), so that editors and people can jump to it.
    """

    def __init__(self, path: Optional[PathLike], reason: str, line: Optional[int] = None,
                 where: Optional[str] = None):
        self.path = None if path is None else os.fspath(path)
        self.reason = reason
        self.line = line
        self.where = where
        place = self.path if self.path is not None else "<input>"
        if line is not None:
            place = f"{place}:{line}"
        if where:
            place = f"{place} ({where})"
        super().__init__(f"{place}: {reason}")

    def __reduce__(self):  # rebuilt whole in another process (a data worker's error)
        return type(self), (self.path, self.reason, self.line, self.where)


class AnnotationError(FileFormatError):
    """A malformed annotation (text rows, Pascal VOC XML, COCO JSON) or a missing/unreadable image."""


class DarknetError(FileFormatError):
    """A Darknet cfg or weights file that cannot be read, or that does not fit its cfg."""


class ArgumentError(Yolo3Error, ValueError):
    """An argument value that cannot work (an unknown choice, a size the model cannot take ...)."""


class SettingError(ArgumentError):
    """A setting whose value cannot work. The message names settings as the library knows them
    (``batch_size``, ``freeze_epochs``); ``settings`` lists them, so that a front end can word them
    its own way (:meth:`worded`: the command line says ``--batch-size``)."""

    def __init__(self, message: str, *settings: str):
        super().__init__(message)
        self.settings: Tuple[str, ...] = settings

    def worded(self, name_of: Callable[[str], Optional[str]]) -> str:
        """The message with each setting replaced by ``name_of(setting)`` (kept where it is None)."""
        return word_settings(str(self), self.settings, name_of)


def word_settings(message: str, settings: Iterable[str],
                  name_of: Callable[[str], Optional[str]]) -> str:
    """``message`` with each of ``settings`` replaced by ``name_of(setting)`` where that is not
    None: the one rule by which a front end words the library's setting names its own way."""
    for setting in sorted(settings, key=len, reverse=True):
        name = name_of(setting)
        if name:
            # a whole word, not part of a path or file name (resume.json, runs/resume)
            message = re.sub(rf"(?<![\w./-]){re.escape(setting)}(?![\w/-]|\.\w)", name, message)
    return message


class CommandFailed(Yolo3Error):
    """Work that was started failed (some inputs unreadable, a check that did not pass ...): the
    command line reports it and exits with status 1, where bad input exits with 2."""


class NotEnoughMemory(Yolo3Error, MemoryError):
    """The machine has less memory than a piece of work needs: the command line reports it in one
    line (what, how much it needs, how much there was), exit 2, and nothing is left written."""


class InvalidBoxError(AnnotationError):
    """A box without area (``x2 <= x1`` or ``y2 <= y1``) or lying outside its image: an error when
    annotations are read strictly, dropped with a warning when training reads them leniently."""
