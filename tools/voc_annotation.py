"""Thin wrapper over ``yolo3.cli.voc_annotation`` (the same as ``yolo3 voc``)."""
import sys

from yolo3.cli.voc_annotation import main

if __name__ == "__main__":
    sys.exit(main())
