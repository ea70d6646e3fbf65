"""The same training step and the same detector on each Keras backend, side by side.

    yolo3 benchmark backends [--backends tensorflow jax torch] [--variants yolov3 tiny-af]
                             [--size 416] [--batch 16 32 64] [--steps 10]
                             [--precision float32|mixed_bfloat16|auto] [--no-detect]
                             [--dry-run] [--json FILE]

Every (backend, variant, batch) runs in its own process with ``KERAS_BACKEND`` set, on a fixed
synthetic batch whose targets are encoded in NumPy (:mod:`yolo3.benchmarks.workload`: no
TensorFlow on JAX or PyTorch), Adam and the loss as the model's output; the step is compiled where
the backend compiles (``jit_compile="auto"``: XLA on JAX, TensorFlow's graph; PyTorch eager). Training images/s are over ``--steps`` steps after
two warm-up steps; the model FLOP utilisation is ``images/s x 3 x forward GFLOP`` against the
device's peak (a GPU's dense bfloat16 peak from its data sheet; on a CPU NumPy's float32 matmul
rate, measured once, the same yardstick for every backend). Detection: :class:`yolo3.inference.detector.YOLO` on the same body,
latency of one 640x480 image and throughput of 32 per call. ``--dry-run``: the same script at 64
px, batch 2, one step, to check it on a CPU before a GPU machine's minutes are spent on it.
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import os
import time
from typing import Dict, List, Optional

from yolo3.benchmarks.isolated import run_child
from yolo3.benchmarks.machine import SHOWN_FLAGS, cores, cpu_flags, cpu_model
from yolo3.benchmarks.workload import NUM_CLASSES, forward_gflops, random_training_batch
from yolo3.checkpoint.metadata import ModelInfo
from yolo3.config.specs import get_spec
from yolo3.core.fileio import write_text_atomic
from yolo3.heads.registry import as_head
from yolo3.inference.detector import YOLO
from yolo3.modeling.bodies import build_spec_body
from yolo3.modeling.loss import identity_loss

BACKENDS = ("tensorflow", "jax", "torch")
MAX_BOXES = 20

# dense bfloat16 peak TFLOP/s (data sheets, without sparsity) by a word of the device's name
GPU_BF16_PEAK_TFLOPS = {"H200": 989.0, "H100": 989.0, "A100": 312.0, "L40S": 362.0, "L4": 121.0}


def _device() -> Dict[str, object]:
    """The backend's first device: its name and whether it is a GPU (imports the backend)."""
    import keras
    backend = keras.backend.backend()
    if backend == "jax":
        import jax
        d = jax.devices()[0]
        return {"name": d.device_kind, "gpu": d.platform == "gpu"}
    if backend == "torch":
        import torch
        if torch.cuda.is_available():
            return {"name": torch.cuda.get_device_name(0), "gpu": True}
        return {"name": "CPU", "gpu": False}
    import tensorflow as tf
    gpus = tf.config.list_physical_devices("GPU")
    if gpus:
        details = tf.config.experimental.get_device_details(gpus[0])
        return {"name": details.get("device_name", gpus[0].name), "gpu": True}
    return {"name": "CPU", "gpu": False}


def gpu_peak_tflops(name: str) -> Optional[float]:
    """The dense bfloat16 peak of a GPU named ``name`` (None when not in the table)."""
    for word, peak in GPU_BF16_PEAK_TFLOPS.items():
        if word in name:
            return peak
    return None


def numpy_matmul_tflops(n: int = 2048, repeats: int = 5) -> float:
    """TFLOP/s of an ``n x n`` float32 matrix product in NumPy: the CPU yardstick, the same for
    every backend's row (each backend's own matmul reaches different rates)."""
    import numpy as np
    a = np.random.default_rng(0).normal(size=(n, n)).astype("float32")
    a @ a
    start = time.perf_counter()
    for _ in range(repeats):
        a @ a
    return repeats * 2 * n ** 3 / (time.perf_counter() - start) / 1e12


