"""Thin wrapper: see yolo3/cli/make_synthetic_dataset.py."""
import sys

from yolo3.cli.make_synthetic_dataset import main

if __name__ == "__main__":
    sys.exit(main())
