"""Thin wrapper over ``yolo3.cli.track`` (the same as ``yolo3 track``)."""
import sys

from yolo3.cli.track import main

if __name__ == "__main__":
    sys.exit(main())
