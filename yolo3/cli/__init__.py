"""The command line: ``yolo3 <command> ...``, and one console script ``yolo3-<command>`` per command.

Each command module (``yolo3.cli.<module>``) has ``NAME``, ``DESCRIPTION``, ``add_arguments(parser)``,
``run(args) -> exit code`` and ``main(argv)``; ``tools/*.py`` and ``train_multi_gpu.py`` are thin
wrappers over them. Errors and exit codes are handled in one place, :mod:`yolo3.cli.common`.
Nothing here imports TensorFlow until a command runs.
"""
from __future__ import annotations

import argparse
import importlib
import sys
from typing import Dict, List, Optional

from yolo3.cli.common import Parser, execute, make_parser, parse_or_exit_code

# command name -> module (the console script yolo3-<name> is <module>:main)
COMMANDS: Dict[str, str] = {
    "train": "yolo3.cli.train",
    "tune": "yolo3.cli.tune",
    "detect": "yolo3.cli.detect",
    "track": "yolo3.cli.track",
    "evaluate": "yolo3.cli.evaluate",
    "evaluate-tracks": "yolo3.cli.evaluate_tracks",
    "convert": "yolo3.cli.convert",
    "export": "yolo3.cli.export",
    "kmeans": "yolo3.cli.kmeans",
    "voc": "yolo3.cli.voc_annotation",
    "coco": "yolo3.cli.coco_annotation",
    "annotations": "yolo3.cli.annotations",
    "check": "yolo3.cli.check_dataset",
    "plot": "yolo3.cli.plot_history",
    "report": "yolo3.cli.report",
    "synth": "yolo3.cli.make_synthetic_dataset",
    "benchmark": "yolo3.cli.benchmark",
}


def build_parser() -> argparse.ArgumentParser:
    from yolo3.core.version import __version__
    parser = Parser(
        prog="yolo3", description="YOLOv3 for TensorFlow 2 / Keras 3: train, convert, detect, "
                                  "evaluate, export. 'yolo3 COMMAND --help' for a command's flags.")
    parser.add_argument("--version", action="version", version=f"yolo3 {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name, path in COMMANDS.items():
        module = importlib.import_module(path)
        p = sub.add_parser(name, help=module.DESCRIPTION)
        make_parser(name, module.DESCRIPTION, parser=p)
        module.add_arguments(p)
        p.set_defaults(command_run=module.run, command_parser=p)
    return parser


def main(argv: Optional[List[str]] = None) -> int:
    """``yolo3 <command> ...``: parse and run one command."""
    args = parse_or_exit_code(build_parser(), argv)
    if isinstance(args, int):
        return args
    args.parser = args.command_parser
    return execute(args.command, args.command_run, args)


if __name__ == "__main__":
    sys.exit(main())
