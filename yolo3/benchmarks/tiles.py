"""Small objects in large images: resize-only training against tiled training with sliced
inference, at equal training time, on a realistic high-resolution set of our own; the peer
(Ultralytics, with SAHI's sliced inference) on the same images when its environment is given.

    yolo3 benchmark tiles [--variant tiny-af] [--input-size 320] [--epochs 12]
                          [--num-images 160] [--val-images 40] [--image-size 1080 1920]
                          [--min-px 8] [--max-px 40] [--tile auto|SIZE] [--overlap 0.2]
                          [--peer-python PEER/bin/python] [--json tiles.json]

The set: ``yolo3 synth --style photo`` images of ``--image-size`` with objects of ``--min-px`` to
``--max-px`` pixels (log-uniform: most of them small), or ``--data`` (a folder with train.txt,
val.txt and classes.txt). Two contenders train in turn, each in its own process, with the same
settings, epochs and batch: ``resize`` (whole images letterboxed to the input: what training does
without tiles) and ``tiled`` (``train --tile``: windows at native resolution around objects, a
share of whole images; ``auto``: the size ``yolo3 check`` suggests). Each training sample is one
input-size image either way, so equal epochs are equal training work; the training seconds of
both are printed. Each model is then scored on the validation images whole and sliced
(:class:`yolo3.inference.tiled.TiledDetector`: the tiles plus the whole image), with COCO's AP by
box size (pycocotools' areas). The target: tiled training with sliced inference reaches at least
twice the AP_small of resize-only, and more than the peer with SAHI.

Printed beside the result: what ``yolo3 check`` and ``--tile auto`` advise for the training boxes
(:func:`yolo3.ops.tiles.suggest_tile`), and whether that picks the better contender.

Also timed, on one validation image: sliced detection against (tiles + 1) x the detection of one
tile (target: within 10%).
"""
from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from typing import Dict, Optional, Tuple

import numpy as np

from yolo3.benchmarks.isolated import run_child
from yolo3.benchmarks.machine import cores, machine_line, matmul_peak_gflops
from yolo3.benchmarks.peer import peer_data, run_peer, score_peer_detections
from yolo3.config.train_config import TrainConfig
from yolo3.core.errors import ArgumentError
from yolo3.core.fileio import write_text_atomic
from yolo3.data.annotations import box_image_sizes, box_sizes, load_annotations
from yolo3.data.class_names import read_classes
from yolo3.data.images import load_image
from yolo3.data.photo_synthetic import make_photo_dataset
from yolo3.evaluation.metrics import evaluate_detections
from yolo3.inference.detector import YOLO
from yolo3.inference.tiled import TiledDetector, recorded_whole_from
from yolo3.ops.tiles import TileSuggestion, suggest_tile
from yolo3.training.history import read_history
from yolo3.training.train import train

__all__ = ["run", "train_child", "score_child"]

SCORED = ("mAP50_95", "mAP50", "mAP_small", "mAP_medium", "mAP_large")


def make_high_resolution_set(folder: str, args: argparse.Namespace) -> str:
    """The benchmark's set (module docstring) in ``folder``; returns the folder."""
    h, w = args.image_size
    side = min(h, w)
    total = args.num_images + args.val_images
    make_photo_dataset(folder, total, args.photos, seed=args.seed, sizes=[(h, w)],
                       min_frac=args.min_px / side, max_frac=args.max_px / side,
                       max_objects=args.max_objects, val_fraction=args.val_images / total,
                       class_shares=args.class_shares)
    return folder


def train_child(p: dict) -> dict:
    """Train one contender (``p['config']``: TrainConfig fields); its training seconds and the
    tile size it used."""
    start = time.perf_counter()
    result = train(TrainConfig(**p["config"]))
    history = read_history(os.path.join(result.output, "history.csv"))
    return {"seconds": float(sum(history["seconds"])), "wall": time.perf_counter() - start,
            "model": str(result.final_model)}


def _sized(result: dict) -> dict:
    """The figures the table shows (NaN where a size has no ground truth)."""
    return {k: (result[k] if result[k] is not None else float("nan")) for k in SCORED}


