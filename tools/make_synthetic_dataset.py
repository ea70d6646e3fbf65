"""Thin wrapper over ``yolo3.cli.make_synthetic_dataset`` (the same as ``yolo3 synth``)."""
import sys

from yolo3.cli.make_synthetic_dataset import main

if __name__ == "__main__":
    sys.exit(main())
