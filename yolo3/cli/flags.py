"""Flags declared once, with what they take: the argparse types of every value a command reads.

Each typed flag's ``type`` is a :class:`Declared`: a number with its range (:class:`Number`:
whole or not, bounds, a multiple of 32, words such as ``auto`` beside it), a path with its role
(:class:`InputPath`: must exist, be a file or a folder, be text; :class:`OutputPath`: a file or a
folder whose parent can be made and written), or text (:class:`Text`). argparse calls it while
parsing, so a bad value is refused naming its flag (exit 2) before any work and before any
backend is imported. The declarations are data, too: :func:`declared_paths` reads a command's
inputs and outputs off them (checked against each other in one place,
:func:`yolo3.core.paths.check_outputs`), and the generated test tries the bad values each
declaration implies on every flag of every command. The relations between flags are
:mod:`yolo3.cli.relations`'; the environment variables yolo3 reads are declared in
:data:`ENVIRONMENT`. Plain Python: nothing here imports TensorFlow.
"""
from __future__ import annotations

import argparse
import codecs
import math
import os
import re
from typing import Callable, Dict, Iterator, List, Optional, Sequence, Tuple, Union

from yolo3.core.cpus import usable_cores
from yolo3.core.errors import ArgumentError

__all__ = ["Declared", "Number", "InputPath", "MediaSource", "OutputPath", "Text", "FORMATS",
           "ENVIRONMENT",
           "check_environment", "declared_paths", "declared_actions", "given",
           "TEXT_PROBE_BYTES", "MAX_CPU_REPLICAS_PER_CORE",
           "SEED", "FRACTION", "SHARE", "POSITIVE", "COUNT", "COUNT0", "BATCH", "EPOCHS",
           "INPUT_SIDE", "IMAGE_SIDE", "TILE", "TILE_OR_AUTO", "TILE_OR_OFF", "OVERLAP",
           "LEARNING_RATE",
           "GAIN", "MOMENTUM", "WEIGHT", "CPU_REPLICAS", "GPUS"]

TEXT_PROBE_BYTES = 1 << 16  # how much of a text input is read to tell it is text
MAX_CPU_REPLICAS_PER_CORE = 4  # logical CPU devices per core at most (each holds a replica)


class Declared:
    """An argparse type that says what its flag takes (``describe()``); calling it converts a
    command-line value or raises :class:`argparse.ArgumentTypeError`."""

    words: Tuple[str, ...] = ()  # literal words taken beside the declared kind (``auto``)

    def describe(self) -> str:
        raise NotImplementedError

    def __call__(self, text: str):
        raise NotImplementedError

    def _refuse_unnamed(self, text: str) -> None:
        """A path is refused when it is empty or holds a NUL character (no file has that name)."""
        if not text.strip():
            raise self._refuse(text, "empty")
        if "\x00" in text:
            raise self._refuse(text, "a NUL character")

    def _refuse(self, text: str, why: str = "") -> argparse.ArgumentTypeError:
        return argparse.ArgumentTypeError(f"expected {self.describe()}, got {text!r}"
                                          + (f" ({why})" if why else ""))

    def __repr__(self) -> str:  # argparse shows a type's name in some messages
        return self.describe()


def _shown(value: float) -> str:
    """``value`` as a person reads it: whole numbers in full, others in short."""
    if float(value).is_integer() and abs(value) < 1e15:
        return str(int(value))
    return f"{value:g}"


def _words(words: Sequence[str]) -> str:
    return " or ".join(words)


