"""``yolo3 plot`` (``yolo3-plot``, ``tools/plot_history.py``): training and validation curves from
a training run's ``history.csv`` to a PNG.

    yolo3 plot --history OUTPUT/history.csv --out loss_curves.png
"""
from __future__ import annotations

import argparse
import sys
from typing import Optional, Sequence

from yolo3.cli.common import run_command
from yolo3.cli.flags import InputPath, OutputPath, Text
from yolo3.training.history import read_history  # noqa: F401  (the one reader, re-exported)

NAME = "plot"
DESCRIPTION = "Plot the loss (and validation loss, mAP when logged) per epoch of a training run."


def plot_history(history_path: str, out_path: str, title: Optional[str] = None) -> None:
    """Write the loss (and val_loss when present) per epoch, log scale, to ``out_path``; mAP
    columns, when the run logged them, on a second axis."""
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
    lines, labels = ax.get_legend_handles_labels()
    maps = [k for k in ("mAP50", "mAP50_95") if k in columns]
    if maps:
        ax2 = ax.twinx()
        for key, style in zip(maps, ("^-", "v-")):
            evaluated = [(e, v) for e, v in zip(columns["epoch"], columns[key]) if v == v]  # not NaN
            ax2.plot(*zip(*evaluated) if evaluated else ([], []), style, ms=3, color="tab:green",
                     alpha=1.0 if key == "mAP50_95" else 0.5, label=key)
        ax2.set_ylabel("mAP")
        ax2.set_ylim(0, 1)
        more = ax2.get_legend_handles_labels()
        lines, labels = lines + more[0], labels + more[1]
    ax.legend(lines, labels)
    ax.set_title(title or "YOLOv3 training")
    fig.tight_layout()
    from yolo3.evaluation.visualize import save_figure
    save_figure(fig, out_path)
    plt.close(fig)


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--history", required=True, type=InputPath(text=True),
                   help="CSV written by training (history.csv)")
    p.add_argument("--out", required=True, type=OutputPath("file", format="png"), help="PNG file to write")
    p.add_argument("--title", default=None, type=Text(200), help="plot title")


def run(args: argparse.Namespace) -> int:
    from yolo3.core.extras import require
    require("matplotlib", "yolo3 plot")  # one line naming the extra, never a traceback
    plot_history(args.history, args.out, args.title)
    print(f"wrote {args.out}")
    return 0


def main(argv: Optional[Sequence[str]] = None) -> int:
    return run_command(NAME, DESCRIPTION, add_arguments, run, argv)


if __name__ == "__main__":
    sys.exit(main())
