"""Trackers side by side on identical detections: ``yolo3 benchmark track``.

    yolo3 benchmark track [--sequences 3] [--seeds 0 1] [--frames 300] [--style photo]
                          [--peer-python PEER/bin/python] [--json track.json]

Each synthetic sequence (:mod:`yolo3.data.synthetic_video`: objects moving, crossing, hiding each
other, leaving and coming back, the camera panning) gets one set of detections, made from its
ground truth the way a detector errs: boxes missed (``--miss``), their corners jittered by a share
of their size (``--jitter``), scores spread around 0.75, and false positives of low score
(``--false-positives`` per frame). Every tracker gets exactly those detections, frame by frame:
yolo3's (Roboflow's ``trackers``: ByteTrack, BoT-SORT, OC-SORT, SORT, through
:class:`yolo3.inference.tracking.Tracker`) and, with ``--peer-python`` (an environment with
Ultralytics), Ultralytics' ByteTrack and BoT-SORT with their default settings
(:mod:`yolo3.benchmarks.ultralytics_track_peer`). All are scored by the same call
(:func:`yolo3.evaluation.track_scores.combine_track_metrics`, TrackEval) and timed per frame; the
time is also given as a share of detection's: tiny-af's ``detect`` on one ``--size`` frame on
this CPU, measured in the same run. Printed: one row per tracker, the sequences (and seeds)
pooled, and each tracker's ratio against the best peer tracker.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from typing import Dict, List, Tuple

import numpy as np

from yolo3.benchmarks.machine import machine_line, matmul_peak_gflops
from yolo3.benchmarks.track_behind import run_behind_detectors
from yolo3.benchmarks.track_runs import Detections, peer_tracks, tracked
from yolo3.checkpoint.metadata import ModelInfo
from yolo3.checkpoint.saving import atomic_save_model
from yolo3.config.specs import get_spec
from yolo3.core.fileio import write_text_atomic
from yolo3.data.mot import MotTracks, read_mot
from yolo3.data.synthetic_video import make_video_sequence
from yolo3.evaluation.track_scores import combine_track_metrics
from yolo3.inference.detector import load_detector
from yolo3.modeling.bodies import build_body

__all__ = ["noisy_detections", "run"]

def noisy_detections(rows: np.ndarray, rng: np.random.Generator, frame_hw: Tuple[int, int],
                     miss: float, jitter: float, false_positives: float) -> Detections:
    """A detector's errors on one frame's ground truth ``rows`` (``id, x1, y1, x2, y2, class,
    visibility, considered``): ``(boxes (N, 4), scores (N,), classes (N,))``. Only considered
    boxes are found; each is missed with probability ``miss``; corners move by a normal share
    ``jitter`` of the box's size; scores ~ N(0.75, 0.15) clipped to [0.05, 1]; false positives
    (Poisson ``false_positives`` per frame) are 10-40 px boxes scoring 0.05-0.5."""
    found = rows[rows[:, 7] > 0]
    found = found[rng.uniform(size=len(found)) >= miss]
    boxes = found[:, 1:5].copy()
    wh = boxes[:, 2:] - boxes[:, :2]
    boxes += rng.normal(0.0, jitter, boxes.shape) * np.concatenate([wh, wh], axis=1)
    scores = np.clip(rng.normal(0.75, 0.15, len(found)), 0.05, 1.0)
    n = int(rng.poisson(false_positives))
    h, w = frame_hw
    corner = np.stack([rng.uniform(0, w - 40, n), rng.uniform(0, h - 40, n)], axis=1)
    fp = np.concatenate([corner, corner + rng.uniform(10, 40, (n, 2))], axis=1)
    return (np.concatenate([boxes, fp.reshape(-1, 4)]).astype(np.float32),
            np.concatenate([scores, rng.uniform(0.05, 0.5, n)]).astype(np.float32),
            np.concatenate([found[:, 5], np.zeros(n)]).astype(np.int64))


def _detector_rows(truth: MotTracks) -> np.ndarray:
    """One frame's ground truth as :func:`noisy_detections` reads it: ``id, x1, y1, x2, y2,
    class, visibility (1), considered``."""
    return np.concatenate([truth.ids[:, None], truth.boxes, truth.classes[:, None],
                           np.ones((len(truth), 1)), truth.scores[:, None]], axis=1)


def detection_ms(frame_hw: Tuple[int, int], repeats: int = 10) -> Tuple[float, str]:
    """``(ms, engine)``: tiny-af-416's ``detect`` on one ``frame_hw`` frame on this CPU, through
    the engine ``yolo3 track`` picks by default (weights random: the work is the same)."""
    import keras

    keras.utils.set_random_seed(0)
    spec = get_spec("tiny-af")
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "tiny-af.keras")
        atomic_save_model(build_body("tiny-af", 4), path,
                          ModelInfo.of_head(spec.head, 4, variant="tiny-af",
                                            input_size=(416, 416)))
        detector = load_detector(path, score=0.1)
        frame = np.random.default_rng(0).integers(0, 255, (*frame_hw, 3), dtype=np.uint8)
        for _ in range(3):
            detector.detect(frame)
        start = time.perf_counter()
        for _ in range(repeats):
            detector.detect(frame)
        return ((time.perf_counter() - start) / repeats * 1e3,
                detector.engine.summary().split(" (")[0])


def run(args: argparse.Namespace) -> int:
    print(machine_line(matmul_peak_gflops()), flush=True)
    if args.detectors or args.train_epochs:
        return run_behind_detectors(args)
    frame_hw = (int(args.size[0]), int(args.size[1]))
    names = list(args.trackers)
    results: Dict[str, list] = {}
    times: Dict[str, List[float]] = {}
    total_frames = 0
    with tempfile.TemporaryDirectory() as work:
        for seed in args.seeds:
            for k in range(args.sequences):
                sequence = os.path.join(work, f"s{seed}_{k}")
                make_video_sequence(sequence, args.frames, frame_hw, args.objects,
                                    seed * 1000 + k, args.style, args.photos)
                gt = read_mot(os.path.join(sequence, "gt", "gt.txt"))
                rows = [_detector_rows(gt.frame(t)) for t in range(1, args.frames + 1)]
                frames = [os.path.join(sequence, "img1", f"{t:06d}.jpg")
                          for t in range(1, args.frames + 1)]
                rng = np.random.default_rng(seed * 1000 + k + 7)
                detections = [noisy_detections(r, rng, frame_hw, args.miss, args.jitter,
                                               args.false_positives) for r in rows]
                runs = {n: tracked(n, detections, frames) for n in names}
                if args.peer_python:
                    peer = peer_tracks(args.peer_python, detections, frames, sequence)
                    runs.update(peer)
                for n, (tracks, seconds) in runs.items():
                    results.setdefault(n, []).append((gt, tracks, args.frames))
                    times.setdefault(n, []).append(seconds)
                total_frames += args.frames
                print(f"sequence seed {seed} #{k + 1}: {len(set(gt.ids.tolist()))} objects, "
                      f"{len(gt)} boxes, {args.frames} frames", flush=True)
    detect, engine = detection_ms(frame_hw)
    table = {}
    for n, pairs in results.items():
        scores = combine_track_metrics(pairs)
        ms = sum(times[n]) / total_frames * 1e3
        table[n] = {**scores, "ms_per_frame": ms, "share_of_detection": ms / detect}
    _print(table, detect, engine, args)
    if args.json:
        write_text_atomic(args.json, json.dumps({"detection_ms": detect, "engine": engine,
                                                 "trackers": table,
                                                 "settings": _settings(args)}, indent=1))
    return 0


def _settings(args: argparse.Namespace) -> dict:
    return {k: getattr(args, k) for k in ("sequences", "seeds", "frames", "size", "objects",
                                          "style", "miss", "jitter", "false_positives")}


def _print(table: Dict[str, dict], detect: float, engine: str,
           args: argparse.Namespace) -> None:
    peers = [n for n in table if n.startswith("ultralytics")]
    best = max(peers, key=lambda n: table[n]["HOTA"]) if peers else None
    print(f"\n{args.sequences} sequence(s) x {len(args.seeds)} seed(s) of {args.frames} frames "
          f"at {args.size[1]}x{args.size[0]}, {args.style} style; detections from the ground "
          f"truth: miss {args.miss}, jitter {args.jitter}, {args.false_positives} false "
          f"positives per frame; tiny-af-416 detect {detect:.1f} ms/frame on this CPU ({engine})\n")
    print("| tracker | HOTA | IDF1 | MOTA | ID switches | Frag | ms/frame | share of detection |"
          + (f" HOTA / {best}'s | IDF1 / {best}'s |" if best else ""))
    print("|---" * (8 + (2 if best else 0)) + "|")
    for n, row in sorted(table.items(), key=lambda kv: -kv[1]["HOTA"]):
        line = (f"| {n} | {row['HOTA']:.3f} | {row['IDF1']:.3f} | {row['MOTA']:.3f} | "
                f"{row['IDSW']} | {row['Frag']} | {row['ms_per_frame']:.2f} | "
                f"{100 * row['share_of_detection']:.1f}% |")
        if best:
            line += (f" {row['HOTA'] / max(table[best]['HOTA'], 1e-9):.2f}x | "
                     f"{row['IDF1'] / max(table[best]['IDF1'], 1e-9):.2f}x |")
        print(line)
    sys.stdout.flush()
