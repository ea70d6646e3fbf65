"""Training start-up at dataset scale: ``yolo3 benchmark data --scale N``.

Writes a YOLO-layout dataset of ``N`` 640x480 JPEGs (``--distinct`` different images, the rest hard
links to them, so that a COCO-sized set fits on a small disk; every image has its own label file,
``--boxes`` boxes per image on average) and runs ``yolo3 train`` on it twice in a fresh process:
on first use (empty cache) and again (the caches of the first run). Each run trains one step; the
figures are the seconds until the first step starts (the stage line printed just before
``fit``), the whole run, and the process's peak memory.

The hard links share the page cache: the figures are the CPU cost of start-up with the files
already in memory, not a cold disk.
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import threading
import time
from typing import Dict, Optional

import numpy as np
from PIL import Image

from yolo3.benchmarks.machine import machine_line, matmul_peak_gflops
from yolo3.core.memory import peak_resident

__all__ = ["run_scale", "write_scale_dataset"]

NAMES = ("circle", "square", "bar", "ring")


def write_scale_dataset(folder: str, count: int, distinct: int, boxes_per_image: float,
                        seed: int = 0, val: int = 500) -> str:
    """A YOLO-layout set of ``count`` images (``val`` of them in the val split); returns its
    data.yaml. About 8% of the images have no objects (empty label files)."""
    rng = np.random.default_rng(seed)
    sources = []
    for k in range(min(distinct, count)):
        path = os.path.join(folder, "distinct", f"{k:05d}.jpg")
        os.makedirs(os.path.dirname(path), exist_ok=True)
        pixels = rng.integers(0, 255, (480 // 8, 640 // 8, 3), dtype=np.uint8)
        Image.fromarray(pixels).resize((640, 480)).save(path, quality=90)
        sources.append(path)
    n_val = min(val, count // 5)
    for split, first, last in (("train", 0, count - n_val), ("val", count - n_val, count)):
        images = os.path.join(folder, "images", split)
        labels = os.path.join(folder, "labels", split)
        os.makedirs(images, exist_ok=True)
        os.makedirs(labels, exist_ok=True)
        for i in range(first, last):
            os.link(sources[i % len(sources)], os.path.join(images, f"{i:07d}.jpg"))
            n = 0 if rng.random() < 0.08 else max(1, int(rng.poisson(boxes_per_image)))
            size = rng.uniform(0.02, 0.3, (n, 2))
            centre = rng.uniform(size / 2, 1 - size / 2)
            rows = "".join(f"{rng.integers(len(NAMES))} {cx:.5f} {cy:.5f} {w:.5f} {h:.5f}\n"
                           for (cx, cy), (w, h) in zip(centre, size))
            with open(os.path.join(labels, f"{i:07d}.txt"), "w", encoding="utf-8") as f:
                f.write(rows)
    yaml = os.path.join(folder, "data.yaml")
    with open(yaml, "w", encoding="utf-8") as f:
        f.write("train: images/train\nval: images/val\nnames: [" + ", ".join(NAMES) + "]\n")
    return yaml


def _peak_rss(pid: int, stop: threading.Event, out: Dict[str, float]) -> None:
    """Poll the peak resident memory (VmHWM, :func:`yolo3.core.memory.peak_resident`) of ``pid``
    in GiB (Linux; nothing elsewhere)."""
    while not stop.is_set():
        peak = peak_resident(pid)
        if peak is None:
            return
        out["peak_gb"] = max(out.get("peak_gb", 0.0), peak / 2**30)
        stop.wait(0.2)


def _train_once(yaml: str, out: str, cache: str, size: int) -> Dict[str, Optional[float]]:
    env = dict(os.environ, YOLO3_CACHE_DIR=cache, TF_CPP_MIN_LOG_LEVEL="2", PYTHONUNBUFFERED="1")
    command = [sys.executable, "-m", "yolo3", "train", "--data", yaml, "--variant", "tiny",
               "--input-size", str(size), "--epochs", "1", "--freeze-epochs", "0",
               "--steps-per-epoch", "1", "--validation-steps", "1", "--eval-every", "0",
               "--bn-stats-images", "0", "--batch-size", "8", "--output", out, "--quiet"]
    start = time.perf_counter()
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env,
                            text=True)
    memory: Dict[str, float] = {}
    stop = threading.Event()
    watcher = threading.Thread(target=_peak_rss, args=(proc.pid, stop, memory), daemon=True)
    watcher.start()
    first_step, lines = None, []
    for line in proc.stdout:  # type: ignore[union-attr]
        lines.append(line)
        if first_step is None and line.startswith("stage "):
            first_step = time.perf_counter() - start
    code = proc.wait()
    total = time.perf_counter() - start
    stop.set()
    watcher.join()
    if code != 0:
        raise RuntimeError("yolo3 train failed:\n" + "".join(lines[-20:]))
    return {"first_step": first_step, "total": total, "peak_gb": memory.get("peak_gb")}


def run_scale(args: argparse.Namespace) -> int:
    with tempfile.TemporaryDirectory(prefix="yolo3_scale_", dir=args.workdir) as folder:
        _run_scale(args, folder)
    return 0


def _run_scale(args: argparse.Namespace, folder: str) -> None:
    t0 = time.perf_counter()
    yaml = write_scale_dataset(folder, args.scale, args.distinct, args.boxes, seed=args.seed)
    written = time.perf_counter() - t0
    boxes = sum(1 for _ in _rows(folder))
    print(machine_line(matmul_peak_gflops()))
    print(f"{args.scale} images ({args.distinct} distinct 640x480 JPEGs, hard links), {boxes} "
          f"boxes in YOLO-layout label files; written in {written:.0f} s")
    print("| run | s to the first step | s in all (1 step + 1 validation step) | peak memory GB |")
    print("|---|---|---|---|")
    cache = os.path.join(folder, "cache")
    for name in ("first use", "second run"):
        figures = _train_once(yaml, os.path.join(folder, f"run-{name[:5]}"), cache, args.size)
        peak = f"{figures['peak_gb']:.2f}" if figures["peak_gb"] is not None else "n/a"
        print(f"| {name} | {figures['first_step']:.1f} | {figures['total']:.1f} | {peak} |")


def _rows(folder: str):
    for split in ("train", "val"):
        labels = os.path.join(folder, "labels", split)
        for name in os.listdir(labels):
            with open(os.path.join(labels, name), encoding="utf-8") as f:
                yield from (line for line in f if line.strip())
