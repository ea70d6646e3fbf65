"""Thin wrapper: see yolo3/cli/benchmark_data.py."""
import sys

from yolo3.cli.benchmark_data import main

if __name__ == "__main__":
    sys.exit(main())
