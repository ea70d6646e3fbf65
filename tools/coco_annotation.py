"""Thin wrapper over ``yolo3.cli.coco_annotation`` (the same as ``yolo3 coco``)."""
import sys

from yolo3.cli.coco_annotation import main

if __name__ == "__main__":
    sys.exit(main())
