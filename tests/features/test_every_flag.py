"""Generated from the parser (issue 53): every typed flag of every command and benchmark refuses
the bad values its declaration implies (nan, inf, -1, 0, 10^30, an empty string, a folder, a
missing file, a binary file ...) with exit 2, naming the flag, without a traceback and without
creating anything; every relation of yolo3.cli.relations is refused when broken and passes when
kept. A new flag or relation is covered without a new test: the cases are read off the parser.

Which values are bad is decided here from the declaration's data (its bounds, its kind), not by
calling the declaration, so a declaration that lets a bad value through fails."""
from __future__ import annotations

import argparse
import math
import os
import subprocess
import sys
from pathlib import Path
from typing import Iterator, List, Tuple

import pytest
from cli_harness import run_cli, snapshot
from locations import REPO

from yolo3.cli import build_parser
from yolo3.cli.flags import (
    Declared,
    InputPath,
    MediaSource,
    Number,
    OutputPath,
    Text,
    given,
)
from yolo3.cli.relations import (
    RELATIONS,
    AtMost,
    Excludes,
    Needs,
    check_relation,
    check_relations,
    command_of,
)
from yolo3.core.errors import ArgumentError


def _walk(parser: argparse.ArgumentParser, words: Tuple[str, ...] = ()
          ) -> Iterator[Tuple[Tuple[str, ...], argparse.ArgumentParser]]:
    """Every command's words (``("benchmark", "tiles")``) and its parser."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                if not any(isinstance(a, argparse._SubParsersAction) for a in sub._actions):
                    yield words + (name,), sub
                yield from _walk(sub, words + (name,))


PARSERS = dict(_walk(build_parser()))
TYPED = [(words, action) for words, parser in PARSERS.items() for action in parser._actions
         if isinstance(action.type, Declared)]


def _flag(action: argparse.Action) -> str:
    return action.option_strings[0] if action.option_strings else action.dest


def _case_id(case) -> str:
    words, action = case
    return f"{' '.join(words)} {_flag(action)}"


# --------------------------------------------------------------------- values from declarations


def _number_is_bad(declared: Number, value: float) -> bool:
    """The declaration's range, read independently of its own check."""
    if not math.isfinite(value):
        return True
    lo, hi = declared.lo, declared.hi
    if value < lo or value > hi or (declared.lo_open and value == lo) or \
            (declared.hi_open and value == hi):
        return True
    if declared.kind is int and value != int(value):
        return True
    return bool(declared.multiple) and int(value) % declared.multiple != 0


def bad_values(declared: Declared, fixtures: dict) -> List[str]:
    """The bad command-line values ``declared`` implies."""
    if isinstance(declared, Number):
        out = ["", "abc", "nan", "inf", "-inf", str(10**30)]
        for text in ("-1", "0", "1e30", "1.5", str(declared.lo - 1), str(declared.hi + 1),
                     str(declared.hi * 2 + 1)):
            value = float(text)
            if text not in out and _number_is_bad(declared, value) and \
                    not (declared.kind is int and not value.is_integer() and
                         text in declared.words):
                out.append(text if declared.kind is float or value.is_integer()
                           else text)
        if declared.multiple:
            out.append(str(int(max(declared.lo, declared.multiple)) + 1))
        return [v for v in out if v not in declared.words]
    if isinstance(declared, MediaSource):
        return ["", fixtures["missing"], fixtures["glob_none"]]
    if isinstance(declared, InputPath):
        out = ["", fixtures["missing"], fixtures["dangling"]]
        if declared.kind == "file":
            out.append(fixtures["folder"])
        if declared.kind == "folder":
            out.append(fixtures["text"])
        if declared.text and declared.kind != "folder":
            out += [fixtures["binary"], fixtures["latin1"]]
        return out
    if isinstance(declared, OutputPath):
        out = ["", fixtures["under_a_file"]]
        out.append(fixtures["folder"] if declared.kind == "file" else fixtures["text"])
        return out
    if isinstance(declared, Text):
        out = ["", "x" * (declared.max_length + 1)]
        if declared.length:
            out.append("x" * (declared.length + 1))
        return out
    raise AssertionError(f"no bad values for {declared!r}: a declared type without a case")


