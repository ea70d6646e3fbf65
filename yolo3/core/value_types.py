"""Settings' values against their type hints: whether a value fits, how to say what fits, and a
value read from text (``"0.7"``, ``"true"``, ``"[160, 224]"``, ``"none"``).

The hints are those of the training settings: ``bool``, ``int``, ``float``, ``str``,
``Optional[X]``, a fixed-length ``Tuple[int, int]``, a ``Literal`` of words (``Literal["auto"]``)
and ``Union`` of them (any other kind is a TypeError). A ``str`` accepts an ``os.PathLike`` (paths), an ``int`` any integral number but not a
bool, a ``float`` any real number but not a bool, a ``Tuple[...]`` a list or tuple of that length.
Plain Python.
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
    """Whether ``value`` fits ``hint`` (module docstring for the rules). TypeError for a hint
    of another kind, so that a setting of a new type is not waved through."""
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
    if origin is typing.Literal:
        return isinstance(value, str) and value in args
    if origin is tuple and Ellipsis not in args:
        return (isinstance(value, (tuple, list)) and len(value) == len(args)
                and all(conforms(v, a) for v, a in zip(value, args)))
    raise TypeError(f"no rule for values of type {hint!r}")


def describe(hint: Any) -> str:
    """What fits ``hint``, in words: ``"a number"``, ``"two whole numbers"``, ``"none or a
    number"`` ..."""
    words = {type(None): "none", bool: "true or false", int: "a whole number", float: "a number",
             str: "text"}
    if hint in words:
        return words[hint]
    origin, args = _parts(hint)
    if origin is typing.Union:
        return " or ".join(sorted((describe(a) for a in args), key=lambda w: w != "none"))
    if origin is typing.Literal:
        return " or ".join(str(a) for a in args)
    if origin is tuple and len(set(args)) == 1 and Ellipsis not in args:
        count = {2: "two"}.get(len(args), str(len(args)))
        return f"{count} {_plural(describe(args[0]))}"
    raise TypeError(f"no words for values of type {hint!r}")


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
