"""Thin wrapper over ``yolo3.cli.evaluate`` (the same as ``yolo3 evaluate``)."""
import sys

from yolo3.cli.evaluate import main

if __name__ == "__main__":
    sys.exit(main())
