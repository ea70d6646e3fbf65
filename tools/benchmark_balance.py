"""Thin wrapper: ``yolo3 benchmark balance`` (see ``yolo3.benchmarks.balance``)."""
import sys

from yolo3.cli.benchmark import main

if __name__ == "__main__":
    sys.exit(main(["balance", *sys.argv[1:]]))