class Number(Declared):
    """A finite number (``kind`` int: a whole one) from ``lo`` to ``hi`` (each open or closed;
    ``hi`` may be a function of the machine, ``hi_why`` saying how), a multiple of ``multiple``
    where given, or one of ``words``."""

    def __init__(self, kind: type, lo: float, hi: Union[float, Callable[[], float]], *,
                 lo_open: bool = False, hi_open: bool = False, multiple: Optional[int] = None,
                 words: Sequence[str] = (), hi_why: Optional[Callable[[], str]] = None):
        if kind not in (int, float):
            raise TypeError("kind must be int or float")
        self.kind, self.lo, self._hi = kind, lo, hi
        self.lo_open, self.hi_open, self.multiple = lo_open, hi_open, multiple
        self.words = tuple(words)
        self.hi_why = hi_why

    @classmethod
    def within(cls, setting: str) -> "Number":
        """The flag of a training setting with a declared range (``config.train_config.RANGES``):
        the parser and the settings check read the one declaration."""
        from yolo3.config.train_config import RANGES
        r = RANGES[setting]
        return cls(r.kind, r.lo, r.hi, lo_open=r.lo_open, hi_open=r.hi_open, words=r.words)

    @property
    def hi(self) -> float:
        return self._hi() if callable(self._hi) else self._hi

    def describe(self) -> str:
        what = "a whole number" if self.kind is int else "a number"
        low = f"above {_shown(self.lo)}" if self.lo_open else f"from {_shown(self.lo)}"
        high = f"below {_shown(self.hi)}" if self.hi_open else f"to {_shown(self.hi)}"
        if self.lo_open:
            text = f"{what} {low}, up {high}" if not self.hi_open else f"{what} {low} and {high}"
        else:
            text = f"{what} {low} {high}" if not self.hi_open else f"{what} {low}, {high}"
        if self.multiple:
            text += f", a multiple of {self.multiple}"
        if self.words:
            text += f", or {_words(self.words)}"
        return text

    def accepts(self, value: float) -> bool:
        """Whether the number ``value`` lies in the declared range (and is a multiple)."""
        if not math.isfinite(value):
            return False
        if value < self.lo or (self.lo_open and value == self.lo):
            return False
        if value > self.hi or (self.hi_open and value == self.hi):
            return False
        if self.kind is int and value != int(value):
            return False
        return not (self.multiple and int(value) % self.multiple)

    def __call__(self, text: str):
        if text in self.words:
            return text
        try:
            value = self.kind(text) if self.kind is int else float(text)
        except (ValueError, OverflowError):
            raise self._refuse(text) from None
        if not self.accepts(value):
            why = self.hi_why() if self.hi_why is not None and value > self.hi else ""
            raise self._refuse(text, why)
        return value


_KINDS = ("file", "folder", "any")


def _nearest_existing(path: str) -> str:
    """``path`` or its nearest ancestor that exists."""
    current = os.path.abspath(path)
    while not os.path.lexists(current):
        parent = os.path.dirname(current)
        if parent == current:
            break
        current = parent
    return current


