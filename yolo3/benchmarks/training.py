"""Training throughput: images/s per variant in float32, mixed precision and with XLA, the
replica wrapper, the share of step time spent waiting for data, and mixed precision's loss.

    yolo3 benchmark training [--variants yolov3 tiny] [--size 416] [--batch 8] [--steps 5]
                             [--replicas 2] [--data-wait] [--loss-steps 50] [--keras-batch-norm] [--profile]
    (or python tools/benchmark_training.py ...)

Every contender runs in its own process (:mod:`yolo3.benchmarks.isolated`), on the same random
batch, with the default recipe's loss (padded boxes, the XLA-compilable form) and Adam. GFLOP per
image: the body's convolutions (2 x kernel area x input channels x output cells x filters),
times 3 for forward and backward. ``mixed`` is the precision ``--precision auto`` would pick on
mixed hardware: mixed_bfloat16 where it is faster (GPUs that have it, CPUs with AMX or AMD's
AVX-512 BF16), mixed_float16 on other GPUs; on a CPU where ``auto`` trains float32 it is skipped
(bfloat16 emulated: many times slower; Intel's AVX-512 BF16 without AMX: about 0.6x) unless
``--force-mixed``. ``--data-wait``: the real tf.data pipeline (full
augmentation) on a synthetic dataset feeds the steps; the table shows the share of each step spent
waiting for the next batch. ``--loss-steps N``: N steps from the same initial weights on the same
batches in float32 and in mixed precision; the loss after N steps, relative difference.
Training bodies normalise through the fused kernel (:mod:`yolo3.modeling.batch_norm`), as ``yolo3
train`` does; ``--keras-batch-norm`` adds rows with Keras's own batch norm beside them.
``--profile``: TensorFlow's profiler over the steps in float32 and in mixed precision, the op time
per step by group (convolutions forward, their input and filter gradients, casts, the rest) and for
the op types that take the most, with the speed-up of each: where mixed precision gains and where
it does not.
"""
from __future__ import annotations

import argparse
import os
import tempfile
import time
from typing import List, Optional

from yolo3.benchmarks.isolated import run_child
from yolo3.benchmarks.machine import bfloat16_text, machine_line, matmul_peak_gflops
from yolo3.benchmarks.op_profile import GROUPS, group, profile_steps
from yolo3.benchmarks.workload import NUM_CLASSES, forward_gflops, random_training_batch  # noqa: F401  (forward_gflops re-exported)
from yolo3.config.loss_options import LossOptions
from yolo3.config.precision import resolve_training_precision
from yolo3.config.specs import get_spec
from yolo3.config.train_config import default
from yolo3.data.annotations import load_annotations
from yolo3.data.augment import AugmentConfig
from yolo3.data.pipeline import DatasetConfig, make_dataset
from yolo3.data.synthetic import make_synthetic_dataset
from yolo3.heads.registry import as_head
from yolo3.modeling.bodies import build_spec_body
from yolo3.modeling.loss import identity_loss
from yolo3.training.distribute import configure_logical_cpus
from yolo3.training.parallel import multi_gpu_model
from yolo3.training.recipe import dtype_policy


def _model(spec_name: str, size: Optional[int], policy: str, replicas: int, jit: bool,
           max_boxes: int, seed: int = 0, fused_batch_norm: bool = True):
    import keras

    spec = get_spec(spec_name)
    keras.utils.set_random_seed(seed)
    with dtype_policy(policy):
        body = build_spec_body(spec, NUM_CLASSES, input_shape=(size, size),
                               fused_batch_norm=fused_batch_norm)  # yolo3 train: fused
        model = as_head(spec.default_head()).training_model(
            body, NUM_CLASSES, max_boxes, LossOptions(box_loss=default("box_loss")))
        if replicas > 1:
            import tensorflow as tf
            kind = "gpu" if tf.config.list_physical_devices("GPU") else "cpu"
            model = multi_gpu_model(model, devices=[f"/{kind}:{i}" for i in range(replicas)])
        model.compile(keras.optimizers.Adam(1e-4), loss=identity_loss, jit_compile=jit)
    return spec, body, model


