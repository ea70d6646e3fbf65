"""Thin wrapper: ``yolo3 benchmark data`` (see ``yolo3.benchmarks.data``)."""
import sys

from yolo3.cli.benchmark import main

if __name__ == "__main__":
    sys.exit(main(["data", *sys.argv[1:]]))
