"""Thin wrapper: ``yolo3 benchmark tiles`` (see ``yolo3.benchmarks.tiles``)."""
import sys

from yolo3.cli.benchmark import main

if __name__ == "__main__":
    sys.exit(main(["tiles", *sys.argv[1:]]))
