"""Throughput of the tf.data pipeline vs the classic Python generator, on the same annotation file;
with ``--scale N``, training start-up on N images instead (:mod:`yolo3.benchmarks.startup`).

    yolo3 benchmark data [--annotations train.txt --classes classes.txt] [--batches 20]
    yolo3 benchmark data --scale 118287
    (or python tools/benchmark_data.py ...)

Both produce training batches (decode + augment + encode y_true) of ``--batch-size`` at ``--size``.
The generator is keras-yolo3's recipe: per image PIL open, random resize, placement on a gray canvas,
flip, HSV distortion (matplotlib), then NumPy ``preprocess_true_boxes`` per batch. Without
``--annotations`` a synthetic JPEG dataset (640x480) is written to a temporary folder.
"""
from __future__ import annotations

import argparse
import os
import tempfile
import time
from typing import Iterator, Tuple

import numpy as np

from yolo3.benchmarks.machine import cores, machine_line, matmul_peak_gflops
from yolo3.benchmarks.startup import run_scale
from yolo3.data.annotations import load_annotations
from yolo3.data.augment import AugmentConfig
from yolo3.data.class_names import read_classes
from yolo3.data.pipeline import DatasetConfig, TargetEncoding, make_dataset
from yolo3.data.synthetic import make_synthetic_dataset
from yolo3.data.yolo_layout import read_data_file
from yolo3.ops.anchors import YOLO_ANCHORS
from yolo3.ops.targets import preprocess_true_boxes


def classic_generator(records, input_hw: Tuple[int, int], anchors: np.ndarray, num_classes: int,
                      batch_size: int, max_boxes: int = 20, seed: int = 0) -> Iterator:
    """keras-yolo3's ``data_generator`` / ``get_random_data`` (the baseline), with a seeded Generator."""
    from matplotlib.colors import hsv_to_rgb, rgb_to_hsv
    from PIL import Image


    rng = np.random.default_rng(seed)
    h, w = input_hw
    n, i = len(records), 0

    def rand(a=0.0, b=1.0):
        return rng.uniform() * (b - a) + a

    while True:
        images, boxes = [], []
        for _ in range(batch_size):
            if i == 0:
                order = rng.permutation(n)
            rec = records[order[i]]
            i = (i + 1) % n
            image = Image.open(rec.path).convert("RGB")
            iw, ih = image.size
            new_ar = w / h * rand(0.7, 1.3) / rand(0.7, 1.3)
            scale = rand(0.25, 2)
            if new_ar < 1:
                nh = int(scale * h)
                nw = int(nh * new_ar)
            else:
                nw = int(scale * w)
                nh = int(nw / new_ar)
            image = image.resize((nw, nh), Image.BICUBIC)
            dx, dy = int(rand(0, w - nw)), int(rand(0, h - nh))
            canvas = Image.new("RGB", (w, h), (128, 128, 128))
            canvas.paste(image, (dx, dy))
            flip = rand() < 0.5
            if flip:
                canvas = canvas.transpose(Image.FLIP_LEFT_RIGHT)
            hue = rand(-0.1, 0.1)
            sat = rand(1, 1.5) if rand() < 0.5 else 1 / rand(1, 1.5)
            val = rand(1, 1.5) if rand() < 0.5 else 1 / rand(1, 1.5)
            x = rgb_to_hsv(np.asarray(canvas) / 255.0)
            x[..., 0] = (x[..., 0] + hue) % 1.0
            x[..., 1] = np.clip(x[..., 1] * sat, 0, 1)
            x[..., 2] = np.clip(x[..., 2] * val, 0, 1)
            images.append(hsv_to_rgb(x).astype(np.float32))
            box = np.zeros((max_boxes, 5), np.float32)
            b = rec.boxes.copy()
            if len(b):
                b[:, [0, 2]] = b[:, [0, 2]] * nw / iw + dx
                b[:, [1, 3]] = b[:, [1, 3]] * nh / ih + dy
                if flip:
                    b[:, [0, 2]] = w - b[:, [2, 0]]
                b[:, 0:2] = np.maximum(b[:, 0:2], 0)
                b[:, 2] = np.minimum(b[:, 2], w)
                b[:, 3] = np.minimum(b[:, 3], h)
                keep = (b[:, 2] - b[:, 0] > 1) & (b[:, 3] - b[:, 1] > 1)
                b = b[keep][:max_boxes]
                box[:len(b)] = b
            boxes.append(box)
        y_true = preprocess_true_boxes(np.stack(boxes), input_hw, anchors, num_classes)
        yield [np.stack(images), *y_true], np.zeros(batch_size, np.float32)


def _time(it, batches: int, warmup: int) -> float:
    for _ in range(warmup):
        next(it)
    t0 = time.perf_counter()
    for _ in range(batches):
        next(it)
    return time.perf_counter() - t0


def run(args: argparse.Namespace) -> int:
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    if getattr(args, "scale", 0):
        return run_scale(args)

    tmp = None
    if getattr(args, "data", None):
        dataset = read_data_file(args.data)
        ann, names = dataset.sources(args.split), dataset.names
    elif args.annotations:
        ann = args.annotations
        names = read_classes(args.classes) if args.classes else None
    else:
        tmp = tempfile.TemporaryDirectory(prefix="yolo3_bench_")
        ann, cls = make_synthetic_dataset(tmp.name, args.num_images, (480, 640), seed=args.seed,
                                          image_format="jpg")
        names = read_classes(cls)
    records = load_annotations(ann, names)
    num_classes = len(names) if names else int(max(r.boxes[:, 4].max() for r in records if len(r.boxes))) + 1
    hw = (args.size, args.size)
    augment = AugmentConfig(mosaic=getattr(args, "mosaic", 0.0))
    ds = make_dataset(records, DatasetConfig(hw, args.batch_size, training=True, targets=TargetEncoding(
        YOLO_ANCHORS, num_classes), seed=args.seed, max_boxes=20, augment=augment)).repeat()
    t_pipe = _time(iter(ds), args.batches, args.warmup)
    gen = classic_generator(records, hw, YOLO_ANCHORS, num_classes, args.batch_size, seed=args.seed)
    t_gen = _time(gen, args.batches, args.warmup)
    n = args.batches * args.batch_size
    ips_pipe, ips_gen = n / t_pipe, n / t_gen
    print(machine_line(matmul_peak_gflops()))
    print(f"{len(records)} images from {args.data or ann}; batches of {args.batch_size} at {args.size}x{args.size}; "
          f"{args.batches} timed batches each")
    print("| loader | images/s | s/batch |\n|---|---|---|")
    print(f"| tf.data pipeline (yolo3.data.pipeline) | {ips_pipe:.1f} | {t_pipe / args.batches:.3f} |")
    print(f"| classic Python generator (PIL + NumPy) | {ips_gen:.1f} | {t_gen / args.batches:.3f} |")
    print(f"speed-up: {ips_pipe / ips_gen:.2f}x")
    workers = cores()
    per_core = ips_pipe / workers
    feed = getattr(args, "feed", 1000.0)
    print(f"tf.data pipeline, full augmentation (mosaic {augment.mosaic:g}): {per_core:.1f} "
          f"images/s per core on {workers} cores; feeding {feed:g} images/s takes about "
          f"{feed / per_core:.0f} such cores (if it scales with cores)")
    if tmp is not None:
        tmp.cleanup()
    return 0
