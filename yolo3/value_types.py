"""Settings' values against their type hints: whether a value fits, how to say what fits, and a
value read from text (``"0.7"``, ``"true"``, ``"[160, 224]"``, ``"none"``).

The hints are those of plain dataclass fields: ``bool``, ``int``, ``float``, ``str``,
``Optional[X]``, ``Tuple[int, int]`` and ``Union`` of them. A ``str`` accepts an ``os.PathLike``
(paths), an ``int`` any integral number but not a bool, a ``float`` any real number but not a bool,
a ``Tuple[...]`` a list or tuple of that length. Plain Python.
"""
from __future__ import annotations

import json
import numbers
import os
import types
import typing
from typing import Any, Tuple

__all__ = ["conforms", "describe", "from_text"]

_WORDS = {"true": True, "false": False, "yes": True, "no": False, "none": None, "null": None}


def _parts(hint: Any) -> Tuple[Any, Tuple[Any, ...]]:
    """``(origin, args)`` of a hint, with ``X | Y`` read as ``Union[X, Y]``."""
    origin = typing.get_origin(hint)
    return (typing.Union if origin is types.UnionType else origin), typing.get_args(hint)


def conforms(value: Any, hint: Any) -> bool:
    """Whether ``value`` fits ``hint`` (module docstring for the rules)."""
    if hint is Any:
        return True
    if hint is type(None):
        return value is None
    if hint is bool:
        return isinstance(value, bool)
    if hint is int:
        return isinstance(value, numbers.Integral) and not isinstance(value, bool)
    if hint is float:
        return isinstance(value, numbers.Real) and not isinstance(value, bool)
    if hint is str:
        return isinstance(value, (str, os.PathLike))
    origin, args = _parts(hint)
    if origin is typing.Union:
        return any(conforms(value, a) for a in args)
    if origin is tuple:
        if not isinstance(value, (tuple, list)):
            return False
        if len(args) == 2 and args[1] is Ellipsis:
            return all(conforms(v, args[0]) for v in value)
        return len(value) == len(args) and all(conforms(v, a) for v, a in zip(value, args))
    return isinstance(value, hint) if isinstance(hint, type) else True


def describe(hint: Any) -> str:
    """What fits ``hint``, in words: ``"a number"``, ``"two whole numbers"``, ``"none or a
    number"`` ..."""
    if hint is type(None):
        return "none"
    if hint is bool:
        return "true or false"
    if hint is int:
        return "a whole number"
    if hint is float:
        return "a number"
    if hint is str:
        return "text"
    origin, args = _parts(hint)
    if origin is typing.Union:
        words = [describe(a) for a in args]
        words.sort(key=lambda w: w != "none")  # "none or ..." reads best first
        return " or ".join(words)
    if origin is tuple:
        if len(args) == 2 and args[1] is Ellipsis:
            return f"a list of {_plural(describe(args[0]))}"
        if len(set(args)) == 1:
            count = {2: "two", 3: "three", 4: "four"}.get(len(args), str(len(args)))
            return f"{count} {_plural(describe(args[0]))}"
        return "a list of " + ", ".join(describe(a) for a in args)
    return getattr(hint, "__name__", str(hint))


def _plural(words: str) -> str:
    return {"a whole number": "whole numbers", "a number": "numbers"}.get(words, words)


def from_text(text: str, hint: Any) -> Any:
    """The value of ``hint`` that ``text`` writes: JSON (``0.7``, ``[160, 224]``, ``"x"``), the
    words true / false / yes / no / none (any case), or else the text itself; lists become tuples
    for tuple hints, whole numbers floats for float hints. ValueError naming what fits when the
    value does not fit."""
    word = text.strip().lower()
    if word in _WORDS:
        value: Any = _WORDS[word]
    else:
        try:
            value = json.loads(text)
        except ValueError:
            value = text
    value = _shaped(value, hint)
    if not conforms(value, hint) and conforms(text, hint):
        value = text  # text that JSON read otherwise: a file named 2024
    if not conforms(value, hint):
        raise ValueError(f"must be {describe(hint)}, got {text!r}")
    return value


def _shaped(value: Any, hint: Any) -> Any:
    """``value`` in the form ``hint`` keeps it: a tuple for a tuple hint, a float for a float
    one."""
    origin, args = _parts(hint)
    options = args if origin is typing.Union else (hint,)
    if isinstance(value, list) and any(typing.get_origin(o) is tuple for o in options):
        return tuple(value)
    if (float in options and int not in options and isinstance(value, int)
            and not isinstance(value, bool)):
        return float(value)
    return value
