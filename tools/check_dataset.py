"""Thin wrapper over ``yolo3.cli.check_dataset`` (the same as ``yolo3 check``)."""
import sys

from yolo3.cli.check_dataset import main

if __name__ == "__main__":
    sys.exit(main())
