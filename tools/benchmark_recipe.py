"""Thin wrapper: ``yolo3 benchmark recipe`` (see ``yolo3.benchmarks.recipe``)."""
import sys

from yolo3.cli.benchmark import main

if __name__ == "__main__":
    sys.exit(main(["recipe", *sys.argv[1:]]))
