"""Plot training and validation loss curves from a Keras CSVLogger file to a PNG.

    python tools/plot_history.py --history OUTPUT/history.csv --out loss_curves.png
"""
from __future__ import annotations

import argparse
import csv
import math
import sys
from typing import Dict, List, Optional, Sequence

from yolo3.errors import FileFormatError


def read_history(path: str) -> Dict[str, List[float]]:
    """Columns of a CSVLogger file as float lists (``epoch`` renumbered 1..N in file order)."""
    try:
        with open(path, newline="", encoding="utf-8") as f:
            rows = list(csv.DictReader(f))
    except OSError as e:
        raise FileFormatError(path, f"cannot read history: {e.strerror or e}")
    if not rows:
        raise FileFormatError(path, "history file has no epochs")
    columns: Dict[str, List[float]] = {}
    for line_no, row in enumerate(rows, start=2):
        for key, value in row.items():
            if key is None or key == "epoch":
                continue
            try:
                columns.setdefault(key, []).append(float(value) if value not in ("", None) else math.nan)
            except ValueError:
                raise FileFormatError(path, f"column {key!r}: {value!r} is not a number", line=line_no)
    if "loss" not in columns:
        raise FileFormatError(path, "history file has no 'loss' column")
    columns["epoch"] = [float(i) for i in range(1, len(rows) + 1)]
    return columns


def plot_history(history_path: str, out_path: str, title: Optional[str] = None) -> None:
    """Write the loss (and val_loss when present) per epoch, log scale, to ``out_path``."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    columns = read_history(history_path)
    fig, ax = plt.subplots(figsize=(7, 4.5), dpi=100)
    ax.plot(columns["epoch"], columns["loss"], marker="o", ms=3, label="training loss")
    if "val_loss" in columns:
        ax.plot(columns["epoch"], columns["val_loss"], marker="s", ms=3, label="validation loss")
    ax.set_xlabel("epoch")
    ax.set_ylabel("loss (per image)")
    ax.set_yscale("log")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend()
    ax.set_title(title or "YOLOv3 training")
    fig.tight_layout()
    fig.savefig(out_path)
    plt.close(fig)


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--history", required=True, help="CSV written by training (history.csv)")
    parser.add_argument("--out", required=True, help="PNG file to write")
    parser.add_argument("--title", default=None, help="plot title")
    args = parser.parse_args(argv)
    try:
        plot_history(args.history, args.out, args.title)
    except FileFormatError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
