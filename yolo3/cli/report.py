"""``yolo3 report`` (``yolo3-report``, ``tools/report.py``): one self-contained HTML page of a
training run or of an evaluation.

    yolo3 report RUN_FOLDER                 -> RUN_FOLDER/report.html
    yolo3 report results.json               -> results_report.html (beside yolo3 evaluate's JSON)
    yolo3 report RUN_FOLDER --out page.html

The page opens from the file system with nothing from elsewhere (:mod:`yolo3.evaluation.report`).
Training writes it at the end of every run; ``yolo3 evaluate --report`` beside its JSON.
"""
from __future__ import annotations

import argparse
import os
import sys
from typing import Optional, Sequence

from yolo3.cli.common import run_command
from yolo3.cli.flags import InputPath, OutputPath

NAME = "report"
DESCRIPTION = ("Write one self-contained HTML page (report.html) of a training run folder or of "
               "yolo3 evaluate's JSON: figures, settings, curves, the per-class table, the error "
               "breakdown, the galleries.")


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("source", type=InputPath("any"), metavar="RUN_OR_EVAL",
                   help="a training run's folder (yolo3 train --output) or the JSON yolo3 "
                        "evaluate --out wrote")
    p.add_argument("--out", type=OutputPath("file", format="html"), default=None,
                   help="the page to write (default: RUN/report.html, or <json stem>_report.html "
                        "beside the JSON)")


def default_report_path(source: str) -> str:
    """Where the page goes without ``--out``."""
    from yolo3.evaluation.report import REPORT
    if os.path.isdir(source):
        return os.path.join(source, REPORT)
    return f"{os.path.splitext(source)[0]}_report.html"


def run(args: argparse.Namespace) -> int:
    from yolo3.core.errors import ArgumentError
    from yolo3.core.fileio import write_text_atomic
    from yolo3.core.output_folder import check_side_files
    from yolo3.core.paths import check_outputs
    from yolo3.evaluation.report import run_report
    source = args.source
    if os.path.isdir(source):
        if not any(os.path.exists(os.path.join(source, name)) for name in
                   ("history.csv", "run.json", "diagnostics")):
            raise ArgumentError(f"{source}: not a training run's folder (no history.csv, "
                                "run.json or diagnostics/)")
    elif not source.lower().endswith(".json"):
        raise ArgumentError(f"{source}: expected a training run's folder or yolo3 evaluate's "
                            "JSON")
    out = args.out or default_report_path(source)
    run_folder = None
    if args.out is not None or not os.path.isdir(source):
        check_outputs([("--out", out)], [source])
    if args.out is None and os.path.isdir(source):
        # into the run's own folder: through its manifest, so that the run stays all yolo3's (a
        # later --resume) and a report.html of the user's there is refused
        from yolo3.core.output_folder import OutputFolder
        from yolo3.evaluation.report import REPORT
        run_folder = OutputFolder(source, "RUN_OR_EVAL", exist_ok=True, writes=(REPORT,))
    elif args.out is None:  # beside the JSON, a file the user did not name: never over theirs
        check_side_files([out], "RUN_OR_EVAL", "give --out")
    page = run_report(source) if os.path.isdir(source) else _evaluation_page(source)
    if run_folder is not None:
        with run_folder:
            run_folder.write_text(os.path.basename(out), page)
    else:
        write_text_atomic(out, page)
    print(f"report: {out} ({os.path.getsize(out) / 1e6:.1f} MB)")
    return 0


def _evaluation_page(path: str) -> str:
    from yolo3.core.errors import FileFormatError
    from yolo3.core.fileio import read_json
    from yolo3.evaluation.report import evaluation_report
    figures = read_json(path, "evaluation")
    if not isinstance(figures, dict) or "per_class" not in figures:
        raise FileFormatError(path, "not the JSON yolo3 evaluate --out writes (no per_class)")
    return evaluation_report(path, figures)


def main(argv: Optional[Sequence[str]] = None) -> int:
    return run_command(NAME, DESCRIPTION, add_arguments, run, argv)


if __name__ == "__main__":
    sys.exit(main())