def score_child(p: dict) -> dict:
    """Score ``p['model']`` on ``p['val']`` whole and sliced at ``p['tile']``; time sliced
    detection against the detection of one tile."""
    names = read_classes(p["classes"])
    records = load_annotations(p["val"], names)
    detector = YOLO(p["model"], score=0.001, iou=0.45, precision="float32", engine="keras")
    whole_from = recorded_whole_from(detector)  # a tiled model's hand-over to the whole image
    tiled = TiledDetector(detector, p["tile"], p["overlap"], batch_size=8, whole_from=whole_from)
    images = [load_image(r.path) for r in records]
    gt = {k: np.asarray(r.boxes, np.float64).reshape(-1, 5) for k, r in enumerate(records)}
    out: Dict[str, object] = {}
    for mode, det in (("whole", detector), ("sliced", tiled)):
        dets = {}
        start = time.perf_counter()
        for k in range(0, len(images), 4):
            for j, found in enumerate(det.detect_batch(images[k:k + 4]), start=k):
                dets[j] = found
        out[mode] = dict(_sized(evaluate_detections(gt, dets, len(names), names)),
                         ms_per_image=(time.perf_counter() - start) * 1000 / len(images))
    # sliced detection of one image against (tiles + 1) x one tile's detection, at batch 1
    image = images[0]
    x1, y1, x2, y2 = tiled.windows(image.shape[:2])[0]
    crop = np.ascontiguousarray(image[y1:y2, x1:x2])
    views = tiled.views_per_image(image.shape[:2])

    def best(fn, runs=5):
        fn()
        times = []
        for _ in range(runs):
            start = time.perf_counter()
            fn()
            times.append(time.perf_counter() - start)
        return min(times) * 1000
    one_tile = best(lambda: detector.detect(crop))
    sliced = best(lambda: TiledDetector(detector, p["tile"], p["overlap"], batch_size=1,
                                        whole_from=whole_from).detect(image))
    out["timing"] = {"views": views, "one_tile_ms": one_tile, "sliced_ms": sliced,
                     "ratio": sliced / (views * one_tile)}
    return out


def _peer(args: argparse.Namespace, data: str, folder: str, tile: int) -> dict:
    """The peer trained on whole images, detecting whole and with SAHI's slices of ``tile``
    pixels, scored by our COCO code."""
    prepared = peer_data(data, folder)
    out = os.path.join(folder, "peer")
    facts = run_peer(args.peer_python, prepared, out, cores(), [
        "--imgsz", str(args.input_size), "--epochs", str(args.epochs), "--batch",
        str(args.batch_size), "--seed", str(args.seed), "--score", "0.001", "--iou", "0.45",
        "--sahi-tile", str(tile), "--sahi-overlap", str(args.overlap)], folder)
    scored = {mode: _sized(score_peer_detections(os.path.join(out, name), prepared))
              for mode, name in (("whole", "detections.json"),
                                 ("sliced", "detections_sahi.json"))}
    return {"seconds": facts["training_seconds"], "facts": facts, **scored}


def _config(args: argparse.Namespace, data: str, output: str, tile) -> dict:
    return dict(annotations=os.path.join(data, "train.txt"),
                val_annotations=os.path.join(data, "val.txt"),
                classes=os.path.join(data, "classes.txt"), output=output, variant=args.variant,
                input_size=args.input_size, epochs=args.epochs, batch_size=args.batch_size,
                seed=args.seed, eval_every=args.epochs, verbose=0, precision="float32",
                tile=tile, tile_overlap=args.overlap)


def _advice(args: argparse.Namespace, data: str) -> TileSuggestion:
    """What ``yolo3 check`` and ``--tile auto`` say for the training boxes."""
    names = read_classes(os.path.join(data, "classes.txt"))
    records = load_annotations(os.path.join(data, "train.txt"), names, check_images=True)
    return suggest_tile(box_sizes(records), box_image_sizes(records),
                        (args.input_size, args.input_size))


def _resolve_tile(args: argparse.Namespace, advice: TileSuggestion) -> int:
    """``--tile``, or ``auto``'s suggestion (at least the input size)."""
    if args.tile != "auto":
        return int(args.tile)
    print(f"tile auto: {advice.reason}")
    return advice.size or args.input_size


EQUAL = 0.005  # mAP@0.5:0.95 closer than this: the contenders are equal (the margin)