@pytest.fixture
def fixtures(tmp_path) -> dict:
    (tmp_path / "folder").mkdir()
    (tmp_path / "text.txt").write_text("0 0.5 0.5 0.2 0.2\n")
    (tmp_path / "binary.bin").write_bytes(bytes(range(256)) * 4)
    (tmp_path / "latin1.txt").write_bytes("caf\xe9\n".encode("latin-1"))
    os.symlink(tmp_path / "nowhere", tmp_path / "dangling")
    return {"folder": str(tmp_path / "folder"), "text": str(tmp_path / "text.txt"),
            "binary": str(tmp_path / "binary.bin"), "latin1": str(tmp_path / "latin1.txt"),
            "missing": str(tmp_path / "missing.txt"), "dangling": str(tmp_path / "dangling"),
            "under_a_file": str(tmp_path / "text.txt" / "out.json"),
            "glob_none": str(tmp_path / "nothing*.jpg")}


def _argv(words, action: argparse.Action, value: str, fixtures: dict) -> List[str]:
    count = action.nargs if isinstance(action.nargs, int) else 1
    values = [value] * count
    if not action.option_strings:  # a positional: the ones before it filled with values they take
        before = []
        for other in PARSERS[words]._actions:
            if other is action:
                break
            if not other.option_strings:
                before += _valid(other, fixtures, Path(fixtures["folder"]))
        return [*words, *before, *values]
    return [*words, f"{action.option_strings[0]}={value}"] if count == 1 and value.startswith(
        "-") else [*words, action.option_strings[0], *values]


@pytest.mark.parametrize("case", TYPED, ids=[_case_id(c) for c in TYPED])
def test_every_typed_flag_refuses_the_bad_values_its_declaration_implies(
        case, fixtures, tmp_path, capsys, monkeypatch):
    words, action = case
    monkeypatch.chdir(tmp_path)
    before = snapshot(tmp_path)
    values = bad_values(action.type, fixtures)
    assert values, "every declaration implies some bad value"
    for value in values:
        code, err = run_cli(_argv(words, action, value, fixtures), capsys)
        assert code == 2, (value, err)
        assert f"argument {_flag(action)}" in err or (
            not action.option_strings and f"argument {action.metavar or action.dest}" in err), \
            (value, err)
        assert "Traceback" not in err and "unexpected" not in err, err
        assert snapshot(tmp_path) == before, f"{value!r} created something"


COUNT = len(TYPED)


@pytest.mark.parametrize("count", [COUNT], ids=[f"{COUNT}-typed-flags"])
def test_every_value_flag_of_every_command_is_declared(count):
    """Each flag that takes a value has a declared type or fixed choices: none is read as raw
    text or a bare int or float, so the test above covers every one of them."""
    loose = [f"{' '.join(words)} {_flag(a)}" for words, parser in PARSERS.items()
             for a in parser._actions
             if a.nargs != 0 and not isinstance(a, (argparse._HelpAction,
                                                    argparse._SubParsersAction))
             and not isinstance(a.type, Declared) and a.choices is None]
    assert not loose, f"flags without a declaration: {loose}"
    assert count >= 200 and len(PARSERS) >= 20


