"""Thin wrapper over ``yolo3.cli.report`` (the same as ``yolo3 report``)."""
import sys

from yolo3.cli.report import main

if __name__ == "__main__":
    sys.exit(main())
