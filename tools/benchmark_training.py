"""Thin wrapper: ``yolo3 benchmark training`` (see ``yolo3.benchmarks.training``)."""
import sys

from yolo3.cli.benchmark import main

if __name__ == "__main__":
    sys.exit(main(["training", *sys.argv[1:]]))
