"""Thin wrapper over ``yolo3.cli.evaluate_tracks`` (the same as ``yolo3 evaluate-tracks``)."""
import sys

from yolo3.cli.evaluate_tracks import main

if __name__ == "__main__":
    sys.exit(main())
