"""Thin wrapper: see yolo3/cli/coco_annotation.py."""
import sys

from yolo3.cli.coco_annotation import main

if __name__ == "__main__":
    sys.exit(main())
