"""``yolo3 evaluate-tracks`` (``yolo3-evaluate-tracks``): score tracks against MOT-layout ground
truth by HOTA, IDF1 and MOTA (TrackEval, :mod:`yolo3.evaluation.track_scores`).

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

from yolo3.cli.common import run_command, warn
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
    from yolo3.core.errors import FileFormatError
    from yolo3.core.limits import beyond_limit
    path = os.path.join(sequence, "seqinfo.ini")
    if not os.path.isfile(path):
        return None
    info = configparser.ConfigParser()
    try:
        info.read(path, encoding="utf-8")
        length = int(info["Sequence"]["seqLength"])
    except (configparser.Error, KeyError, ValueError, UnicodeDecodeError):
        raise FileFormatError(path, "no whole seqLength in its [Sequence] section") from None
    if length < 1:
        raise FileFormatError(path, f"seqLength {length}: a sequence has 1 frame or more")
    too_long = beyond_limit("frame", length, "seqLength")
    if too_long:
        raise FileFormatError(path, too_long)
    return length


def pairs(gt: str, tracks: str, left_out: Optional[List[str]] = None
          ) -> List[Tuple[str, str, str, Optional[int]]]:
    """``(name, gt file, tracks file, length)`` of each sequence to score; what is not scored
    (a folder of ``--gt`` without ground truth, a tracks file of no sequence) is said in
    ``left_out``."""
    from yolo3.core.errors import ArgumentError
    left_out = [] if left_out is None else left_out
    if os.path.isfile(gt):
        if not os.path.isfile(tracks):
            raise ArgumentError(f"--tracks {tracks}: --gt names one file, so --tracks must too")
        return [(os.path.splitext(os.path.basename(tracks))[0], gt, tracks, None)]
    if os.path.isfile(os.path.join(gt, "gt", "gt.txt")):
        sequences = [gt]
    else:
        folders = sorted(n for n in os.listdir(gt) if os.path.isdir(os.path.join(gt, n)))
        sequences = [os.path.join(gt, n) for n in folders
                     if os.path.isfile(os.path.join(gt, n, "gt", "gt.txt"))]
        if not sequences:
            raise ArgumentError(f"--gt {gt}: no ground truth (a MOT file, a folder with "
                                "gt/gt.txt, or a folder of such folders)")
        without = [n for n in folders if not os.path.isfile(os.path.join(gt, n, "gt", "gt.txt"))]
        if without:
            left_out.append(f"--gt {gt}: {len(without)} folders without gt/gt.txt are not scored "
                            f"(first: {without[0]})")
    out = []
    for sequence in sequences:
        name = os.path.basename(os.path.normpath(sequence))
        found = tracks if os.path.isfile(tracks) else os.path.join(tracks, f"{name}.txt")
        if not os.path.isfile(found):
            raise ArgumentError(f"--tracks {tracks}: no {name}.txt for the sequence {sequence}")
        out.append((name, os.path.join(sequence, "gt", "gt.txt"), found, _length(sequence)))
    if os.path.isdir(tracks):
        names = {name for name, *_ in out}
        stray = sorted(f for f in os.listdir(tracks)
                       if f.endswith(".txt") and f[:-4] not in names)
        if stray:
            left_out.append(f"--tracks {tracks}: {len(stray)} tracks files of no sequence in "
                            f"--gt are not scored (first: {stray[0]})")
    return out


def beyond_length(name: str, tracks_file: str, tracks, length: Optional[int]) -> Optional[str]:
    """What a sequence's tracks hold beyond its ``length`` frames (seqinfo.ini), which the scores
    leave out, or None."""
    if length is None or not len(tracks) or tracks.num_frames <= length:
        return None
    count = int((tracks.frames > length).sum())
    return (f"{tracks_file}: {count} boxes in frames after the sequence's {length} "
            f"(seqinfo.ini of {name}) are not scored (the last: frame {tracks.num_frames})")


def format_scores(rows: Sequence[Tuple[str, dict]]) -> str:
    """A Markdown table: one row per sequence (and the combined row)."""
    from yolo3.evaluation.track_scores import TRACK_METRICS
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
    from yolo3.evaluation.track_scores import score_sequences

    left_out: List[str] = []
    found = pairs(args.gt, args.tracks, left_out)
    loaded = [(name, read_mot(g), read_mot(t), n) for name, g, t, n in found]  # refused now
    for (name, g_file, t_file, n), (_, gt, pred, _) in zip(found, loaded):
        left_out += [note for note in (beyond_length(name, g_file, gt, n),
                                       beyond_length(name, t_file, pred, n)) if note]
    for note in left_out:
        warn(NAME, note)
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
