"""Thin wrapper: ``yolo3 benchmark inference`` (see ``yolo3.benchmarks.inference``)."""
import sys

from yolo3.cli.benchmark import main

if __name__ == "__main__":
    sys.exit(main(["inference", *sys.argv[1:]]))
