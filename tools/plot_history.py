"""Plot training/validation loss curves: see yolo3/cli/plot_history.py."""
import sys

from yolo3.cli.plot_history import main

if __name__ == "__main__":
    sys.exit(main())
