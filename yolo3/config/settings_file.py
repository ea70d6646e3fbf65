"""Training settings in a YAML file, by name (``yolo3 train --settings FILE``; what ``yolo3 tune``
writes as ``best.yaml``)::

    # yolo3 training settings
    variant: tiny-af
    lr: 0.0021
    mosaic: 0.62

Every key is a setting's name (:meth:`~yolo3.config.train_config.TrainConfig.settings`), every
value of that setting's type and inside its declared range; a file that breaks either is a
FileFormatError naming the file, the line and the reason. YAML's aliases are refused (a few lines
of them can expand to gigabytes). :func:`mapping_nodes` is the one reader of such YAML mappings
with their line numbers (the search space's too, :mod:`yolo3.config.search_space`).
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Dict, List, Mapping, Tuple

import yaml

from yolo3.config.train_config import (
    CHOICES,
    RANGES,
    canonical_setting,
    no_such_setting,
    setting_types,
)
from yolo3.core.errors import FileFormatError, PathLike
from yolo3.core.fileio import read_text
from yolo3.core.value_types import conforms, describe

__all__ = ["read_settings_file", "settings_text", "mapping_nodes", "node_value",
           "setting_problem"]

HEADER = "# yolo3 training settings (yolo3 train --settings FILE; flags given beside it win)\n"


def mapping_nodes(path: PathLike, what: str) -> List[Tuple[str, int, yaml.Node]]:
    """``(key, line, value node)`` of each entry of the YAML mapping in ``path`` (an empty file:
    none); a FileFormatError naming the file and line for text that is not YAML, not a mapping,
    a key given twice or an alias."""
    text = read_text(path, what)
    try:
        for event in yaml.parse(text, Loader=yaml.SafeLoader):
            if isinstance(event, yaml.AliasEvent):
                raise FileFormatError(path, f"{what}: YAML aliases (*name) are not allowed",
                                      line=event.start_mark.line + 1)
        node = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        raise FileFormatError(path, f"{what} is not YAML: {getattr(e, 'problem', None) or e}",
                              line=None if mark is None else mark.line + 1) from None
    if node is None:
        return []
    if not isinstance(node, yaml.MappingNode):
        raise FileFormatError(path, f"{what}: expected a mapping of names to values "
                                    "(name: value, one per line)", line=node.start_mark.line + 1)
    entries, seen = [], set()
    for key, value in node.value:
        line = key.start_mark.line + 1
        if not isinstance(key, yaml.ScalarNode):
            raise FileFormatError(path, f"{what}: a key must be a name", line=line)
        if key.value in seen:
            raise FileFormatError(path, f"{what}: {key.value} is given twice", line=line)
        seen.add(key.value)
        entries.append((key.value, line, value))
    return entries


def node_value(node: yaml.Node) -> Any:
    """The Python value of a YAML node (aliases already refused); lists for sequences."""
    return yaml.SafeLoader("").construct_object(node, deep=True)


def setting_problem(name: str, value: Any) -> str:
    """Why ``value`` cannot be the setting ``name`` ("" when it can): an unknown name (with the
    closest one), the wrong type, not one of its words, or outside the declared range."""
    hints = setting_types()
    name = canonical_setting(name)
    if name not in hints:
        return no_such_setting(name)
    if isinstance(value, list):
        value = tuple(value)
    if not conforms(value, hints[name]):
        return f"{name} must be {describe(hints[name])}, got {value!r}"
    if name in CHOICES and value not in CHOICES[name]:
        return f"{name} must be one of {', '.join(CHOICES[name])}, got {value!r}"
    rule = RANGES.get(name)
    if rule is not None and value is not None and value not in rule.words and not rule.holds(value):
        return f"{name} {rule.describe()}, got {value!r}"
    return ""


def read_settings_file(path: PathLike) -> Dict[str, Any]:
    """The settings in ``path`` by their names (lists as tuples); FileFormatError naming the
    file and line of the first that is not a setting or not a value of it."""
    settings: Dict[str, Any] = {}
    for name, line, node in mapping_nodes(path, "settings file"):
        value = node_value(node)
        problem = setting_problem(name, value)
        if problem:
            raise FileFormatError(path, problem, line=line)
        settings[canonical_setting(name)] = tuple(value) if isinstance(value, list) else value
    return settings


def settings_text(settings: Mapping[str, Any], comment: str = "") -> str:
    """``settings`` as the YAML text :func:`read_settings_file` reads (tuples as lists, paths
    as text), after :data:`HEADER` and ``comment`` lines."""
    plain = {k: list(v) if isinstance(v, tuple) else (str(v) if isinstance(v, Path) else v)
             for k, v in settings.items()}
    lines = "".join(f"# {line}\n" for line in comment.splitlines())
    return HEADER + lines + yaml.safe_dump(plain, sort_keys=False, default_flow_style=False)