def looks_like_text(head: bytes) -> bool:
    """Whether ``head``, the start of a file, reads as UTF-8 text: it decodes, and NUL bytes are
    rare in it (a file of zeros is no text; a class named NUL is, in a file of names)."""
    if head.count(b"\x00") > max(1, len(head) // 10):
        return False
    try:
        codecs.getincrementaldecoder("utf-8")().decode(head, final=False)
    except UnicodeDecodeError:
        return False
    return True


def is_text_file(path: str) -> bool:
    """Whether the start of the file ``path`` reads as UTF-8 text (:func:`looks_like_text`)."""
    with open(path, "rb") as f:
        return looks_like_text(f.read(TEXT_PROBE_BYTES))


class InputPath(Declared):
    """A path the command reads: it must exist and be a ``kind`` (file, folder or any); a file
    read as text (``text``) must be UTF-8 text; ``words`` are taken beside it (``auto``)."""

    def __init__(self, kind: str = "file", text: bool = False, words: Sequence[str] = (),
                 what: str = ""):
        if kind not in _KINDS:
            raise ValueError(f"kind must be one of {_KINDS}")
        self.kind, self.text, self.words, self.what = kind, text, tuple(words), what

    def describe(self) -> str:
        noun = {"file": "file", "folder": "folder", "any": "file or folder"}[self.kind]
        text = f"an existing {'text ' if self.text and self.kind == 'file' else ''}{noun}"
        if self.what:
            text += f" ({self.what})"
        return text + (f", or {_words(self.words)}" if self.words else "")

    def __call__(self, text: str):
        if text in self.words:
            return text
        self._refuse_unnamed(text)
        if not os.path.lexists(text):
            raise self._refuse(text, "no such file or folder")
        if not os.path.exists(text):
            raise self._refuse(text, "a link to nothing")
        if self.kind == "file" and os.path.isdir(text):
            raise self._refuse(text, "a folder")
        if self.kind == "folder" and not os.path.isdir(text):
            raise self._refuse(text, "not a folder")
        if not os.access(text, os.R_OK):
            raise self._refuse(text, "not readable")
        if self.text and os.path.isfile(text):
            try:
                ok = is_text_file(text)
            except OSError as e:
                raise self._refuse(text, e.strerror or str(e)) from None
            if not ok:
                raise self._refuse(text, "not a text file: binary or not UTF-8")
        return text


class MediaSource(InputPath):
    """What ``detect`` reads: an existing image, folder or video, a glob matching files
    (``'imgs/*.jpg'``), or a webcam index."""

    def __init__(self):
        super().__init__("any", what="an image, folder, video, glob or webcam index")

    def describe(self) -> str:
        return "an image, folder, video or glob of files, or a webcam index"

    def __call__(self, text: str):
        import glob
        if text.isdigit() and not os.path.exists(text):
            return text
        if not os.path.lexists(text) and text.strip() and "\x00" not in text and \
                glob.has_magic(text):
            if any(os.path.isfile(p) for p in glob.iglob(text, recursive=True)):
                return text
            raise self._refuse(text, "no file matches it")
        return super().__call__(text)


def _sniff_json(head: bytes) -> bool:
    return head.lstrip()[:1] in (b"[", b"{")


# what a file of each format a command writes starts with: a named output that exists and is not
# of its format (a model given as --json) is someone's other file, never replaced
FORMATS: Dict[str, Tuple[str, Callable[[bytes], bool]]] = {
    "json": ("a JSON file", _sniff_json),
    "text": ("a text file", looks_like_text),
    "png": ("a PNG image", lambda head: head.startswith(b"\x89PNG\r\n\x1a\n")),
    "html": ("an HTML page", lambda head: head.lstrip()[:14].lower().startswith(
        (b"<!doctype html", b"<html"))),
    "tflite": ("a TFLite model", lambda head: head[4:8] == b"TFL3"),
    "onnx": ("an ONNX model", lambda head: head[:1] == b"\x08"),
}


class OutputPath(Declared):
    """A path the command writes: a ``kind`` (file or folder) or nothing yet, its folder one that
    exists or can be made under a writable folder; a file that exists already, unless empty,
    must be of the ``format`` the command writes (:data:`FORMATS`), or it is refused."""

    def __init__(self, kind: str = "file", what: str = "", format: Optional[str] = None):
        if kind not in ("file", "folder"):
            raise ValueError("kind must be file or folder")
        if format is not None and (kind != "file" or format not in FORMATS):
            raise ValueError(f"format must be one of {', '.join(FORMATS)}, for a file")
        self.kind, self.what, self.format = kind, what, format

    def describe(self) -> str:
        text = f"a {self.kind} to write"
        if self.format:
            text += f" ({FORMATS[self.format][0]}; an existing file must be one)"
        return text + (f" ({self.what})" if self.what else "")

    def __call__(self, text: str):
        self._refuse_unnamed(text)
        if self.kind == "file" and (os.path.isdir(text) or text.endswith(("/", os.sep))):
            raise self._refuse(text, "a folder")
        if self.kind == "folder" and os.path.lexists(text) and not os.path.isdir(text):
            raise self._refuse(text, "a file")
        if self.format and os.path.isfile(text) and os.path.getsize(text):
            noun, looks = FORMATS[self.format]
            try:
                with open(text, "rb") as f:
                    head = f.read(TEXT_PROBE_BYTES)
            except OSError as e:
                raise self._refuse(text, e.strerror or str(e)) from None
            if not looks(head):
                raise self._refuse(text, f"it exists and is not {noun}: yolo3 replaces only a "
                                         "file of the kind it writes")
        start = text if self.kind == "folder" else os.path.dirname(os.path.abspath(text))
        existing = _nearest_existing(start)
        if not os.path.isdir(existing):
            raise self._refuse(text, f"{existing} is a file, not a folder")
        if not os.access(existing, os.W_OK | os.X_OK):
            raise self._refuse(text, f"{existing} is not writable")
        return text


class Text(Declared):
    """Free text: not empty, at most ``max_length`` characters (exactly ``length`` where given),
    matching ``pattern`` where given (``pattern_words`` says what it is; ``example`` is one)."""

    def __init__(self, max_length: int = 1000, pattern: Optional[str] = None,
                 pattern_words: str = "", length: Optional[int] = None, example: str = "text"):
        self.max_length, self.length, self.example = max_length, length, example
        self.pattern = None if pattern is None else re.compile(pattern)
        self.pattern_words = pattern_words

    def describe(self) -> str:
        if self.length:
            return f"{self.length} characters" + (f" ({self.pattern_words})"
                                                   if self.pattern_words else "")
        return self.pattern_words or f"text of 1 to {self.max_length} characters"

    def __call__(self, text: str):
        if not text or "\x00" in text:
            raise self._refuse(text)
        if self.length is not None and len(text) != self.length:
            raise self._refuse(text)
        if len(text) > self.max_length:
            raise self._refuse(text[:40] + "...", f"{len(text)} characters")
        if self.pattern is not None and not self.pattern.fullmatch(text):
            raise self._refuse(text)
        return text


# JAX's coordinator: HOST:PORT (a name, IPv4 or [IPv6]; port 1-65535) or the word auto
COORDINATOR = Text(200, pattern=r"auto|(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9_.-]+):"
                   r"([1-9][0-9]{0,3}|[1-5][0-9]{4}|6[0-4][0-9]{3}|65[0-4][0-9]{2}|655[0-2][0-9]|6553[0-5])",
                   pattern_words="HOST:PORT (port 1 to 65535) or auto", example="node0:12355")


def _max_cpu_replicas() -> int:
    return max(8, MAX_CPU_REPLICAS_PER_CORE * usable_cores())


# the declarations the commands share
SEED = Number(int, 0, 2**32 - 1)
FRACTION = Number(float, 0.0, 1.0)  # thresholds and shares that may be 0 or 1
SHARE = Number(float, 0.0, 1.0, lo_open=True)  # a share that must be above 0
POSITIVE = Number(float, 0.0, 1e6, lo_open=True)
COUNT = Number(int, 1, 10**7)
COUNT0 = Number(int, 0, 10**7)
BATCH = Number(int, 1, 4096)
EPOCHS = Number(int, 1, 100_000)
INPUT_SIDE = Number(int, 32, 4096, multiple=32)  # a network input side
IMAGE_SIDE = Number(int, 8, 16384)  # an image side, in pixels
TILE = Number(int, 32, 16384)  # a tile side, in pixels
TILE_OR_AUTO = Number(int, 32, 16384, words=("auto",))


class _TileOrOff(Number):
    """A tile side, or 0 (the word): no tiles."""

    def __call__(self, text: str):
        value = super().__call__(text)
        return 0 if value == "0" else value


TILE_OR_OFF = _TileOrOff(int, 32, 16384, words=("0",))  # detect's --tile: 0 turns slicing off
PIXELS = Number(float, 0.0, 16384.0)  # a size in pixels that may be 0 (off)
OVERLAP = Number(float, 0.0, 0.75)  # each pixel in at most 16 tiles
LEARNING_RATE = Number(float, 0.0, 10.0, lo_open=True)
GAIN = Number(float, 0.0, 1000.0)
MOMENTUM = Number(float, 0.0, 1.0, hi_open=True)
WEIGHT = Number(float, 0.0, 1e6, lo_open=True)  # a relative weight (class shares)
CPU_REPLICAS = Number(int, 1, _max_cpu_replicas, hi_why=lambda: (
    f"at most {MAX_CPU_REPLICAS_PER_CORE} logical devices per CPU core, and at least 8: this "
    f"machine has {usable_cores()} cores"))
GPUS = Number(int, 0, 1024)


# ------------------------------------------------------------------------------ environment

KERAS_BACKENDS = ("tensorflow", "jax", "torch")
# the environment variables yolo3 reads: name -> (declaration, what it is)
ENVIRONMENT: Dict[str, Tuple[Declared, str]] = {
    "KERAS_BACKEND": (Text(pattern="|".join(KERAS_BACKENDS),
                           pattern_words=f"one of {', '.join(KERAS_BACKENDS)}",
                           example="tensorflow"),
                      "the Keras backend"),
    "YOLO3_CACHE_DIR": (OutputPath("folder"), "yolo3's cache folder"),
}


def check_environment(environ: Optional[Dict[str, str]] = None) -> None:
    """Refuse an environment variable of :data:`ENVIRONMENT` whose value its declaration does
    not take (:class:`~yolo3.core.errors.ArgumentError` naming the variable); unset or empty
    ones are the defaults."""
    environ = os.environ if environ is None else environ
    for name, (declared, what) in ENVIRONMENT.items():
        value = environ.get(name)
        if not value:
            continue
        try:
            declared(value)
        except argparse.ArgumentTypeError as e:
            raise ArgumentError(f"{name}={value}: {what}: {e}; set it to what it takes, or "
                                "unset it") from None


# --------------------------------------------------------------- reading the declarations back


def declared_actions(parser: argparse.ArgumentParser) -> Iterator[argparse.Action]:
    """The actions of ``parser`` that take a value of a declared type."""
    for action in parser._actions:
        if isinstance(action.type, Declared):
            yield action


def given(action: argparse.Action, args: argparse.Namespace) -> bool:
    """Whether ``args`` sets ``action``'s flag to something other than its default."""
    return getattr(args, action.dest, action.default) != action.default


def _values(value) -> List[str]:
    if value is None:
        return []
    if isinstance(value, (list, tuple)):
        return [v for v in value if isinstance(v, str)]
    return [value] if isinstance(value, str) else []


def declared_paths(parser: argparse.ArgumentParser, args: argparse.Namespace
                   ) -> Tuple[List[Tuple[str, str, str]], List[str]]:
    """``(outputs, inputs)`` that ``args`` names through ``parser``'s declared path flags:
    outputs as ``(flag, path, kind)`` (kind file or folder), inputs as the paths that exist
    (words such as ``auto``, a webcam index and a glob left out: a command expands its own)."""
    outputs: List[Tuple[str, str, str]] = []
    inputs: List[str] = []
    for action in declared_actions(parser):
        flag = action.option_strings[0] if action.option_strings else action.dest.upper()
        for value in _values(getattr(args, action.dest, None)):
            if isinstance(action.type, OutputPath):
                outputs.append((flag, value, action.type.kind))
            elif isinstance(action.type, InputPath) and os.path.lexists(value):
                inputs.append(value)  # not a word (auto), a webcam index or a glob: a path
    return outputs, inputs
