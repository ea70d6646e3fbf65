"""``yolo3 benchmark <name>`` (``yolo3-benchmark``, ``tools/benchmark_<name>.py``): the benchmarks
of :mod:`yolo3.benchmarks`, each running its contenders side by side and printing a table."""
from __future__ import annotations

import argparse
import importlib
import sys
from typing import List, Optional

from yolo3.cli.common import make_parser, run_command

NAME = "benchmark"
DESCRIPTION = ("Benchmarks that run their contenders side by side in one process and print a table, "
               "with the CPU flags and the float32 matmul peak.")


def add_arguments(p: argparse.ArgumentParser) -> None:
    from yolo3.benchmarks import BENCHMARKS
    sub = p.add_subparsers(dest="benchmark", metavar="BENCHMARK", required=True)
    for name, path in BENCHMARKS.items():
        module = importlib.import_module(path)
        q = sub.add_parser(name, help=module.DESCRIPTION)
        make_parser(f"{NAME} {name}", module.DESCRIPTION, parser=q)
        module.add_arguments(q)
        q.set_defaults(benchmark_run=module.run)


def run(args: argparse.Namespace) -> int:
    return args.benchmark_run(args)


def main(argv: Optional[List[str]] = None) -> int:
    return run_command(NAME, DESCRIPTION, add_arguments, run, argv)


if __name__ == "__main__":
    sys.exit(main())
