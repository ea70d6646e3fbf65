"""Training fed each way, side by side: how fast the same model trains when its batches come from
the host pipeline, from the RAM cache with the colours on the device, and from the images kept on
the device (``--cache device``), against the rate of one fixed batch repeated (the model alone:
the most any feed can give).

    yolo3 benchmark feed [--variant tiny-af] [--input-size 416] [--batch-size 32] [--epochs 3]
                         [--num-images 256] [--feeds fixed host ram kept] [--data FOLDER]

Each contender trains ``--epochs`` epochs of ``yolo3 train`` (full augmentation, mosaic on
every image by default, no evaluation) in a process of its own, one after another, on the same
photo-style set (or ``--data``). Its rate is the training images over the training steps' time
of each epoch after the first (the first compiles), the validation pass left out; ``fixed`` is
the same run with its first training batch repeated (made once by the host pipeline), so the
ratio to it is the share of the model's own rate the feed lets it reach (issue 67: 90% on a GPU).
"""
from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from typing import Dict, List

import keras

from yolo3.benchmarks.isolated import run_child
from yolo3.benchmarks.machine import machine_line, matmul_peak_gflops
from yolo3.config.train_config import TrainConfig
from yolo3.data.photo_synthetic import make_photo_dataset
from yolo3.training import train as train_module

__all__ = ["FEEDS", "feed_settings", "child", "repeated", "run"]

# each contender's settings of yolo3 train; fixed: the host's first batch repeated
FEEDS: Dict[str, dict] = {
    "fixed": {"cache": "none", "augment_on": "host", "data_feed": "threads"},
    "host": {"cache": "none", "augment_on": "host", "data_feed": "threads"},
    "ram": {"cache": "ram", "augment_on": "device", "data_feed": "auto"},
    "kept": {"cache": "device", "augment_on": "auto", "data_feed": "auto"},
}
FEED_WORDS = {"fixed": "one batch repeated (the model alone)",
              "host": "host: decoded every time, colours on the host, threads",
              "ram": "--cache ram, colours on the device",
              "kept": "--cache device: images, placement and colours on the device"}


def feed_settings(p: dict) -> dict:
    """The ``TrainConfig`` settings of contender ``p['feed']``."""
    return dict(annotations=p["train"], val_annotations=p["val"], classes=p["classes"],
                output=p["output"], variant=p["variant"], input_size=p["size"],
                batch_size=p["batch"], epochs=p["epochs"], freeze_epochs=0, seed=0,
                pictures=False, eval_every=0, bn_stats_images=0, pipeline="numpy",
                mosaic=p["mosaic"], data_workers=p["workers"], precision=p["precision"],
                verbose=0, **FEEDS[p["feed"]])


def child(p: dict) -> dict:
    """One contender in its own process: each epoch's training seconds (steps only)."""
    class StepClock(keras.callbacks.Callback):
        """Each epoch's training steps' seconds (up to its validation pass)."""

        def __init__(self):
            super().__init__()
            self.seconds: List[float] = []

        def on_epoch_begin(self, epoch, logs=None):
            self._start = time.perf_counter()
            self._open = True

        def _stop(self):
            if getattr(self, "_open", False):
                self.seconds.append(time.perf_counter() - self._start)
                self._open = False

        def on_test_begin(self, logs=None):
            self._stop()

        def on_epoch_end(self, epoch, logs=None):
            self._stop()

    made = train_module.make_datasets

    def fixed(*args, **kwargs):  # the run's own first batch, made once, at every step
        train_ds, val_ds = made(*args, **kwargs)
        return repeated(train_ds), val_ds

    clock = StepClock()
    if p["feed"] == "fixed":
        train_module.make_datasets = fixed
    try:
        train_module.train(TrainConfig(**feed_settings(p)), callbacks=[clock])
    finally:
        train_module.make_datasets = made
    return {"seconds": clock.seconds}


def repeated(batches):
    """``batches``' first batch at each of its steps (a ``PyDataset`` of the same length; the
    source's feed is closed once the batch is made)."""
    class Repeated(keras.utils.PyDataset):
        def __init__(self):
            super().__init__()
            self.first = batches[0]
            batches.close()

        def __len__(self):
            return len(batches)

        def __getitem__(self, k):
            return self.first

    return Repeated()


def _data(args: argparse.Namespace, folder: str) -> Dict[str, str]:
    if args.data:
        return {k: os.path.join(args.data, f"{k}.txt") for k in ("train", "val", "classes")}
    total = args.num_images + max(8, args.num_images // 8)
    make_photo_dataset(os.path.join(folder, "data"), total, seed=0,
                       val_fraction=1 - args.num_images / total)
    return {k: os.path.join(folder, "data", f"{k}.txt") for k in ("train", "val", "classes")}


def run(args: argparse.Namespace) -> int:
    print(machine_line(matmul_peak_gflops()))
    with tempfile.TemporaryDirectory(prefix="yolo3-feed-") as folder:
        files = _data(args, folder)
        with open(files["train"], encoding="utf-8") as f:
            count = sum(1 for line in f if line.strip())
        print(f"{args.variant} at {args.input_size} px, batch {args.batch_size}, {args.epochs} "
              f"epochs of {count} training images, mosaic {args.mosaic}, "
              f"{args.workers or 'all'} data workers, precision {args.precision}")
        rows = []
        for feed in args.feeds:
            p = dict(feed=feed, variant=args.variant, size=args.input_size,
                     batch=args.batch_size, epochs=args.epochs, mosaic=args.mosaic,
                     workers=args.workers, precision=args.precision,
                     output=os.path.join(folder, f"run-{feed}"), **files)
            seconds = run_child("yolo3.benchmarks.feed:child", p)["seconds"]
            steady = statistics.median(seconds[1:]) if len(seconds) > 1 else seconds[0]
            steps = count // args.batch_size
            rows.append((feed, seconds[0], steady, steps * args.batch_size / steady))
            print(f"  {feed:6s} first epoch {seconds[0]:7.1f} s, then {steady:7.2f} s: "
                  f"{rows[-1][3]:8.1f} images/s  ({FEED_WORDS[feed]})", flush=True)
    fixed = next((r[3] for r in rows if r[0] == "fixed"), None)
    print("\nfeed    images/s  of the fixed batch's rate")
    for feed, _, _, rate in rows:
        share = f"{rate / fixed:6.0%}" if fixed else "     -"
        print(f"{feed:6s} {rate:9.1f}  {share}")
    return 0
