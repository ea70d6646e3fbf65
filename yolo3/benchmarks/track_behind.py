"""``yolo3 benchmark track`` behind real detectors (``--train-epochs`` or ``--detectors``).

    yolo3 benchmark track --train-epochs 2 5 15 [--seeds 0 1] [--sequences 2] [--frames 300]
                          [--peer-python PEER/bin/python] [--json track.json]

Each detector (tiny-af trained from scratch for each of ``--train-epochs`` on stills of other
sequences, :mod:`yolo3.benchmarks.track_detectors`, or the ``--detectors`` models) runs over
every frame of the held-out sequences (half with a moving camera, half with a still one), once
per distinct threshold. Every tracker gets that detector's boxes at its own default threshold:
yolo3's trackers
:data:`yolo3.inference.tracking.DETECTION_SCORE` (what ``yolo3 track`` hands them), Ultralytics'
ByteTrack and BoT-SORT :data:`PEER_SCORE` (what its ``model.track`` hands them), each tracker
with its own defaults. All are scored by the same TrackEval call, per detector, the sequences
pooled. ``yolo3 track`` itself is run end to end on one sequence behind the first detector, and
its tracks are compared with the benchmark's default row there. Time: each tracker's
per-frame time (detections in, tracks out) against the detector's per-frame time (the frame
read, decoded, detected), start-up excluded from both (the detector's first frames untimed).
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from typing import Dict, List, Sequence, Tuple

import numpy as np

from yolo3.benchmarks.track_runs import peer_tracks, tracked
from yolo3.benchmarks.track_detectors import detect_frames, train_detector, write_stills
from yolo3.core.fileio import write_text_atomic
from yolo3.data.mot import MotTracks, read_mot
from yolo3.data.synthetic_video import make_video_sequence
from yolo3.evaluation.metrics import evaluate_detections
from yolo3.evaluation.track_scores import combine_track_metrics
from yolo3.inference.tracking import DETECTION_SCORE

__all__ = ["PEER_SCORE", "run_behind_detectors", "end_to_end_difference"]

PEER_SCORE = 0.1  # Ultralytics' model.track() hands its trackers detections down to 0.1
TRAIN_SEEDS = 5000  # the training stills' sequences: seeds from here, never a tracked one's
DEFAULT_TRACKER = "bytetrack"


@dataclass
class HeldOut:
    """One tracked sequence: its name, camera (``moving`` or ``still``), ground truth and frames."""

    name: str
    camera: str
    gt: MotTracks
    frames: List[str]


def _held_out(work: str, args: argparse.Namespace) -> List[HeldOut]:
    frame_hw = (int(args.size[0]), int(args.size[1]))
    out = []
    for seed in args.seeds:
        for k in range(args.sequences):
            moving = k % 2 == 0
            folder = os.path.join(work, f"s{seed}_{k}")
            make_video_sequence(folder, args.frames, frame_hw, args.objects, seed * 1000 + k,
                                args.style, args.photos, pan=moving)
            out.append(HeldOut(os.path.basename(folder), "moving" if moving else "still",
                               read_mot(os.path.join(folder, "gt", "gt.txt")),
                               [os.path.join(folder, "img1", f"{t:06d}.jpg")
                                for t in range(1, args.frames + 1)]))
    return out


def _detectors(work: str, args: argparse.Namespace) -> List[Tuple[str, str]]:
    """``(label, model path)`` of each detector, trained here for ``--train-epochs``."""
    if args.detectors:
        return [(p, p) for p in args.detectors]
    frame_hw = (int(args.size[0]), int(args.size[1]))
    stills_dir = os.path.join(work, "stills")
    os.makedirs(stills_dir)
    count = args.train_sequences
    stills = write_stills(stills_dir, range(TRAIN_SEEDS, TRAIN_SEEDS + count),
                          range(TRAIN_SEEDS + 100, TRAIN_SEEDS + 102), args.train_frames,
                          frame_hw, args.objects, args.style, args.photos, every=3)
    print(f"training stills: {stills.images} images, {stills.boxes} boxes from {count} "
          f"sequences (seeds {TRAIN_SEEDS}-{TRAIN_SEEDS + count - 1}), every 3rd frame",
          flush=True)
    runs = args.train_output or os.path.join(work, "detectors")
    out = []
    for epochs in args.train_epochs:
        start = time.perf_counter()
        path = train_detector(stills, epochs, args.train_size,
                              os.path.join(runs, f"tiny-af-e{epochs}"),
                              exist_ok=args.exist_ok)
        print(f"tiny-af, {epochs} epochs at {args.train_size} px: trained in "
              f"{time.perf_counter() - start:.0f} s ({path})", flush=True)
        out.append((f"tiny-af {epochs} epochs", path))
    return out


def _detection_quality(sequences: Sequence[HeldOut], detections: Sequence[list]) -> dict:
    """The detector's mAP over every tracked frame (its boxes at the trackers' threshold),
    against the boxes a detector can find (the considered ground truth)."""
    gt, dets = {}, {}
    for seq, per_frame in zip(sequences, detections):
        for t, found in enumerate(per_frame, 1):
            truth = seq.gt.frame(t)
            keep = truth.scores > 0
            gt[(seq.name, t)] = np.concatenate([truth.boxes[keep],
                                                truth.classes[keep, None]], axis=1)
            dets[(seq.name, t)] = found
    result = evaluate_detections(gt, dets, int(max(s.gt.classes.max() for s in sequences)) + 1,
                                 by_size=False)
    return {"mAP50": result["mAP50"], "mAP50_95": result["mAP50_95"]}


def end_to_end_difference(model: str, sequence: HeldOut, tracks: MotTracks, work: str
                          ) -> Tuple[int, int, float]:
    """Run ``yolo3 track`` (its defaults, no video) on ``sequence``'s frames; ``(its boxes,
    the boxes that differ from ``tracks`` in frame or ID, the largest corner difference in
    px among the rest)``."""
    output = os.path.join(work, "end_to_end")
    command = [sys.executable, "-m", "yolo3", "track", "--model", model, "--input",
               os.path.dirname(sequence.frames[0]), "--output", output, "--no-draw", "--quiet"]
    proc = subprocess.run(command, capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"yolo3 track failed (exit {proc.returncode}):\n{proc.stderr[-2000:]}")
    theirs = read_mot(os.path.join(output, f"{sequence.name}.txt"))
    ours = {(int(f), int(i)): b for f, i, b in zip(tracks.frames, tracks.ids, tracks.boxes)}
    cli = {(int(f), int(i)): b for f, i, b in zip(theirs.frames, theirs.ids, theirs.boxes)}
    shared = set(ours) & set(cli)
    differ = len(set(ours) ^ set(cli))
    largest = max((float(np.abs(ours[k] - cli[k]).max()) for k in shared), default=0.0)
    return len(cli), differ, largest


def run_behind_detectors(args: argparse.Namespace) -> int:
    names = list(args.trackers)
    report: Dict[str, dict] = {}
    with tempfile.TemporaryDirectory() as work:
        detectors = _detectors(work, args)
        sequences = _held_out(work, args)
        print(f"held-out sequences: {len(sequences)} ({', '.join(s.camera for s in sequences)} "
              f"camera), {args.frames} frames each", flush=True)
        total_frames = len(sequences) * args.frames
        for d, (label, model) in enumerate(detectors):
            runs_at = [detect_frames(model, s.frames, DETECTION_SCORE) for s in sequences]
            ours = [found for found, _ in runs_at]
            detect_ms = float(np.mean([ms for _, ms in runs_at]))
            theirs = ours if PEER_SCORE == DETECTION_SCORE else [
                detect_frames(model, s.frames, PEER_SCORE)[0] for s in sequences]
            results: Dict[str, list] = {}
            times: Dict[str, float] = {}
            for seq, found, peer_found in zip(sequences, ours, theirs):
                runs = {n: tracked(n, found, seq.frames) for n in names}
                if args.peer_python:
                    runs.update(peer_tracks(args.peer_python, peer_found, seq.frames, work))
                for n, (tracks, seconds) in runs.items():
                    results.setdefault(n, []).append((seq.gt, tracks, args.frames))
                    times[n] = times.get(n, 0.0) + seconds
                if d == 0 and seq is sequences[0] and DEFAULT_TRACKER in runs:
                    e2e = end_to_end_difference(model, seq, runs[DEFAULT_TRACKER][0], work)
            table = {}
            cameras = [s.camera for s in sequences]  # every tracker's pairs are in this order
            for n, pairs in results.items():
                ms = times[n] / total_frames * 1e3
                by_camera = {f"HOTA_{c}": combine_track_metrics(
                    [p for p, k in zip(pairs, cameras) if k == c])["HOTA"]
                    for c in ("moving", "still") if c in cameras}
                table[n] = {**combine_track_metrics(pairs), **by_camera, "ms_per_frame": ms,
                            "share_of_detection": ms / detect_ms}
            report[label] = {"model": model, "detect_ms": detect_ms,
                             "quality": _detection_quality(sequences, ours),
                             "trackers": table}
            _print_detector(label, report[label])
    if DEFAULT_TRACKER in names:
        count, differ, largest = e2e
        report_e2e = {"boxes": count, "differing": differ, "largest_px": largest}
        print(f"\n`yolo3 track` end to end on {sequences[0].name} behind {detectors[0][0]}: "
              f"{count} tracked boxes, {differ} differing in frame or ID from the benchmark's "
              f"{DEFAULT_TRACKER} row, corners within {largest:.3f} px", flush=True)
    else:
        report_e2e = None
    _print_targets(report)
    if args.json:
        write_text_atomic(args.json, json.dumps({"detectors": report, "end_to_end": report_e2e,
                                                 "settings": _settings(args)}, indent=1))
    return 0


def _settings(args: argparse.Namespace) -> dict:
    keys = ("sequences", "seeds", "frames", "size", "objects", "style", "train_epochs",
            "train_size", "train_sequences", "train_frames", "detectors")
    return {k: getattr(args, k) for k in keys}


def _print_detector(label: str, entry: dict) -> None:
    q = entry["quality"]
    print(f"\n{label}: mAP@0.5 {q['mAP50']:.3f}, mAP@0.5:0.95 {q['mAP50_95']:.3f} on the tracked "
          f"frames; detect {entry['detect_ms']:.1f} ms/frame (decoded, detected)\n")
    print("| tracker | HOTA | DetA | AssA | IDF1 | MOTA | ID switches | HOTA moving / still "
          "camera | ms/frame | share of detection |")
    print("|---" * 10 + "|")
    for n, row in sorted(entry["trackers"].items(), key=lambda kv: -kv[1]["HOTA"]):
        split = " / ".join(f"{row[k]:.3f}" if k in row else "-"
                           for k in ("HOTA_moving", "HOTA_still"))
        print(f"| {n} | {row['HOTA']:.3f} | {row['DetA']:.3f} | {row['AssA']:.3f} | "
              f"{row['IDF1']:.3f} | {row['MOTA']:.3f} | {row['IDSW']} | {split} | "
              f"{row['ms_per_frame']:.2f} | {100 * row['share_of_detection']:.1f}% |")
    sys.stdout.flush()


def _print_targets(report: Dict[str, dict]) -> None:
    """yolo3's default tracker against the better Ultralytics tracker, per detector."""
    lines = []
    for label, entry in report.items():
        table = entry["trackers"]
        peers = [n for n in table if n.startswith("ultralytics")]
        if DEFAULT_TRACKER not in table or not peers:
            continue
        ours = table[DEFAULT_TRACKER]
        best = {k: max(table[p][k] for p in peers) for k in ("HOTA", "IDF1", "MOTA")}
        met = (ours["HOTA"] >= best["HOTA"] and ours["IDF1"] >= best["IDF1"]
               and ours["MOTA"] >= best["MOTA"] - 0.02)
        lines.append(f"| {label} | {ours['HOTA']:.3f} / {best['HOTA']:.3f} | "
                     f"{ours['IDF1']:.3f} / {best['IDF1']:.3f} | "
                     f"{ours['MOTA'] - best['MOTA']:+.3f} | {'yes' if met else 'no'} |")
    if lines:
        print(f"\nyolo3 {DEFAULT_TRACKER} (the default) against the better of Ultralytics' two:\n")
        print("| detector | HOTA ours / theirs | IDF1 ours / theirs | MOTA difference | "
              "target met |")
        print("|---" * 5 + "|")
        print("\n".join(lines))
        sys.stdout.flush()
