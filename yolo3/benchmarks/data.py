"""Throughput of the input pipelines side by side on the same annotation file: tf.data, the
NumPy/OpenCV pipeline (as ``fit`` drives it: Keras's ``PyDataset`` with worker threads, and
through Grain where it is installed), the NumPy pipeline with the RAM cache and the colours on
the device (what it leaves the host: uint8 canvases and colour plans; the cache filled first,
its seconds and bytes printed; the device's own colour step timed apart on this machine's
backend), and keras-yolo3's classic Python generator; with ``--scale N``, training start-up on
N images instead (:mod:`yolo3.benchmarks.startup`). ``--memory-epochs N``: the cached loader's
resident memory after each of N epochs.

    yolo3 benchmark data [--annotations train.txt --classes classes.txt] [--batches 20]
                         [--mosaic 0 1] [--workers 1 2 4 16] [--no-classic] [--memory-epochs 10]
    yolo3 benchmark data --scale 118287
    (or python tools/benchmark_data.py ...)

Every contender produces training batches (decode + full augmentation + encode y_true) of
``--batch-size`` at ``--size``, once per ``--mosaic`` probability (0: one image each; 1: a mosaic
of four for every image). Printed: images/s, images/s per core used, and how many cores feed
``--feed`` images/s at the NumPy pipeline's per-worker rate. The NumPy pipeline runs once per
``--workers`` count (threads; the per-worker rate is its figure at one worker). Grain
(``pip install grain``) maps the same batches, with threads and with processes. The generator is
keras-yolo3's recipe: per image PIL open, random resize, placement on a gray canvas, flip, HSV
distortion (matplotlib), then NumPy ``preprocess_true_boxes`` per batch. Without
``--annotations`` a synthetic JPEG dataset (640x480) is written to a temporary folder. Each
contender runs alone, in its own process (two runtimes in one process disturb each other).
"""
from __future__ import annotations

import argparse
import os
import tempfile
import time
from dataclasses import replace
from typing import Callable, Dict, Iterator, List, Optional, Tuple

import numpy as np

from yolo3.benchmarks.isolated import run_child
from yolo3.benchmarks.machine import cores, machine_line, matmul_peak_gflops
from yolo3.benchmarks.startup import run_scale
from yolo3.config.precision import gpu_capabilities
from yolo3.core.extras import installed
from yolo3.core.memory import gigabytes, proc_field_bytes
from yolo3.data.annotations import load_annotations
from yolo3.data.class_names import read_classes
from yolo3.data.dataset_config import DatasetConfig, TargetEncoding
from yolo3.data.planner import AugmentConfig
from yolo3.data.numpy_pipeline import NumpyBatches
from yolo3.data.synthetic import make_synthetic_dataset
from yolo3.data.yolo_layout import read_data_file
from yolo3.modeling.keras_compat import py_dataset_epoch
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


def _time(it: Iterator, batches: int, warmup: int) -> float:
    for _ in range(warmup):
        next(it)
    t0 = time.perf_counter()
    for _ in range(batches):
        next(it)
    return time.perf_counter() - t0


class _Batch:
    """Batch ``k`` of a NumPy pipeline (a picklable callable for Grain's workers)."""

    def __init__(self, batches):
        self.batches = batches

    def __call__(self, k: int):
        return self.batches[k]


def _stream(kind: str, records, config, workers: int, num_classes: int
            ) -> Tuple[Iterator, Callable[[], None]]:
    """An endless iterator of training batches of one contender, and how to stop it."""
    if kind == "tf":
        from yolo3.data.pipeline import make_dataset  # imports TensorFlow: its contender only
        return iter(make_dataset(records, config).repeat()), lambda: None
    if kind == "classic":
        return (classic_generator(records, config.input_size, YOLO_ANCHORS, num_classes,
                                  config.batch_size, seed=config.seed), lambda: None)
    if kind.startswith("numpy"):  # as fit reads it: Keras's adapter, in order
        batches = NumpyBatches(records, config, workers=workers, repeat=True,
                               feed="processes" if kind.endswith("processes") else "threads")
        iterator, end = py_dataset_epoch(batches)

        def stop():
            end()
            batches.close()
        return iterator, stop
    import grain
    from absl import flags
    flags.FLAGS.mark_as_parsed()  # grain reads absl flags that no command line parsed here
    dataset = grain.MapDataset.range(10 ** 9).map(
        _Batch(NumpyBatches(records, config, workers=0, repeat=True)))
    if kind == "grain-processes":
        stream = dataset.to_iter_dataset().mp_prefetch(
            grain.MultiprocessingOptions(num_workers=workers))
    else:
        stream = dataset.to_iter_dataset(grain.ReadOptions(num_threads=workers,
                                                            prefetch_buffer_size=2 * workers))
    iterator = iter(stream)
    return iterator, getattr(iterator, "close", lambda: None)


