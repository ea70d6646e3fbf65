"""Thin wrapper over ``yolo3.cli.kmeans`` (the same as ``yolo3 kmeans``)."""
import sys

from yolo3.cli.kmeans import main

if __name__ == "__main__":
    sys.exit(main())
