"""Thin wrapper over ``yolo3.cli.convert`` (the same as ``yolo3 convert``)."""
import sys

from yolo3.cli.convert import main

if __name__ == "__main__":
    sys.exit(main())
