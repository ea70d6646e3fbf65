"""``yolo3 evaluate-tracks`` (``yolo3-evaluate-tracks``): score tracks against MOT-layout ground
truth by HOTA, IDF1 and MOTA (TrackEval, :mod:`yolo3.evaluation.tracking`).

    yolo3 evaluate-tracks --gt data/seq01/gt/gt.txt --tracks runs/track/seq01.txt
    yolo3 evaluate-tracks --gt data --tracks runs/track      # every sequence, and combined

``--gt`` is a ground-truth file, a MOT sequence folder (``gt/gt.txt`` inside) or a folder of
sequences; ``--tracks`` is a tracks file, or a folder holding ``SEQUENCE.txt`` per sequence (what
``yolo3 track`` writes). A sequence's length comes from its ``seqinfo.ini`` where there is one.
"""
from __future__ import annotations

import argparse
import configparser
import json
import os
import sys
from typing import List, Optional, Sequence, Tuple

from yolo3.cli.common import run_command
from yolo3.cli.flags import InputPath, OutputPath

NAME = "evaluate-tracks"
DESCRIPTION = ("Score tracks against MOT-layout ground truth: HOTA, IDF1, MOTA, ID switches, "
               "fragmentations (TrackEval).")


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--gt", required=True, type=InputPath("any"),
                   help="ground truth: a MOT-layout file, a sequence folder (gt/gt.txt) or a "
                        "folder of sequences")
    p.add_argument("--tracks", required=True, type=InputPath("any"),
                   help="tracks: a MOT-layout file, or a folder of SEQUENCE.txt files")
    p.add_argument("--json", type=OutputPath("file", format="json"),
                   help="also write the scores, per sequence and combined, to this JSON file")


def _length(sequence: str) -> Optional[int]:
    """``seqLength`` of a sequence folder's ``seqinfo.ini`` (None when there is none)."""
    path = os.path.join(sequence, "seqinfo.ini")
    if not os.path.isfile(path):
        return None
    info = configparser.ConfigParser()
    try:
        info.read(path, encoding="utf-8")
        return int(info["Sequence"]["seqLength"])
    except (configparser.Error, KeyError, ValueError):
        from yolo3.core.errors import FileFormatError
        raise FileFormatError(path, "no whole seqLength in its [Sequence] section") from None


def pairs(gt: str, tracks: str) -> List[Tuple[str, str, str, Optional[int]]]:
    """``(name, gt file, tracks file, length)`` of each sequence to score."""
    from yolo3.core.errors import ArgumentError
    if os.path.isfile(gt):
        if not os.path.isfile(tracks):
            raise ArgumentError(f"--tracks {tracks}: --gt names one file, so --tracks must too")
        return [(os.path.splitext(os.path.basename(tracks))[0], gt, tracks, None)]
    if os.path.isfile(os.path.join(gt, "gt", "gt.txt")):
        sequences = [gt]
    else:
        sequences = sorted(os.path.join(gt, n) for n in os.listdir(gt)
                           if os.path.isfile(os.path.join(gt, n, "gt", "gt.txt")))
        if not sequences:
            raise ArgumentError(f"--gt {gt}: no ground truth (a MOT file, a folder with "
                                "gt/gt.txt, or a folder of such folders)")
    out = []
    for sequence in sequences:
        name = os.path.basename(os.path.normpath(sequence))
        found = tracks if os.path.isfile(tracks) else os.path.join(tracks, f"{name}.txt")
        if not os.path.isfile(found):
            raise ArgumentError(f"--tracks {tracks}: no {name}.txt for the sequence {sequence}")
        out.append((name, os.path.join(sequence, "gt", "gt.txt"), found, _length(sequence)))
    return out


def format_scores(rows: Sequence[Tuple[str, dict]]) -> str:
    """A Markdown table: one row per sequence (and the combined row)."""
    from yolo3.evaluation.tracking import TRACK_METRICS
    lines = ["| sequence | " + " | ".join(TRACK_METRICS) + " |",
             "|---" * (len(TRACK_METRICS) + 1) + "|"]
    for name, scores in rows:
        cells = [f"{scores[k]:.3f}" if isinstance(scores[k], float) else str(scores[k])
                 for k in TRACK_METRICS]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    from yolo3.core.fileio import write_text_atomic
    from yolo3.data.mot import read_mot
    from yolo3.evaluation.tracking import score_sequences

    found = pairs(args.gt, args.tracks)
    loaded = [(name, read_mot(g), read_mot(t), n) for name, g, t, n in found]  # refused now
    each, combined = score_sequences([(g, t, n) for _, g, t, n in loaded])
    rows = [(name, scores) for (name, *_), scores in zip(loaded, each)]
    if len(rows) > 1:
        rows.append(("combined", combined))
    print(format_scores(rows))
    if args.json:
        write_text_atomic(args.json, json.dumps({name: s for name, s in rows}, indent=1))
        print(f"scores in {args.json}", file=sys.stderr)
    return 0


def main(argv: Optional[Sequence[str]] = None) -> int:
    return run_command(NAME, DESCRIPTION, add_arguments, run, argv)


if __name__ == "__main__":
    sys.exit(main())
