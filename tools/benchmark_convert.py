"""Thin wrapper: ``yolo3 benchmark convert`` (see ``yolo3.benchmarks.convert``)."""
import sys

from yolo3.cli.benchmark import main

if __name__ == "__main__":
    sys.exit(main(["convert", *sys.argv[1:]]))
