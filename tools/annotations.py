"""Thin wrapper over ``yolo3.cli.annotations`` (the same as ``yolo3 annotations``)."""
import sys

from yolo3.cli.annotations import main

if __name__ == "__main__":
    sys.exit(main())