def advice_line(advice: TileSuggestion, tiled: float, resize: float) -> Tuple[str, bool]:
    """The advice beside the result: ``(line, right)``: right when it picks the contender with
    the higher mAP@0.5:0.95 (either, when they are within :data:`EQUAL`)."""
    says = f"tiles of {advice.size} px" if advice.size else "whole images"
    better = "equal" if abs(tiled - resize) < EQUAL else ("tiled" if tiled > resize else "resize-only")
    right = better == "equal" or (better == "tiled") == (advice.size is not None)
    return (f"advice (yolo3 check, --tile auto): {says} ({advice.reason}); better here: {better} "
            f"(tiled + sliced {tiled:.4f}, resize-only {resize:.4f}): the advice is "
            f"{'right' if right else 'wrong'}", right)


def _row(name: str, seconds: Optional[float], mode: str, figures: dict) -> str:
    cells = " ".join(f"{figures.get(k, float('nan')):>9.4f}" for k in SCORED)
    took = f"{seconds:>8.0f}" if seconds is not None else f"{'-':>8}"
    speed = figures.get("ms_per_image")
    return f"{name:<22} {took} {mode:<7} {cells} {'' if speed is None else f'{speed:>9.0f}'}"


def run(args: argparse.Namespace) -> int:
    if args.peer_python and not os.path.exists(args.peer_python):
        raise ArgumentError(f"{args.peer_python}: --peer-python not found (an environment with "
                            "ultralytics and sahi: python -m venv peer && peer/bin/pip install "
                            "ultralytics sahi)")
    machine = machine_line(matmul_peak_gflops())
    print(machine)
    with tempfile.TemporaryDirectory(prefix="yolo3-tiles-") as folder:
        data = args.data or make_high_resolution_set(os.path.join(folder, "data"), args)
        advice = _advice(args, data)
        tile = _resolve_tile(args, advice)
        print(f"data: {data}; {args.variant} at {args.input_size} px, {args.epochs} epochs, "
              f"batch {args.batch_size}; tiles of {tile} px overlapping {args.overlap:g}")
        results: Dict[str, dict] = {}
        for name, tiling in (("resize", None), ("tiled", tile)):
            trained = run_child("yolo3.benchmarks.tiles:train_child", {"config": _config(
                args, data, os.path.join(folder, name), tiling)}, timeout=6 * 3600)
            scored = run_child("yolo3.benchmarks.tiles:score_child", {
                "model": trained["model"], "classes": os.path.join(data, "classes.txt"),
                "val": os.path.join(data, "val.txt"), "tile": tile, "overlap": args.overlap},
                timeout=3600)
            results[name] = dict(trained, **scored)
        if args.peer_python:
            results["peer"] = _peer(args, data, folder, tile)
    header = (f"{'contender':<22} {'train s':>8} {'detect':<7} "
              + " ".join(f"{k:>9}" for k in SCORED) + f" {'ms/image':>9}")
    print(header)
    for name, label in (("resize", "resize-only (yolo3)"), ("tiled", "tiled (yolo3)"),
                        ("peer", "Ultralytics + SAHI")):
        if name in results:
            r = results[name]
            for mode in ("whole", "sliced"):
                print(_row(label, r["seconds"], mode, r[mode]))
    small = results["resize"]["whole"]["mAP_small"]
    ours = results["tiled"]["sliced"]["mAP_small"]
    ratio = f"{ours / small:.2f}x" if small > 1e-6 else "n/a (resize-only found none)"
    print(f"AP_small: tiled + sliced {ours:.4f} vs resize-only {small:.4f}: {ratio} "
          f"(target >= 2x); training time {results['tiled']['seconds']:.0f} s vs "
          f"{results['resize']['seconds']:.0f} s")
    if "peer" in results:
        peer = results["peer"]["sliced"]["mAP_small"]
        print(f"AP_small: tiled + sliced {ours:.4f} vs the peer with SAHI {peer:.4f} "
              f"(target: more)")
    line, right = advice_line(advice, results["tiled"]["sliced"]["mAP50_95"],
                              results["resize"]["whole"]["mAP50_95"])
    print(line)
    timing = results["tiled"]["timing"]
    print(f"sliced detection of one image: {timing['sliced_ms']:.0f} ms for {timing['views']} "
          f"views; one tile {timing['one_tile_ms']:.1f} ms; ratio to (tiles + 1) x one tile "
          f"{timing['ratio']:.2f} (target <= 1.10)")
    if args.json:
        write_text_atomic(args.json, json.dumps({
            "machine": machine, "tile": tile, "results": results,
            "advice": {"size": advice.size, "share_under": advice.small_share,
                       "reason": advice.reason, "right": right}}, indent=1, default=str))
    return 0