def throughput_child(p: dict) -> dict:
    """Images/s of ``p['steps']`` training steps (``model``, ``size``, ``batch``, ``policy``,
    ``jit``, ``replicas``); with ``data`` (an annotation file) the real pipeline feeds the steps
    and the share of time waiting for the next batch is measured."""
    if p["replicas"] > 1:
        import tensorflow as tf
        if not tf.config.list_physical_devices("GPU"):
            configure_logical_cpus(p["replicas"])
    max_boxes = 100
    spec, _, model = _model(p["model"], p["size"], p["policy"], p["replicas"], p["jit"],
                            max_boxes, fused_batch_norm=p.get("fused_batch_norm", True))
    if p.get("data"):
        batches = _pipeline(p, spec, max_boxes)
    else:
        fixed = random_training_batch(spec, p["size"], p["batch"], max_boxes)
        batches = iter(lambda: fixed, None)
    for _ in range(2):
        model.train_on_batch(*next(batches))
    waiting = 0.0
    start = time.perf_counter()
    for _ in range(p["steps"]):
        t0 = time.perf_counter()
        data = next(batches)
        waiting += time.perf_counter() - t0
        model.train_on_batch(*data)
    elapsed = time.perf_counter() - start
    return {"img_s": p["steps"] * p["batch"] / elapsed, "wait": waiting / elapsed}


def _pipeline(p: dict, spec, max_boxes: int):
    classes = [line.strip() for line in open(p["classes"], encoding="utf-8") if line.strip()]
    records = load_annotations(p["data"], classes)
    targets = as_head(spec.default_head()).target_encoding(NUM_CLASSES)
    ds = make_dataset(records, DatasetConfig((p["size"], p["size"]), p["batch"], training=True,
                                             targets=targets, max_boxes=max_boxes, seed=0,
                                             augment=AugmentConfig.preset("full")))
    return iter(ds.repeat())


def loss_child(p: dict) -> dict:
    """The loss of each of ``p['steps']`` steps from a seeded start on fixed random batches."""
    spec, _, model = _model(p["model"], p["size"], p["policy"], 1, False, 100)
    batches = [random_training_batch(spec, p["size"], p["batch"], 100, seed=s) for s in range(4)]
    losses = [float(model.train_on_batch(*batches[i % 4])) for i in range(p["steps"])]
    return {"losses": losses}


def profile_child(p: dict) -> dict:
    """Op-type milliseconds per step (:func:`yolo3.benchmarks.op_profile.profile_steps`) of
    ``p['steps']`` training steps on a fixed random batch, after two warm-up steps, and the
    steps' wall time."""
    spec, _, model = _model(p["model"], p["size"], p["policy"], 1, False, 100)
    batch = random_training_batch(spec, p["size"], p["batch"], 100)
    for _ in range(2):
        model.train_on_batch(*batch)
    start = time.perf_counter()
    times = profile_steps(lambda: model.train_on_batch(*batch), p["steps"])
    return {"times": times, "wall_ms": (time.perf_counter() - start) * 1000 / p["steps"]}


def mixed_policy() -> Optional[str]:
    """The mixed policy ``--precision auto`` trains in on this machine, or None (float32)."""
    chosen = resolve_training_precision("auto")
    return None if chosen == "float32" else chosen


def _synthetic(folder: str, images: int, size: int) -> tuple:
    return make_synthetic_dataset(folder, images, (size, size), style="textured", seed=0,
                                  image_format="jpg")


def run(args: argparse.Namespace) -> int:
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import tensorflow as tf

    peak = matmul_peak_gflops()
    gpus = tf.config.list_physical_devices("GPU")
    mixed = mixed_policy() or ("mixed_bfloat16" if args.force_mixed else None)
    target = "yolo3.benchmarks.training:throughput_child"
    rows: List[tuple] = []

    def row(label: str, p: dict, base: Optional[float] = None) -> Optional[float]:
        result = run_child(target, p)
        img_s, gflops = result["img_s"], 3 * forward_gflops(p["model"], p["size"])
        ratio = f"{img_s / base:.2f}x" if base else "1.00x"
        notes = f"{img_s * gflops:.0f} GFLOP/s = {100 * img_s * gflops / peak:.0f}% of the peak"
        if p.get("data"):
            notes += f"; waiting for data {100 * result['wait']:.1f}% of the time"
        rows.append((label, f"{img_s:.2f}", ratio, notes))
        return img_s

    device = "1 GPU" if gpus else "CPU"
    for model in args.variants:
        for batch in args.batch:
            base = dict(model=model, size=args.size, batch=batch, steps=args.steps,
                        policy="float32", jit=False, replicas=1)
            name = f"{model}-{args.size} b{batch}"
            fp32 = row(f"{name}, {device}, float32", base)
            if not args.no_jit:
                row(f"{name}, {device}, float32 + XLA", dict(base, jit=True), fp32)
            if args.keras_batch_norm:
                row(f"{name}, {device}, float32, Keras's batch norm", dict(base, fused_batch_norm=False),
                    fp32)
            if mixed:
                row(f"{name}, {device}, {mixed}", dict(base, policy=mixed), fp32)
                if args.keras_batch_norm:
                    row(f"{name}, {device}, {mixed}, Keras's batch norm",
                        dict(base, policy=mixed, fused_batch_norm=False), fp32)
                if not args.no_jit:
                    row(f"{name}, {device}, {mixed} + XLA", dict(base, policy=mixed, jit=True), fp32)
            else:
                rows.append((f"{name}, {device}, mixed", "-", "-", f"skipped: bfloat16 is "
                             f"{bfloat16_text()} on this CPU (auto trains float32; --force-mixed "
                             "times it anyway)"))
            if args.replicas > 1 and (not gpus or len(gpus) >= args.replicas):
                kind = "GPUs" if gpus else "logical CPUs"
                row(f"{name}, wrapper over {args.replicas} {kind}, float32",
                    dict(base, replicas=args.replicas), fp32)
    if args.data_wait:
        with tempfile.TemporaryDirectory(prefix="yolo3-bench-") as folder:
            annotations, classes = _synthetic(folder, args.data_images, 320)
            for model in args.variants:
                batch = args.batch[0]
                p = dict(model=model, size=args.size, batch=batch, steps=max(args.steps, 10),
                         policy="float32", jit=False, replicas=1, data=annotations,
                         classes=classes)
                row(f"{model}-{args.size} b{batch}, fed by the tf.data pipeline (full "
                    "augmentation)", p)
    print(machine_line(peak))
    print("| contender | images/s | vs float32 | notes |\n|---|---|---|---|")
    for r in rows:
        print(f"| {' | '.join(r)} |")
    if args.loss_steps:
        _loss_table(args, mixed)
    if args.profile:
        _profile_tables(args, mixed)
    return 0


