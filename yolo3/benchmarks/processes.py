"""Weak scaling across processes on JAX's distributed runtime, side by side in one run.

    yolo3 benchmark processes [--variant tiny-af] [--size 128] [--batch-size 8] [--steps 20]
                              [--warmup 3] [--processes 2] [--num-images 64] [--json FILE]

Contenders, each in fresh processes, every process pinned to one core of its own:

- ``1 process``: ``yolo3 train`` (the library's :func:`~yolo3.training.train.train`) on one CPU
  device, ``--batch-size`` images per step;
- ``N processes``: the same, N processes joined by ``--coordinator`` on 127.0.0.1, each with the
  same per-process batch (the global batch is N times larger: weak scaling), the batch norms'
  statistics over the global batch (one all-reduce per batch norm and direction);
- ``N processes, --replica-batch-norm``: the same, each process's batch norms on its own slice,
  one flat all-reduce a step (:mod:`yolo3.training.jax_parallel`).

Each runs ``--warmup`` + ``--steps`` steps of one epoch (NumPy pipeline, its images cached in
memory, no evaluation, no batch-norm recomputation, no pictures); the step time is the median
time between the ends of consecutive timed steps, so compiling and starting up are left out.
images/s = the global batch / the step time. The target of issue 68: N=2 at least 1.7 times one
process's images/s (judged on each N-process row). The machine line (CPU and its flags) is
printed beside the figures.
"""
from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import tempfile
import time
from typing import Dict, List

from yolo3.benchmarks.isolated import child_result, start_child
from yolo3.benchmarks.machine import SHOWN_FLAGS, cores, cpu_flags, cpu_model
from yolo3.core.errors import ArgumentError
from yolo3.core.fileio import write_text_atomic
from yolo3.data.synthetic import make_synthetic_dataset

TARGET = 1.7  # issue 68: 2 processes x 1 core against 1 process x 1 core


def train_steps(p: dict) -> dict:
    """In a fresh process: pin to core ``p["core"]``, train ``warmup + steps`` steps and return
    the times (s) at the end of each step."""
    os.sched_setaffinity(0, {int(p["core"])})  # before JAX sizes its thread pools
    os.environ["KERAS_BACKEND"] = "jax"
    import keras

    from yolo3.training.train import TrainConfig, train  # after the pinning: it imports JAX

    class StepEnds(keras.callbacks.Callback):
        def __init__(self):
            super().__init__()
            self.ends: List[float] = []

        def on_train_batch_end(self, batch, logs=None):
            float(logs["loss"])  # the step has finished on the device
            self.ends.append(time.perf_counter())

    cluster = {}
    if p.get("coordinator"):
        cluster = dict(coordinator=p["coordinator"], num_processes=p["processes"],
                       process_id=p["process_id"], cluster_timeout=300)
    config = TrainConfig.from_settings(dict(
        variant=p["variant"], annotations=p["annotations"], classes=p["classes"],
        input_size=(p["size"], p["size"]), batch_size=p["batch"], epochs=1,
        steps_per_epoch=p["warmup"] + p["steps"], seed=0, output_dir=p["output"],
        pictures=False, verbose=0, eval_every=0, bn_stats_images=0, pipeline="numpy",
        cache="ram", data_workers=1, val_split=0.25,
        replica_batch_norm=bool(p.get("replica_batch_norm")), **cluster))
    ends = StepEnds()
    train(config, callbacks=[ends])
    return {"ends": ends.ends}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _step_seconds(ends: List[float], warmup: int) -> float:
    timed = ends[max(1, warmup) - 1:]
    return statistics.median(b - a for a, b in zip(timed, timed[1:]))


def _contender(base: dict, processes: int, folder: str,
               replica_batch_norm: bool = False) -> Dict[str, float]:
    """Median step time and images/s of ``processes`` processes, one core each."""
    payloads = []
    port = _free_port()
    name = f"run{processes}{'_replica' if replica_batch_norm else ''}"
    for i in range(processes):
        payload = dict(base, core=i, output=os.path.join(folder, name),
                       replica_batch_norm=replica_batch_norm)
        if processes > 1:
            payload.update(coordinator=f"127.0.0.1:{port}", processes=processes, process_id=i)
        payloads.append(payload)
    children = [start_child("yolo3.benchmarks.processes:train_steps", p,
                            env={"KERAS_BACKEND": "jax"}) for p in payloads]
    results = [child_result(c) for c in children]
    step = max(_step_seconds(r["ends"], base["warmup"]) for r in results)
    label = f"{processes} process{'es' if processes > 1 else ''} x 1 core"
    if replica_batch_norm:
        label += ", replica BN"
    return {"contender": label, "processes": processes, "replica_batch_norm": replica_batch_norm,
            "step_ms": step * 1000.0, "images_per_s": processes * base["batch"] / step}


def run(args: argparse.Namespace) -> int:
    available = sorted(os.sched_getaffinity(0))
    if args.processes > len(available):
        raise ArgumentError(f"--processes {args.processes}: one core each, and this machine lets "
                            f"us use {len(available)}")
    flags = cpu_flags()
    print(f"machine: {cpu_model()}, {cores()} cores; CPU flags: "
          f"{' '.join(f for f in SHOWN_FLAGS if f in flags) or 'none of ' + ', '.join(SHOWN_FLAGS)}")
    print(f"{args.variant} at {args.size} px, {args.batch_size} images per process per step, "
          f"{args.steps} timed steps after {args.warmup}; JAX, one CPU core per process")
    with tempfile.TemporaryDirectory(prefix="yolo3_bench_") as tmp:
        per_step = args.batch_size * args.processes
        count = max(args.num_images, 4 * per_step + 4)  # a quarter held out: one global batch
        annotations, classes = make_synthetic_dataset(os.path.join(tmp, "data"), count,
                                                      (args.size, args.size), seed=0)
        base = dict(variant=args.variant, annotations=annotations, classes=classes,
                    size=args.size, batch=args.batch_size, steps=args.steps,
                    warmup=args.warmup)
        one = _contender(base, 1, tmp)
        rows = [_contender(base, args.processes, tmp),
                _contender(base, args.processes, tmp, replica_batch_norm=True)]
    print(f"{'contender':<40}{'step (ms)':>12}{'images/s':>12}{'/ 1 process':>13}")
    print(f"{one['contender']:<40}{one['step_ms']:>12.1f}{one['images_per_s']:>12.2f}")
    for row in rows:
        row["ratio"] = row["images_per_s"] / one["images_per_s"]
        verdict = ""
        if args.processes == 2:
            verdict = f"  (target {TARGET}x: {'met' if row['ratio'] >= TARGET else 'NOT met'})"
        print(f"{row['contender']:<40}{row['step_ms']:>12.1f}{row['images_per_s']:>12.2f}"
              f"{row['ratio']:>12.2f}x{verdict}")
    if args.json:
        write_text_atomic(args.json, json.dumps(dict(one=one, several=rows, cpu=cpu_model(),
                                                     size=args.size, batch=args.batch_size),
                                                indent=1))
    return 0
