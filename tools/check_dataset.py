"""Thin wrapper: see yolo3/cli/check_dataset.py."""
import sys

from yolo3.cli.check_dataset import main

if __name__ == "__main__":
    sys.exit(main())