def test_a_bad_value_is_refused_before_any_backend_is_imported(tmp_path):
    code = ("import sys\nfrom yolo3.cli import main\n"
            "for argv in (['train', '--output', 'o', '--tile', 'nan'], "
            "['detect', '--model', 'm', '--input', '.', '--output', 'o'], "
            "['benchmark', 'tiles', '--input-size', '33']):\n"
            "    try:\n        main(argv)\n    except SystemExit as e:\n"
            "        assert e.code == 2, e.code\n"
            "print(sorted(m for m in ('tensorflow', 'keras', 'jax', 'torch') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True,
                         text=True, env={**os.environ, "PYTHONPATH": str(REPO)}, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"
    assert sorted(os.listdir(tmp_path)) == []


# --------------------------------------------------------------------------------- relations


def _valid(action: argparse.Action, fixtures: dict, tmp: Path, low: bool = True) -> List[str]:
    """A value ``action`` takes that differs from its default (``low``: near its smallest, else
    near its largest)."""
    declared = action.type
    if isinstance(declared, Number):
        lo, hi = declared.lo, declared.hi
        if declared.kind is int:
            step = declared.multiple or 1
            value = (lo + (step if declared.lo_open else 0)) if low else \
                (hi - (step if declared.hi_open else 0))
            value -= value % step if declared.multiple else 0
            if value == action.default:
                value = value + step if low else value - step
            text = str(int(value))
        else:
            value = (lo + (hi - lo) / 4 if declared.lo_open else lo) if low else \
                (hi - (hi - lo) / 4 if declared.hi_open else hi)
            if value == action.default:
                value = lo + (hi - lo) / 3 if low else hi - (hi - lo) / 3
            text = repr(float(value))
    elif isinstance(declared, InputPath):
        text = fixtures["folder"] if declared.kind == "folder" else fixtures["text"]
    elif isinstance(declared, OutputPath):
        text = str(tmp / f"out_{action.dest}" / ("x.json" if declared.kind == "file" else ""))
        text = text.rstrip("/")
    elif isinstance(declared, Text):
        text = declared.example
    elif action.choices is not None:
        text = next(str(c) for c in action.choices if c != action.default)
    else:
        raise AssertionError(f"{_flag(action)}: no valid value")
    count = action.nargs if isinstance(action.nargs, int) else 1
    return [text] * count


def _given(parser, flag: str, fixtures: dict, tmp: Path, value=None, low: bool = True
           ) -> List[str]:
    """``flag`` on the command line with a value it takes (``value`` when given)."""
    action = parser._option_string_actions[flag]
    if action.nargs == 0:  # store_true, store_const, --no-x
        if isinstance(action, argparse.BooleanOptionalAction):
            wanted = (not action.default) if value is None else value
            return [flag if wanted else "--no-" + flag[2:]]
        return [flag]
    if value is not None:
        return [flag, str(value)]
    return [flag, *_valid(action, fixtures, tmp, low)]


def _required(parser, leave: Tuple[str, ...], fixtures: dict, tmp: Path,
              avoid: Tuple[str, ...] = ()) -> List[str]:
    """The required flags and positionals of ``parser`` with values it takes: one flag of each
    required group (none for a group holding one of ``leave``, which the caller gives; never one
    of ``avoid``; one the relations need where there is), and each required flag not in
    ``leave``."""
    needed = {other for relation in RELATIONS.get(command_of(parser), ())
              if isinstance(relation, Needs) for other in relation.others}
    out: List[str] = []
    for group in parser._mutually_exclusive_groups:
        flags = [a.option_strings[0] for a in group._group_actions if a.option_strings[0]
                 not in avoid]
        if group.required and not any(a.option_strings[0] in leave
                                      for a in group._group_actions):
            out += _given(parser, next((f for f in flags if f in needed), flags[0]), fixtures,
                          tmp)
    for action in parser._actions:
        if action.required and action.option_strings and action.option_strings[0] not in leave:
            out += _given(parser, action.option_strings[0], fixtures, tmp)
        elif not action.option_strings and action.nargs is None:
            out += _valid(action, fixtures, tmp)
    return out


def _needs_argv(parser, relation: Needs, fixtures, tmp, kept: bool) -> List[str]:
    if kept:
        argv = _required(parser, (relation.flag, relation.others[0]), fixtures, tmp)
    else:
        argv = _required(parser, (relation.flag,), fixtures, tmp, avoid=relation.others)
    argv += _given(parser, relation.flag, fixtures, tmp,
                   relation.when[0] if relation.when else None)
    for other in relation.others[:1] if kept else relation.others:
        if kept:
            argv += _given(parser, other, fixtures, tmp,
                           relation.values[0] if relation.values else None)
        elif relation.values:  # the other flag set to a value the relation does not take
            action = parser._option_string_actions[other]
            if isinstance(action, argparse.BooleanOptionalAction):
                argv += _given(parser, other, fixtures, tmp, value=not relation.values[0])
            else:
                argv += [other, next(str(c) for c in action.choices
                                     if c not in relation.values)]
    return argv


def _keeping_the_others(parser, argv: List[str], relation, fixtures: dict, tmp: Path
                        ) -> List[str]:
    """``argv`` with what the command's other relations need added, so that only ``relation``
    can refuse it."""
    for _ in range(8):
        args = parser.parse_args(argv)
        for other in RELATIONS[command_of(parser)]:
            if other == relation:
                continue
            try:
                check_relation(other, parser, args)
            except ArgumentError:
                assert isinstance(other, Needs), f"{other} cannot be kept beside {relation}"
                argv = argv + _given(parser, other.others[0], fixtures, tmp,
                                     other.values[0] if other.values else None)
                break
        else:
            return argv
    raise AssertionError(f"{relation}: the other relations could not all be kept")


RELATION_CASES = [(command, relation) for command, relations in RELATIONS.items()
                  for relation in relations]


@pytest.mark.parametrize("command, relation", RELATION_CASES,
                         ids=[f"{c} {type(r).__name__} {getattr(r, 'flag', None) or r.low}"
                              for c, r in RELATION_CASES])
def test_every_relation_is_refused_when_broken_and_passes_when_kept(command, relation, fixtures,
                                                                   tmp_path, capsys,
                                                                   monkeypatch):
    monkeypatch.chdir(tmp_path)
    words = tuple(command.split())
    parser = PARSERS[words]
    if isinstance(relation, Needs):
        broken = _needs_argv(parser, relation, fixtures, tmp_path, kept=False)
        kept = _needs_argv(parser, relation, fixtures, tmp_path, kept=True)
        named = (relation.flag, relation.others[0])
    elif isinstance(relation, Excludes):
        base = _required(parser, (relation.flag, relation.other), fixtures, tmp_path)
        broken = base + _given(parser, relation.flag, fixtures, tmp_path) + \
            _given(parser, relation.other, fixtures, tmp_path)
        kept = base + _given(parser, relation.flag, fixtures, tmp_path)
        named = (relation.flag, relation.other)
    else:
        assert isinstance(relation, AtMost)
        base = _required(parser, (relation.low,), fixtures, tmp_path)
        if relation.high is None:
            action = parser._option_string_actions[relation.low]
            low, high = _valid(action, fixtures, tmp_path, low=True)[0], \
                _valid(action, fixtures, tmp_path, low=False)[0]
            broken = base + [relation.low, high, low]
            kept = base + [relation.low, low, high]
            named = (relation.low,)
        else:
            broken = base + _given(parser, relation.low, fixtures, tmp_path, low=False) + \
                _given(parser, relation.high, fixtures, tmp_path, low=True)
            kept = base + _given(parser, relation.low, fixtures, tmp_path, low=True) + \
                _given(parser, relation.high, fixtures, tmp_path, low=False)
            named = (relation.low, relation.high)
    broken = _keeping_the_others(parser, broken, relation, fixtures, tmp_path)
    kept = _keeping_the_others(parser, kept, relation, fixtures, tmp_path)
    before = snapshot(tmp_path)
    code, err = run_cli([*words, *broken], capsys)
    assert code == 2, (broken, err)
    assert all(flag in err for flag in named), (named, err)
    assert "Traceback" not in err and "unexpected" not in err, err
    assert snapshot(tmp_path) == before
    args = parser.parse_args(kept)  # kept: parses, and no relation of the table refuses it
    check_relations(parser, args)
    if isinstance(relation, Needs):
        assert given(parser._option_string_actions[relation.flag], args)
