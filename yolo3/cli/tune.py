"""``yolo3 tune``: train's flags as the study's base settings, a search space, a trial count ->
yolo3.training.tuning.tune."""
from __future__ import annotations

import argparse
from typing import List, Optional

from yolo3.cli.common import run_command
from yolo3.cli.flags import InputPath, Number
from yolo3.cli.train import add_arguments as add_train_arguments
from yolo3.cli.train import config_from_args

__all__ = ["add_arguments", "run", "main"]

NAME = "tune"
DESCRIPTION = ("Search the training settings (Optuna, SQLite storage): each trial a training run "
               "in --output/trial-NNNN, pruned on its per-epoch validation mAP; the best "
               "trial's settings in --output/best.yaml, for yolo3 train --settings.")
TRIALS = Number(int, 1, 10_000)


def add_arguments(p: argparse.ArgumentParser) -> None:
    s = p.add_argument_group("search")
    s.add_argument("--space", default=None, type=InputPath(text=True), metavar="FILE",
                   help="the search space, a YAML file: 'name: {low: L, high: H, log: true}' or "
                   "'name: {choices: [...]}' per setting (default: lr, weight_decay, mosaic, "
                   "box_gain and class_gain around the recipe's defaults; docs/guide.md)")
    s.add_argument("--trials", type=TRIALS, default=20, metavar="N", help="trials to finish or "
                   "prune, counting those of a resumed study (default %(default)s)")
    add_train_arguments(p, output_help="the study folder: study.db (Optuna), trial-NNNN/ (each "
                        "trial's run), trials.csv, best.yaml", resume_help="go on with the study "
                        "in --output (a trial cut short runs again)")


def run(args: argparse.Namespace) -> int:
    from yolo3.config.search_space import read_search_space
    from yolo3.config.train_config import check
    from yolo3.core.extras import require
    optuna = require("optuna", "yolo3 tune")
    # yolo3 says each trial itself, and a failure once, without Optuna's traceback
    optuna.logging.set_verbosity(optuna.logging.ERROR)
    config = config_from_args(args)
    check(config)  # the base settings, before a backend is imported
    space = read_search_space(args.space) if args.space else None
    from yolo3.training.tuning import tune
    result = tune(config, space, args.trials, args.output_dir, resume=args.resume,
                  exist_ok=args.exist_ok)
    counts = f"{result.finished} finished, {result.pruned} pruned, {result.failed} failed"
    if result.best_file is None:
        print(f"yolo3 tune: {counts}; no trial finished, so there is no best")
        return 1
    print(f"yolo3 tune: {counts}; best: trial {result.best_trial}, validation mAP@0.5:0.95 "
          f"{result.best_value:.4f}; its settings: {result.best_file} (yolo3 train --settings "
          f"{result.best_file} --output RUN)")
    return 0


def main(argv: Optional[List[str]] = None) -> int:
    """Parse ``argv`` and tune. 0 with a best trial, 1 without one, 2 on a bad argument."""
    return run_command(NAME, DESCRIPTION, add_arguments, run, argv)


if __name__ == "__main__":
    raise SystemExit(main())
