"""What the benchmarks that run the peer (Ultralytics, in its own environment) share: the data it
trains on in the YOLO layout, the command of its driver (:mod:`yolo3.benchmarks.ultralytics_peer`),
and its detections scored by our COCO code."""
from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass
from typing import Dict, List, Sequence

import numpy as np

from yolo3.core.fileio import read_json
from yolo3.data.annotations import Record, load_annotations
from yolo3.data.class_names import read_classes
from yolo3.data.yolo_layout import write_yolo_layout
from yolo3.evaluation.metrics import evaluate_detections

__all__ = ["PeerData", "peer_data", "run_peer", "score_peer_detections"]


@dataclass
class PeerData:
    """A dataset folder (train.txt, val.txt, classes.txt) as the peer reads it: its data.yaml,
    the list of validation images, the class names and the validation records."""

    yaml_path: str
    val_list: str
    names: List[str]
    val: List[Record]


def peer_data(data: str, folder: str) -> PeerData:
    """Write ``data`` in the YOLO layout under ``folder`` (``yolo/``) and the list of its
    validation images (``val_images.txt``)."""
    names = read_classes(os.path.join(data, "classes.txt"))
    train = load_annotations(os.path.join(data, "train.txt"), names)
    val = load_annotations(os.path.join(data, "val.txt"), names)
    yaml_path = write_yolo_layout(os.path.join(folder, "yolo"), {"train": train, "val": val}, names)
    val_list = os.path.join(folder, "val_images.txt")
    with open(val_list, "w", encoding="utf-8") as f:
        f.write("".join(r.path + "\n" for r in val))
    return PeerData(yaml_path, val_list, names, val)


def run_peer(python: str, data: PeerData, out: str, threads: int, options: Sequence[str],
             cwd: str) -> Dict[str, object]:
    """The peer's driver under ``python`` (offline, ``threads`` threads) with ``options``; its
    facts (``peer.json``). RuntimeError with the end of its stderr when it fails."""
    driver = os.path.join(os.path.dirname(os.path.abspath(__file__)), "ultralytics_peer.py")
    command = [python, driver, "--data", data.yaml_path, "--val-list", data.val_list,
               "--threads", str(threads), "--out", out, *options]
    env = dict(os.environ, YOLO_OFFLINE="1", OMP_NUM_THREADS=str(threads))
    proc = subprocess.run(command, capture_output=True, text=True, env=env, cwd=cwd)
    if proc.returncode != 0:
        raise RuntimeError(f"the peer failed (exit {proc.returncode}):\n{proc.stderr[-3000:]}")
    return read_json(os.path.join(out, "peer.json"), "the peer's results")


def score_peer_detections(path: str, data: PeerData) -> dict:
    """COCO figures of the peer's detection JSON ``path`` on the validation records."""
    by_path = {d["image"]: d for d in read_json(path, "the peer's detections")}
    gt, dets = {}, {}
    for k, record in enumerate(data.val):
        d = by_path[record.path]
        gt[k] = np.asarray(record.boxes, np.float64).reshape(-1, 5)
        dets[k] = (np.asarray(d["boxes"], np.float64).reshape(-1, 4),
                   np.asarray(d["scores"], np.float64), np.asarray(d["classes"], np.int64))
    return evaluate_detections(gt, dets, len(data.names), data.names)
