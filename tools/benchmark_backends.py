"""Thin wrapper: ``yolo3 benchmark backends`` (see ``yolo3.benchmarks.backends``)."""
import sys

from yolo3.cli.benchmark import main

if __name__ == "__main__":
    sys.exit(main(["backends", *sys.argv[1:]]))
