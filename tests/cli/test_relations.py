"""The relations between flags (yolo3.cli.relations): each kind refused when broken, the table
naming only flags its commands have, outputs that must differ."""
from __future__ import annotations

import argparse

import pytest

from yolo3.cli import build_parser
from yolo3.cli.flags import OutputPath
from yolo3.cli.relations import (
    RELATIONS,
    AtMost,
    Excludes,
    Needs,
    check_distinct_outputs,
    check_relation,
    command_of,
    flags_named,
)
from yolo3.core.errors import ArgumentError


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="yolo3 demo")
    p.add_argument("--tile", type=int)
    p.add_argument("--overlap", type=float, default=0.2)
    p.add_argument("--style", choices=["solid", "photo"], default="solid")
    p.add_argument("--photos")
    p.add_argument("--gpus", type=int, default=0)
    p.add_argument("--cpus", type=int, default=0)
    p.add_argument("--low", type=float, default=1.0)
    p.add_argument("--high", type=float, default=2.0)
    p.add_argument("--pair", type=int, nargs=2)
    p.add_argument("--quantize", default="none")
    p.add_argument("--calibration")
    return p


@pytest.mark.parametrize("relation, argv, message", [
    (Needs("--overlap", ("--tile",), "it shapes the tiles"), ["--overlap", "0.5"],
     "--overlap needs --tile: it shapes the tiles"),
    (Needs("--photos", ("--style",), values=("photo",)), ["--photos", "p"],
     "--photos needs --style photo"),
    (Needs("--quantize", ("--calibration",), when=("int8",)), ["--quantize", "int8"],
     "--quantize int8 needs --calibration"),
    (Excludes("--gpus", "--cpus"), ["--gpus", "2", "--cpus", "2"],
     "--gpus and --cpus exclude each other"),
    (Excludes("--photos", "--style", values=("solid",), why="they texture the photo style"),
     ["--photos", "p"], "--photos does nothing with --style solid: they texture the photo style"),
    (AtMost("--low", "--high"), ["--low", "3"], "--low 3.0 must be at most --high 2.0"),
    (AtMost("--pair"), ["--pair", "5", "1"], "--pair 5 1: the first value must be at most"),
])
def test_each_kind_of_relation_is_refused_when_broken_and_passes_when_kept(relation, argv,
                                                                          message):
    parser = _parser()
    with pytest.raises(ArgumentError, match=message):
        check_relation(relation, parser, parser.parse_args(argv))
    check_relation(relation, parser, parser.parse_args([]))  # nothing given: nothing broken
    check_relation(relation, parser, parser.parse_args(["--quantize", "float16", "--pair", "1",
                                                        "5", "--tile", "64", "--overlap", "0.5",
                                                        "--style", "photo", "--photos", "p"]))


def test_the_table_names_commands_and_flags_that_exist():
    parsers = {}

    def walk(parser):
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for sub in action.choices.values():
                    parsers[command_of(sub)] = sub
                    walk(sub)
    walk(build_parser())
    for command, relations in RELATIONS.items():
        assert command in parsers, command
        for flag in flags_named(relations):
            assert flag in parsers[command]._option_string_actions, (command, flag)


def test_outputs_naming_one_path_are_refused(tmp_path):
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", type=OutputPath("file"))
    parser.add_argument("--save", type=OutputPath("file"))
    args = parser.parse_args(["--out", str(tmp_path / "e.json"), "--save",
                              str(tmp_path / "." / "e.json")])
    with pytest.raises(ArgumentError, match="--out and --save name the same path"):
        check_distinct_outputs(parser, args)
    check_distinct_outputs(parser, parser.parse_args(["--out", "a.json", "--save", "b.json"]))