def _profile_tables(args: argparse.Namespace, mixed: Optional[str]) -> None:
    """Per variant: where a step's op time goes in float32 and in the mixed policy, by group and
    for the op types that take the most time, with the speed-up of each."""
    if not mixed:
        print("\nprofile: skipped (auto trains float32 here; --force-mixed profiles the "
              "mixed policy anyway)")
        return
    for model in args.variants:
        p = dict(model=model, size=args.size, batch=args.batch[0], steps=args.steps)
        fp32 = run_child("yolo3.benchmarks.training:profile_child", dict(p, policy="float32"))
        low = run_child("yolo3.benchmarks.training:profile_child", dict(p, policy=mixed))
        print(f"\n{model}-{args.size} b{args.batch[0]}: op time per step, summed over "
              f"TensorFlow's compute threads (wall per step under the profiler: float32 "
              f"{fp32['wall_ms']:.0f} ms, {mixed} {low['wall_ms']:.0f} ms, "
              f"{fp32['wall_ms'] / low['wall_ms']:.2f}x)")
        print(f"| ops | float32 ms | {mixed} ms | speed-up | share of {mixed} op time |")
        print("|---|---|---|---|---|")
        total = sum(low["times"].values())
        fp32_groups, low_groups = group(fp32["times"]), group(low["times"])
        groups = [(g, fp32_groups[g], low_groups[g]) for g in GROUPS]
        top = sorted(set(fp32["times"]) | set(low["times"]),
                     key=lambda k: -max(fp32["times"].get(k, 0), low["times"].get(k, 0)))
        singles = [(f"  {k}", fp32["times"].get(k, 0.0), low["times"].get(k, 0.0))
                   for k in top[:args.profile_ops]]
        for label, a, b in [*groups, *singles]:
            ratio = f"{a / b:.2f}x" if a >= 1 and b >= 1 else "-"  # ms: below 1 it says little
            print(f"| {label} | {a:.0f} | {b:.0f} | {ratio} | {100 * b / total:.1f}% |")


def _loss_table(args: argparse.Namespace, mixed: Optional[str]) -> None:
    if not mixed:
        print(f"\nloss after {args.loss_steps} steps: skipped (auto trains float32 here; "
              "--force-mixed runs the mixed policy anyway)")
        return
    p = dict(model=args.loss_variant, size=args.loss_size, batch=8, steps=args.loss_steps)
    fp32 = run_child("yolo3.benchmarks.training:loss_child", dict(p, policy="float32"))["losses"]
    low = run_child("yolo3.benchmarks.training:loss_child", dict(p, policy=mixed))["losses"]
    print(f"\n{args.loss_variant}-{args.loss_size}, batch 8, same start and batches: loss at step 1 "
          f"float32 {fp32[0]:.4f}, {mixed} {low[0]:.4f}; after {args.loss_steps} steps float32 "
          f"{fp32[-1]:.4f}, {mixed} {low[-1]:.4f} ({100 * (low[-1] - fp32[-1]) / fp32[-1]:+.2f}%)")
