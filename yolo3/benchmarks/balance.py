"""Rare classes: the balance options against none, on realistic sets where one class is rare.

    yolo3 benchmark balance [--variant tiny-af] [--input-size 192] [--epochs 10]
                            [--num-images 600] [--val-images 150] [--rare-share 0.05]
                            [--sets 2] [--contenders none weights repeat focal] [--json b.json]

Each set: ``yolo3 synth --style photo`` with the last class drawn ``--rare-share`` of the time
(``--class-shares``), its seed ``--seed + k`` for set k, or ``--data`` folders. Each contender
trains in its own process with every default but its option: ``none`` (the default recipe),
``weights`` (``--class-weights auto``), ``repeat`` (``--repeat-threshold 0.5``: images holding the
rare class repeat), ``focal`` (``--focal-gamma 2``); the trained models are scored on the held-out
images. Printed per set and contender: the rare class's AP@0.5:0.95 and the mean mAP@0.5:0.95,
with their change against ``none``. The target: the default raises the rare class's AP by at
least 0.05 while the mAP falls by no more than 0.01; an option that does not do so on every set
stays off.
"""
from __future__ import annotations

import argparse
import json
import os
import tempfile
from typing import Dict, List

import numpy as np

from yolo3.benchmarks.isolated import run_child
from yolo3.benchmarks.machine import machine_line, matmul_peak_gflops
from yolo3.benchmarks.tiles import train_child  # noqa: F401 - the children's entry point
from yolo3.core.fileio import write_text_atomic
from yolo3.data.annotations import load_annotations
from yolo3.data.class_names import read_classes
from yolo3.data.images import load_image
from yolo3.data.photo_synthetic import PHOTO_CLASSES, make_photo_dataset
from yolo3.evaluation.metrics import evaluate_detections
from yolo3.inference.detector import YOLO
from yolo3.ops.class_balance import class_counts

__all__ = ["run", "score_child", "CONTENDERS"]

# contender -> the training settings it changes
CONTENDERS = {"none": {}, "weights": {"class_weights": "auto"},
              "repeat": {"repeat_threshold": 0.5}, "focal": {"focal_gamma": 2.0}}


def score_child(p: dict) -> dict:
    """Per-class and mean COCO figures of ``p['model']`` on ``p['val']``."""
    names = read_classes(p["classes"])
    records = load_annotations(p["val"], names)
    detector = YOLO(p["model"], score=0.001, iou=0.45, precision="float32", engine="keras")
    gt, dets = {}, {}
    for k in range(0, len(records), 8):
        chunk = records[k:k + 8]
        for j, found in enumerate(detector.detect_batch([load_image(r.path) for r in chunk]),
                                  start=k):
            dets[j] = found
            gt[j] = np.asarray(records[j].boxes, np.float64).reshape(-1, 5)
    result = evaluate_detections(gt, dets, len(names), names)
    return {"mAP50_95": result["mAP50_95"], "mAP50": result["mAP50"],
            "per_class": [c["AP50_95"] for c in result["per_class"]],
            "num_gt": [c["num_gt"] for c in result["per_class"]]}


def _make_set(folder: str, args: argparse.Namespace, seed: int) -> str:
    classes = tuple(PHOTO_CLASSES)
    shares = [1.0] * (len(classes) - 1)
    rare = args.rare_share / (1 - args.rare_share) * sum(shares)
    total = args.num_images + args.val_images
    make_photo_dataset(folder, total, args.photos, seed=seed, classes=classes,
                       val_fraction=args.val_images / total, class_shares=[*shares, rare])
    return folder


def run(args: argparse.Namespace) -> int:
    machine = machine_line(matmul_peak_gflops())
    print(machine)
    results: List[Dict[str, dict]] = []
    with tempfile.TemporaryDirectory(prefix="yolo3-balance-") as folder:
        sets = args.data or [_make_set(os.path.join(folder, f"set{k}"), args, args.seed + k)
                             for k in range(args.sets)]
        for k, data in enumerate(sets):
            names = read_classes(os.path.join(data, "classes.txt"))
            train = load_annotations(os.path.join(data, "train.txt"), names)
            counts = class_counts([r.boxes[:, 4] for r in train], len(names))
            rare = int(np.argmin(counts))
            print(f"set {k}: {data}; training boxes per class "
                  + ", ".join(f"{n} {c}" for n, c in zip(names, counts))
                  + f"; rare: {names[rare]} ({counts[rare] / counts.sum():.1%})")
            row: Dict[str, dict] = {}
            for name in args.contenders:
                config = dict(annotations=os.path.join(data, "train.txt"),
                              val_annotations=os.path.join(data, "val.txt"),
                              classes=os.path.join(data, "classes.txt"),
                              output=os.path.join(folder, f"run{k}_{name}"),
                              variant=args.variant, input_size=args.input_size,
                              epochs=args.epochs, batch_size=args.batch_size, seed=args.seed,
                              verbose=0, precision="float32", **CONTENDERS[name])
                trained = run_child("yolo3.benchmarks.balance:train_child", {"config": config},
                                    timeout=6 * 3600)
                scored = run_child("yolo3.benchmarks.balance:score_child", {
                    "model": trained["model"], "classes": os.path.join(data, "classes.txt"),
                    "val": os.path.join(data, "val.txt")}, timeout=3600)
                row[name] = dict(trained, **scored, rare=rare, rare_name=names[rare])
                base = row.get("none")
                rare_ap = scored["per_class"][rare]
                change = ("" if base is None or name == "none" else
                          f"  rare {rare_ap - base['per_class'][rare]:+.4f}, mAP "
                          f"{scored['mAP50_95'] - base['mAP50_95']:+.4f}")
                print(f"  {name:<8} rare-class AP {rare_ap:.4f}  mAP@0.5:0.95 "
                      f"{scored['mAP50_95']:.4f}  ({trained['seconds']:.0f} s){change}",
                      flush=True)
            results.append(row)
    if args.json:
        write_text_atomic(args.json, json.dumps({"machine": machine, "sets": results},
                                                indent=1, default=str))
    return 0
