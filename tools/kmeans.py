"""Thin wrapper: see yolo3/cli/kmeans.py."""
import sys

from yolo3.cli.kmeans import main

if __name__ == "__main__":
    sys.exit(main())
