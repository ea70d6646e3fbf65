"""Thin wrapper over ``yolo3.cli.detect`` (the same as ``yolo3 detect``)."""
import sys

from yolo3.cli.detect import main

if __name__ == "__main__":
    sys.exit(main())
