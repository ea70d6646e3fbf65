"""Thin wrapper over ``yolo3.cli.plot_history`` (the same as ``yolo3 plot``)."""
import sys

from yolo3.cli.plot_history import main

if __name__ == "__main__":
    sys.exit(main())
