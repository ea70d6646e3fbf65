"""Thin wrapper: ``yolo3 benchmark track`` (see ``yolo3.benchmarks.track``)."""
import sys

from yolo3.cli.benchmark import main

if __name__ == "__main__":
    sys.exit(main(["track", *sys.argv[1:]]))