def time_contender(p: dict) -> dict:
    """One contender in its own process (:func:`yolo3.benchmarks.isolated.run_child`): the images
    per second of ``p['batches']`` batches after ``p['warmup']``."""
    records = load_annotations(p["annotations"], p["names"])
    config = DatasetConfig((p["size"], p["size"]), p["batch_size"], training=True,
                           targets=TargetEncoding(YOLO_ANCHORS, p["num_classes"]), seed=p["seed"],
                           max_boxes=20, augment=AugmentConfig(mosaic=p["mosaic"]))
    out = {}
    if p["kind"].startswith("numpy-cached"):
        config = replace(config, image_cache="ram", device_colour=True)
        if p["kind"] == "numpy-cached":  # the processes fill their shared cache as they go
            out.update(fill_cache(records, config))
    if p["kind"] == "numpy-windows":  # the geometry on the device too: the host cuts windows
        config = replace(config, image_cache="ram", device_geometry=True)
        fill_cache(records, config)
    if p["kind"] == "numpy-device-images":  # the images kept on the device: plans only
        config = replace(config, device_images=True)  # nothing decoded on the host
    iterator, stop = _stream(p["kind"], records, config, p["workers"], p["num_classes"])
    warmup, batches = steady_batches(p["warmup"], p["batches"], p["workers"])
    if p["kind"] == "numpy-cached-processes":  # an epoch first: the shared cache filled
        warmup = max(warmup, -(-len(records) // p["batch_size"]))
    seconds = _time(iterator, batches, warmup)
    stop()
    out["images_per_s"] = batches * p["batch_size"] / seconds
    if p["kind"] == "numpy-cached" and p.get("memory_epochs"):
        out["resident_mb"] = resident_over_epochs(records, config, p["workers"],
                                                  p["memory_epochs"])
    return out


def fill_cache(records, config: DatasetConfig) -> dict:
    """Decode every image into the RAM cache (in the order of the records, one thread): its
    seconds and bytes. The benchmark then times the host's work with the cache full."""
    batches = NumpyBatches(records, config, workers=0)
    start = time.perf_counter()
    for i in range(len(records)):
        batches.images.get(i)
    seconds = time.perf_counter() - start
    batches.close()
    return {"fill_s": seconds, "cache_bytes": batches.images.nbytes()}


def resident_over_epochs(records, config: DatasetConfig, workers: int, epochs: int
                         ) -> List[float]:
    """The process's resident memory (MB) after each of ``epochs`` passes through a fresh cached
    loader, as ``fit`` reads it (the first pass fills the cache)."""
    dataset = NumpyBatches(records, config, workers=workers)
    out = []
    for _ in range(epochs):
        batches, end = py_dataset_epoch(dataset)
        for _ in batches:
            pass
        end()
        out.append(proc_field_bytes("/proc/self/status", "VmRSS") / 1e6)
    dataset.close()
    return out


def time_colours(p: dict) -> dict:
    """The device's colour step (:class:`yolo3.modeling.pixel_input.PlannedPixels`) compiled on
    this process's Keras backend and device: images per second over ``p['batches']`` batches of
    ``p['batch_size']`` at ``p['size']``, each region with its own colours."""
    import keras

    from yolo3.modeling.pixel_input import PlannedPixels  # Keras: in its child process only
    rng = np.random.default_rng(0)
    size, n = p["size"], p["batch_size"]
    image = rng.integers(0, 256, (n, size, size, 3), dtype=np.uint8)
    plan = np.tile(np.array([size // 2, size // 2, 0.05, 1.2, 0.8, -0.05, 0.8, 1.2, 0.02, 1.1,
                             0.9, 0.0, 1.3, 1.1], np.float32), (n, 1))
    layer = PlannedPixels()
    backend = keras.backend.backend()
    if backend == "jax":
        import jax
        step = jax.jit(lambda x, q: layer(x, q))
        image, plan = jax.device_put(image), jax.device_put(plan)

        def run_once():
            return step(image, plan).block_until_ready()
    elif backend == "tensorflow":
        import tensorflow as tf
        step = tf.function(lambda x, q: layer(x, q), jit_compile=True)

        def run_once():
            return step(image, plan).numpy()
    else:
        import torch
        x, q = torch.as_tensor(image), torch.as_tensor(plan)
        if torch.cuda.is_available():
            x, q = x.cuda(), q.cuda()

        def run_once():
            out = layer(x, q)
            if torch.cuda.is_available():
                torch.cuda.synchronize()
            return out
    for _ in range(2):
        run_once()
    start = time.perf_counter()
    for _ in range(p["batches"]):
        run_once()
    seconds = time.perf_counter() - start
    device = keras.config.backend() + (" GPU" if _sees_gpu() else " CPU")
    return {"images_per_s": p["batches"] * n / seconds, "device": device}


def _sees_gpu() -> bool:
    return bool(gpu_capabilities())


def steady_batches(warmup: int, batches: int, workers: int) -> Tuple[int, int]:
    """The warm-up and timed batch counts that measure a loader's steady rate: ``workers``
    threads finish their first batches together, so the warm-up drains that burst (2 per worker)
    and the timed run (at least 4 per worker) outlasts what the queue can hold ahead."""
    return max(warmup, 2 * workers), max(batches, 4 * workers)


def _records(args: argparse.Namespace, folder: Optional[str]):
    if getattr(args, "data", None):
        dataset = read_data_file(args.data)
        ann, names = dataset.sources(args.split), dataset.names
    elif args.annotations:
        ann = args.annotations
        names = read_classes(args.classes) if args.classes else None
    else:
        ann, cls = make_synthetic_dataset(folder, args.num_images, (480, 640), seed=args.seed,
                                          image_format="jpg")
        names = read_classes(cls)
    records = load_annotations(ann, names)
    num_classes = (len(names) if names else
                   int(max(r.boxes[:, 4].max() for r in records if len(r.boxes))) + 1)
    return ann, records, num_classes, (list(names) if names else None)


def contenders(args: argparse.Namespace) -> List[Tuple[str, str, int]]:
    """``(name, kind, workers)`` of every contender: each runs in its own process."""
    machine = cores()
    out: List[Tuple[str, str, int]] = []
    if installed("tensorflow"):
        out.append(("tf.data (yolo3.data.pipeline)", "tf", machine))
    for w in args.workers or sorted({1, machine}):
        out.append((f"NumPy pipeline, PyDataset, {w} thread(s)", "numpy", w))
    if not getattr(args, "no_cached", False):
        for w in args.workers or sorted({1, machine}):
            out.append((f"NumPy pipeline, RAM cache + colours on the device, {w} thread(s)",
                        "numpy-cached", w))
        for w in args.workers or sorted({1, machine}):
            if w > 1:
                out.append((f"NumPy pipeline, RAM cache + colours on the device, {w} processes",
                            "numpy-cached-processes", w))
        for w in args.workers or sorted({1, machine}):
            out.append((f"NumPy pipeline, RAM cache + geometry and colours on the device, {w} "
                        "thread(s)", "numpy-windows", w))
        for w in args.workers or sorted({1, machine}):
            out.append((f"NumPy pipeline, images kept on the device (--cache device: plans only), {w} "
                        "thread(s)", "numpy-device-images", w))
    if installed("grain") and not args.no_grain:
        out.append((f"NumPy pipeline through Grain, {machine} threads", "grain-threads", machine))
        out.append((f"NumPy pipeline through Grain, {machine} processes", "grain-processes",
                    machine))
    if not args.no_classic:
        out.append(("classic Python generator (PIL + NumPy)", "classic", 1))
    return out


# the summary's lines on the host's work per image: (what the loader does, its rows' name part)
HOST_WORK_LINES = (
    ("the RAM cache and the colours on the device", "RAM cache + colours"),
    ("the RAM cache and the geometry and colours on the device (the host cuts windows, the "
     "device resamples)", "geometry and colours"),
    ("the images kept on the device (--cache device: plans and targets only)",
     "kept on the device"),
)


def _per_thread(table, *parts: str) -> Optional[float]:
    """The images per second per thread of the fewest-thread row whose name holds ``parts``."""
    return min(((u, r / u) for name, u, r in table if all(p in name for p in parts)),
               default=(0, None))[1]


def run(args: argparse.Namespace) -> int:
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    if getattr(args, "scale", 0):
        return run_scale(args)
    peak = matmul_peak_gflops()
    machine = cores()
    with tempfile.TemporaryDirectory(prefix="yolo3_bench_") as tmp:
        ann, records, num_classes, names = _records(args, tmp)
        rows: Dict[float, List[Tuple[str, int, float]]] = {}
        extras: dict = {}
        for mosaic in args.mosaic:
            rows[mosaic] = []
            for name, kind, workers in contenders(args):
                if kind == "classic" and mosaic:
                    continue  # keras-yolo3 has no mosaic
                payload = dict(kind=kind, workers=workers, mosaic=mosaic, annotations=ann,
                               names=names, num_classes=num_classes, size=args.size,
                               batch_size=args.batch_size, seed=args.seed,
                               batches=args.batches, warmup=args.warmup)
                if kind == "numpy-cached" and workers == max(w for _, k, w in
                                                             contenders(args) if k == kind):
                    payload["memory_epochs"] = getattr(args, "memory_epochs", 0)
                result = run_child("yolo3.benchmarks.data:time_contender", payload)
                rate = result["images_per_s"]
                used = min(workers, machine)
                rows[mosaic].append((name, used, rate))
                print(f"  mosaic {mosaic:g}: {name}: {rate:.1f} images/s", flush=True)
                if "fill_s" in result and "fill_s" not in extras:
                    extras["fill_s"], extras["cache_bytes"] = (result["fill_s"],
                                                               result["cache_bytes"])
                if result.get("resident_mb"):
                    extras.setdefault("resident_mb", {})[mosaic] = result["resident_mb"]
        if not getattr(args, "no_cached", False):
            extras["colours"] = run_child("yolo3.benchmarks.data:time_colours", dict(
                size=args.size, batch_size=args.batch_size, batches=max(args.batches, 5)))
    print(machine_line(peak))
    print(f"{len(records)} images from {args.data or ann}; batches of {args.batch_size} at "
          f"{args.size}x{args.size}, full augmentation; {args.batches} timed batches each (at least "
          "4 per worker, after 2 per worker), each loader in its own process")
    for mosaic, table in rows.items():
        what = ("every image a mosaic of four" if mosaic >= 1 else "none" if mosaic == 0
                else f"{mosaic:g} of the images")
        print(f"\nmosaic {mosaic:g} ({what})")
        print("| loader | cores | images/s | images/s per core |\n|---|---|---|---|")
        for name, used, rate in table:
            print(f"| {name} | {used} | {rate:.1f} | {rate / used:.1f} |")
        tf_rate = next((r / u for name, u, r in table if name.startswith("tf.data")), None)
        # the rate per worker: the PyDataset row with the fewest threads
        one = min(((u, r / u) for name, u, r in table if name.startswith("NumPy pipeline, PyD")),
                  default=(0, None))[1]
        best = max(((r / u, name) for name, u, r in table
                    if name.startswith("NumPy") and "on the device" not in name),
                   default=None)
        if tf_rate and best:
            print(f"NumPy pipeline / tf.data, images/s per core: {best[0] / tf_rate:.2f}x "
                  f"({best[1]})")
        if one:
            print(f"feeding {args.feed:g} images/s takes about {args.feed / one:.0f} cores at the "
                  f"NumPy pipeline's rate per worker ({one:.1f} images/s per thread)")
        cached = _per_thread(table, "RAM cache + colours", "thread")
        for label, key in HOST_WORK_LINES:
            rate = _per_thread(table, key)
            if rate and one:
                beside = (f", {rate / cached:.2f}x the colours alone on the device"
                          if cached and key != "RAM cache + colours" else "")
                print(f"the host's work per image with {label}: {rate:.1f} images/s per thread, "
                      f"{rate / one:.1f}x the NumPy pipeline's {one:.1f}{beside}; feeding "
                      f"{args.feed:g} images/s takes about {args.feed / rate:.1f} cores")
        if extras.get("resident_mb", {}).get(mosaic):
            mb = extras["resident_mb"][mosaic]
            print(f"cached loader's resident memory after each of {len(mb)} epochs (MB): "
                  + ", ".join(f"{m:.0f}" for m in mb)
                  + f"; after the first: {max(mb[1:], default=mb[0]) - mb[0]:+.0f} MB")
    if "fill_s" in extras:
        print(f"\nthe RAM cache: {gigabytes(extras['cache_bytes'])} for {len(records)} images, "
              f"filled in {extras['fill_s']:.1f} s on one thread")
    if "colours" in extras:
        c = extras["colours"]
        print(f"the colours on the device ({c['device']}): {c['images_per_s']:.0f} images/s "
              f"at {args.size}x{args.size}, batch {args.batch_size} (compiled; on a CPU the "
              "training step's own cores would do this work: auto keeps it on the host there)")
    return 0
