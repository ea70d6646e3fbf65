"""Thin wrapper: ``yolo3 benchmark export`` (see ``yolo3.benchmarks.export``)."""
import sys

from yolo3.cli.benchmark import main

if __name__ == "__main__":
    sys.exit(main(["export", *sys.argv[1:]]))
