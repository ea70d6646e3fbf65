"""Thin wrapper over ``yolo3.cli.export`` (the same as ``yolo3 export``)."""
import sys

from yolo3.cli.export import main

if __name__ == "__main__":
    sys.exit(main())
