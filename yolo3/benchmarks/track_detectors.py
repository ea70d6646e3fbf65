"""Real detectors for ``yolo3 benchmark track``: tiny-af trained from scratch on stills of
synthetic sequences the benchmark never tracks, then run over every frame it tracks.

    stills = write_stills(folder, seeds=[5000, 5001], frames=150, ...)   # train.txt, val.txt
    model = train_detector(stills, epochs=6, input_side=320, output=folder + "/e6")
    detections, ms = detect_frames(model, frame_paths, 0.1)   # per frame: boxes, scores, classes

Training runs ``yolo3 train`` in a process of its own (what a user runs; its progress is shown).
Each tracker takes the boxes of a detector run at its own default threshold, as ``yolo3 track``
(or Ultralytics' ``model.track``) runs it. Not one run at a low floor then filtered: bfloat16
scores tie often, and greedy suppression breaks ties by the order of the candidates, which a
lower floor changes (seen: a box scoring 0.1009 kept at 0.1, suppressed by its twin at 0.01).
"""
from __future__ import annotations

import os
import subprocess
import sys
import time
from dataclasses import dataclass
from typing import List, Sequence, Tuple

import numpy as np

from yolo3.core.errors import ArgumentError, CommandFailed
from yolo3.core.fileio import write_text_atomic
from yolo3.data.class_names import write_classes
from yolo3.data.images import load_image
from yolo3.data.mot import read_mot
from yolo3.data.photo_synthetic import PHOTO_CLASSES
from yolo3.data.synthetic_video import make_video_sequence
from yolo3.inference.detector import load_detector

__all__ = ["Stills", "write_stills", "train_detector", "detect_frames"]

Detections = Tuple[np.ndarray, np.ndarray, np.ndarray]
WARM_UP = 5  # frames detected before the clock starts


@dataclass(frozen=True)
class Stills:
    """Annotation files (``path x1,y1,x2,y2,class ...`` rows) of the training stills."""

    train: str
    val: str
    classes: str
    images: int
    boxes: int


def _rows(sequence: str, frames: int, every: int) -> List[str]:
    """One annotation row per ``every``-th frame of a sequence: its considered boxes (those a
    detector can find: at least a quarter visible)."""
    gt = read_mot(os.path.join(sequence, "gt", "gt.txt"))
    rows = []
    for t in range(1, frames + 1, every):
        truth = gt.frame(t)
        boxes = [f"{x1:.0f},{y1:.0f},{x2:.0f},{y2:.0f},{int(c)}"
                 for (x1, y1, x2, y2), c, keep in zip(truth.boxes, truth.classes, truth.scores)
                 if keep > 0 and x2 - x1 >= 2 and y2 - y1 >= 2]
        rows.append(" ".join([os.path.join(sequence, "img1", f"{t:06d}.jpg"), *boxes]))
    return rows


def write_stills(folder: str, seeds: Sequence[int], val_seeds: Sequence[int], frames: int,
                 frame_hw: Tuple[int, int], objects: int, style: str, photos, every: int,
                 ) -> Stills:
    """Render one sequence per seed into ``folder`` (a new folder: the benchmark's own), half of
    them with a still camera, and write ``train.txt`` (every ``every``-th frame of ``seeds``),
    ``val.txt`` (of ``val_seeds``) and ``classes.txt`` there."""
    lines = {"train": [], "val": []}
    for split, group in (("train", seeds), ("val", val_seeds)):
        for k, seed in enumerate(group):
            sequence = os.path.join(folder, f"{split}_{seed}")
            make_video_sequence(sequence, frames, frame_hw, objects, int(seed), style, photos,
                                pan=k % 2 == 0)
            lines[split] += _rows(sequence, frames, every)
    paths = {split: os.path.join(folder, f"{split}.txt") for split in lines}
    for split, rows in lines.items():
        write_text_atomic(paths[split], "\n".join(rows) + "\n")
    classes = os.path.join(folder, "classes.txt")
    write_classes(classes, PHOTO_CLASSES)
    boxes = sum(len(r.split()) - 1 for r in lines["train"])
    return Stills(paths["train"], paths["val"], classes, len(lines["train"]), boxes)


def train_detector(stills: Stills, epochs: int, input_side: int, output: str, seed: int = 0,
                   batch_size: int = 8, exist_ok: bool = False) -> str:
    """``yolo3 train`` tiny-af from scratch on ``stills`` for ``epochs`` (every other setting
    its default) into the run folder ``output`` (``exist_ok``: beside files yolo3 did not write);
    returns its ``final.keras``. Training's refusal (exit 2: its folder holds the user's files)
    is raised as an :class:`ArgumentError` with training's message; another failure as
    :class:`CommandFailed`."""
    command = [sys.executable, "-m", "yolo3", "train", "--variant", "tiny-af",
               "--annotations", stills.train, "--val-annotations", stills.val,
               "--classes", stills.classes, "--input-size", str(input_side),
               "--epochs", str(epochs), "--batch-size", str(batch_size), "--seed", str(seed),
               "--output", output, "--no-pictures", "--quiet", *(["--exist-ok"] * exist_ok)]
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    tail: List[str] = []
    for line in proc.stdout:  # its progress, passed on as it comes
        sys.stderr.write(line)
        tail = (tail + [line])[-20:]
    if proc.wait() == 2:
        raise ArgumentError(f"training the {epochs}-epoch detector was refused: "
                            f"{''.join(tail).strip()}")
    if proc.returncode != 0:
        raise CommandFailed(f"training the {epochs}-epoch detector failed (exit "
                            f"{proc.returncode}): {' '.join(command)}\n{''.join(tail)}")
    return os.path.join(output, "final.keras")


def detect_frames(model: str, frames: Sequence[str], score: float
                  ) -> Tuple[List[Detections], float]:
    """``(detections, ms)``: ``(boxes (N, 4) x1, y1, x2, y2 px, scores (N,), classes (N,))`` of
    every frame (image paths), the detector loaded as ``yolo3 track`` loads it with ``--score
    score``, and the milliseconds a frame took (read, decoded, detected) past the first
    :data:`WARM_UP` frames (start-up excluded: loading, converting, the first runs)."""
    detector = load_detector(model, score=score)
    out = []
    start = time.perf_counter()
    for k, path in enumerate(frames):
        if k == min(WARM_UP, len(frames) - 1):
            start = time.perf_counter()
        boxes, scores, classes = detector.detect(load_image(path))
        out.append((np.asarray(boxes, np.float32).reshape(-1, 4),
                    np.asarray(scores, np.float32).reshape(-1),
                    np.asarray(classes, np.int64).reshape(-1)))
    timed = len(frames) - min(WARM_UP, len(frames) - 1)
    return out, (time.perf_counter() - start) / max(timed, 1) * 1e3
