"""Training throughput: fp32 matmul peak, YOLOv3 training images/s and GFLOP/s, wrapper overhead.

    yolo3 benchmark training [--size 416] [--batch 4] [--steps 3] [--replicas 2]
    (or python tools/benchmark_training.py ...)

Counts 3 x 65.9 GFLOP per 416 px image per training step (forward + backward), scaled by (size/416)^2.
Runs in one process with ``--replicas`` logical CPU devices (or GPUs when present).
"""
from __future__ import annotations

import argparse
import os
import time


NAME = "training"
DESCRIPTION = ("Training throughput: YOLOv3 images/s and GFLOP/s against the float32 matmul peak, "
               "and the loss-summing wrapper's overhead, side by side in one process.")


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--size", type=int, default=416, help="input size (multiple of 32)")
    p.add_argument("--batch", type=int, default=4, help="global batch")
    p.add_argument("--steps", type=int, default=3, help="timed steps after one warm-up step")
    p.add_argument("--replicas", type=int, default=2, help="replicas for the wrapper comparison")
    p.add_argument("--mixed", action="store_true", help="also mixed precision (GPU)")


def run(args: argparse.Namespace) -> int:
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import tensorflow as tf
    gpus = tf.config.list_physical_devices("GPU")
    if not gpus:
        from yolo3.distribute import configure_logical_cpus
        configure_logical_cpus(args.replicas)
    import keras
    import numpy as np
    from yolo3.anchors import default_anchors
    from yolo3.benchmarks.machine import machine_line, matmul_peak_gflops
    from yolo3.loss import identity_loss, yolo_training_model
    from yolo3.model import build_body
    from yolo3.parallel import multi_gpu_model
    from yolo3.targets import preprocess_true_boxes

    peak = matmul_peak_gflops()

    s = args.size
    anchors = default_anchors("yolov3")
    rng = np.random.default_rng(0)
    x = rng.uniform(0, 1, (args.batch, s, s, 3)).astype("float32")
    boxes = np.zeros((args.batch, 2, 5), "float32")
    boxes[:, 0] = [s * .2, s * .2, s * .6, s * .5, 1]
    ys = [y.astype("float32") for y in preprocess_true_boxes(boxes, (s, s), anchors, 80)]
    gflop_per_image = 3 * 65.9 * (s / 416) ** 2

    def measure(replicas: int, policy: str = "float32") -> float:
        keras.mixed_precision.set_global_policy(policy)
        body = build_body("yolov3", 80, input_shape=(s, s))
        model = yolo_training_model(body, anchors, 80)
        if replicas > 1:
            devs = [f"/gpu:{i}" for i in range(replicas)] if gpus else [f"/cpu:{i}" for i in range(replicas)]
            model = multi_gpu_model(model, devices=devs)
        model.compile(keras.optimizers.SGD(1e-4), loss=identity_loss, jit_compile=False)
        data = ((x, *ys), np.zeros(args.batch, "float32"))
        model.train_on_batch(*data)
        t = time.perf_counter()
        for _ in range(args.steps):
            model.train_on_batch(*data)
        keras.mixed_precision.set_global_policy("float32")
        return args.steps * args.batch / (time.perf_counter() - t)

    one = measure(1)
    rows = [("fp32 matmul peak (4096^2)", f"{peak:.1f} GFLOP/s", ""),
            (f"YOLOv3-{s} train, 1 device, batch {args.batch}", f"{one:.2f} img/s",
             f"{one * gflop_per_image:.1f} GFLOP/s = {100 * one * gflop_per_image / peak:.0f}% of peak")]
    if args.replicas > 1 and (gpus and len(gpus) >= args.replicas or not gpus):
        many = measure(args.replicas)
        rows.append((f"wrapper, {args.replicas} {'GPUs' if gpus else 'logical CPUs'}, same global batch",
                     f"{many:.2f} img/s", f"ratio {many / one:.2f} vs 1 device"))
    if gpus and args.mixed:
        mixed = measure(1, "mixed_float16")
        rows.append(("1 GPU, mixed_float16", f"{mixed:.2f} img/s", f"{mixed / one:.2f}x fp32"))
    print(machine_line(peak))
    print("| measurement | value | notes |\n|---|---|---|")
    for r in rows:
        print(f"| {' | '.join(r)} |")
    return 0