def child(p: dict) -> dict:
    """One backend (``KERAS_BACKEND`` of this process), one variant, one batch: training
    images/s and, unless ``p["detect"]`` is false, detection latency and throughput."""
    import keras
    import numpy as np
    keras.config.set_dtype_policy(p["precision"])
    keras.utils.set_random_seed(0)
    spec = get_spec(p["variant"])
    size, batch = p["size"], p["batch"]
    head = as_head(spec.default_head())
    body = build_spec_body(spec, NUM_CLASSES, head.anchors_per_scale, (size, size))
    model = head.training_model(body, NUM_CLASSES, MAX_BOXES)
    model.compile(optimizer=keras.optimizers.Adam(1e-4), loss=identity_loss)
    inputs, target = random_training_batch(spec, size, batch, MAX_BOXES)
    data = list(inputs)
    losses = [float(np.asarray(model.train_on_batch(data, target))) for _ in range(2)]
    start = time.perf_counter()
    for _ in range(p["steps"]):
        loss = model.train_on_batch(data, target)
    float(np.asarray(loss))
    seconds = time.perf_counter() - start
    device = _device()
    out = {"backend": keras.backend.backend(), "device": device["name"], "gpu": device["gpu"],
           "train_img_s": p["steps"] * batch / seconds, "first_loss": losses[0],
           "loss_finite": bool(np.isfinite(losses).all() and np.isfinite(float(np.asarray(loss))))}
    if p.get("detect", True):
        info = ModelInfo.of_head(spec.head, NUM_CLASSES, variant=p["variant"],
                                 input_size=(size, size))
        precision = "bfloat16" if "bfloat16" in p["precision"] else "float32"
        detector = YOLO.from_body(body, info, precision=precision)
        rng = np.random.default_rng(1)
        image = rng.integers(0, 256, (480, 640, 3), dtype=np.uint8)
        for _ in range(2):
            detector.detect(image)
        runs = p["detect_runs"]
        start = time.perf_counter()
        for _ in range(runs):
            detector.detect(image)
        out["detect_ms"] = (time.perf_counter() - start) * 1000.0 / runs
        images = [image] * p["detect_batch"]
        detector.detect_batch(images)
        start = time.perf_counter()
        for _ in range(max(1, runs // 4)):
            detector.detect_batch(images)
        out["detect_batch_img_s"] = max(1, runs // 4) * len(images) / (
            time.perf_counter() - start)
    return out


def installed(backend: str) -> bool:
    return importlib.util.find_spec(backend) is not None


def _precision(asked: str) -> str:
    return "mixed_bfloat16" if asked == "auto" else asked


def run(args: argparse.Namespace) -> int:
    dry = args.dry_run
    size, batches, steps = (64, [2], 1) if dry else (args.size, args.batch, args.steps)
    backends = [b for b in args.backends if installed(b)]
    missing = [b for b in args.backends if b not in backends]
    flags = cpu_flags()
    print(f"machine: {cpu_model()}, {cores()} cores; CPU flags: "
          f"{' '.join(f for f in SHOWN_FLAGS if f in flags) or 'none of ' + ', '.join(SHOWN_FLAGS)}"
          + ("; dry run (64 px, batch 2, one step)" if dry else ""))
    if missing:
        print(f"not installed, skipped: {', '.join(missing)}")
    rows: List[dict] = []
    cpu_peak = numpy_matmul_tflops()
    print(f"CPU yardstick: NumPy float32 matmul {cpu_peak:.2f} TFLOP/s")
    for variant in args.variants:
        gflop = forward_gflops(variant, size)
        for batch in batches:
            for backend in backends:
                payload = {"variant": variant, "size": size, "batch": batch, "steps": steps,
                           "precision": _precision(args.precision), "detect": not args.no_detect,
                           "detect_runs": 2 if dry else 20, "detect_batch": 2 if dry else 32}
                os.environ["KERAS_BACKEND"] = backend  # the child's; this process keeps its own
                try:
                    result = run_child("yolo3.benchmarks.backends:child", payload)
                finally:
                    os.environ.pop("KERAS_BACKEND", None)
                result.update(variant=variant, batch=batch, size=size,
                              train_tflops=result["train_img_s"] * 3 * gflop / 1000.0)
                peak = gpu_peak_tflops(result["device"]) if result["gpu"] else cpu_peak
                result["utilisation"] = result["train_tflops"] / peak if peak else None
                rows.append(result)
                _print_row(result)
    if args.json:
        write_text_atomic(args.json, json.dumps(rows, indent=1))
    return 0 if all(r["loss_finite"] for r in rows) else 1


def _print_row(r: dict) -> None:
    util = "n/a" if r["utilisation"] is None else f"{100 * r['utilisation']:.1f}%"
    text = (f"{r['backend']:<10} {r['device'][:24]:<24} {r['variant']:<8} {r['size']} px batch "
            f"{r['batch']:>3}: train {r['train_img_s']:8.1f} img/s ({r['train_tflops']:.2f} "
            f"TFLOP/s, {util} of peak)")
    if "detect_ms" in r:
        text += (f"; detect {r['detect_ms']:.1f} ms/image, {r['detect_batch_img_s']:.1f} img/s "
                 "batched")
    print(text + ("" if r["loss_finite"] else "  LOSS NOT FINITE"))
