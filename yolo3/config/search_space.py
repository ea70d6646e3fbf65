"""The search space of ``yolo3 tune``: which training settings a trial draws, and from where.

A YAML file, one setting per line::

    lr: {low: 0.0003, high: 0.01, log: true}   # a number from a range (log: drawn on a log scale)
    mosaic: {low: 0.0, high: 1.0}
    freeze_epochs: {low: 0, high: 5}           # a whole-number setting: whole numbers
    optimizer: {choices: [adam, sgd]}          # one of a list

Each name is a training setting; a range lies inside the setting's declared range
(:data:`yolo3.config.train_config.RANGES`) with ``low < high`` (``log`` needs ``low > 0``); each
choice is a value of the setting. A file that breaks a rule is a FileFormatError naming the file,
the line and the reason. :data:`DEFAULT_SPACE` is the space without a file: the recipe's main
settings around their defaults (``docs/guide.md``, "Searching the settings").
"""
from __future__ import annotations

import typing
from dataclasses import dataclass
from typing import Any, List, Optional, Sequence, Tuple

import yaml

from yolo3.config.settings_file import mapping_nodes, node_value, setting_problem
from yolo3.config.train_config import canonical_setting, setting_types
from yolo3.core.errors import FileFormatError, PathLike

__all__ = ["Dimension", "read_search_space", "DEFAULT_SPACE", "space_text"]


@dataclass(frozen=True)
class Dimension:
    """One setting a trial draws: from ``low``..``high`` (``log`` scale; whole numbers when
    ``whole``), or one of ``choices``."""

    name: str
    low: Optional[float] = None
    high: Optional[float] = None
    log: bool = False
    whole: bool = False
    choices: Optional[Tuple[Any, ...]] = None

    def as_yaml(self) -> dict:
        if self.choices is not None:
            return {"choices": list(self.choices)}
        entry = {"low": self.low, "high": self.high}
        if self.log:
            entry["log"] = True
        return entry


# the recipe's main settings, around their defaults: the learning rate and weight decay over a
# decade or two each, the mosaic's share, the box and class gains (docs/guide.md says why)
DEFAULT_SPACE: Tuple[Dimension, ...] = (
    Dimension("lr", 3e-4, 1e-2, log=True),
    Dimension("weight_decay", 1e-5, 1e-3, log=True),
    Dimension("mosaic", 0.0, 1.0),
    Dimension("box_gain", 1.0, 10.0, log=True),
    Dimension("class_gain", 0.25, 4.0, log=True),
)


def read_search_space(path: PathLike) -> List[Dimension]:
    """The dimensions in ``path``; FileFormatError naming the file, line and reason for the first
    entry that breaks a rule (module docstring); an empty space too."""
    dimensions = []
    for key, line, node in mapping_nodes(path, "search space"):
        try:
            dimensions.append(_dimension(key, node_value(node)))
        except ValueError as e:
            raise FileFormatError(path, str(e), line=line) from None
    if not dimensions:
        raise FileFormatError(path, "search space: no setting to search (name: {low: L, high: "
                                    "H} or name: {choices: [...]}, one per line)")
    return dimensions


def _dimension(key: str, entry: Any) -> Dimension:
    name = canonical_setting(key)
    if name not in setting_types():
        raise ValueError(setting_problem(name, None))  # no such setting (and the closest)
    if not isinstance(entry, dict) or not (set(entry) <= {"low", "high", "log", "choices"}):
        raise ValueError(f"{name}: expected {{low: L, high: H[, log: true]}} or {{choices: "
                         f"[...]}}, got {entry!r}")
    if "choices" in entry:
        choices = entry["choices"]
        if set(entry) != {"choices"} or not isinstance(choices, list) or not choices:
            raise ValueError(f"{name}: choices must be a non-empty list, alone")
        for choice in choices:
            problem = setting_problem(name, choice)
            if problem:
                raise ValueError(f"choice {choice!r}: {problem}")
        return Dimension(name, choices=tuple(tuple(c) if isinstance(c, list) else c
                                             for c in choices))
    if "low" not in entry or "high" not in entry:
        raise ValueError(f"{name}: a range needs low and high")
    low, high, log = entry["low"], entry["high"], entry.get("log", False)
    hint = setting_types()[name]
    whole = _numeric_kind(hint) is int
    if _numeric_kind(hint) is None:
        raise ValueError(f"{name} is not a number: give its choices ({{choices: [...]}})")
    for bound in (low, high):
        if not isinstance(bound, (int, float)) or isinstance(bound, bool) or (
                whole and bound != int(bound)):
            raise ValueError(f"{name}: low and high must be {'whole ' if whole else ''}numbers, "
                             f"got {bound!r}")
        problem = setting_problem(name, int(bound) if whole else float(bound))
        if problem:
            raise ValueError(f"{problem} (low and high lie inside the setting's range)")
    if not low < high:
        raise ValueError(f"{name}: low ({low}) must be below high ({high})")
    if not isinstance(log, bool):
        raise ValueError(f"{name}: log must be true or false, got {log!r}")
    if log and low <= 0:
        raise ValueError(f"{name}: a log scale needs low above 0, got {low}")
    return Dimension(name, float(low), float(high), log, whole)


def _numeric_kind(hint: Any) -> Optional[type]:
    """int or float for a setting of whole numbers or numbers (possibly Optional, or with
    words), else None."""
    options = typing.get_args(hint) or (hint,)
    if float in options:
        return float
    if int in options:
        return int
    return None


def space_text(dimensions: Sequence[Dimension]) -> str:
    """``dimensions`` as the YAML text :func:`read_search_space` reads."""
    return yaml.safe_dump({d.name: d.as_yaml() for d in dimensions}, sort_keys=False,
                          default_flow_style=None)
