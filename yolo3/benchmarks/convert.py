"""Benchmark the Darknet -> Keras converter on a full-size random yolov3.weights (~248 MB).

    yolo3 benchmark convert [--cfg PATH/yolov3.cfg | --variant yolov3] [--out-format keras|weights.h5]
    (or python tools/benchmark_convert.py ...)

Without ``--cfg`` the cfg of ``--variant`` is written from the registry. Writes random weights for the cfg in a temporary folder, then converts them in a fresh Python process
(so its peak RSS is the converter's alone) and prints a table: file size, in-process conversion time
(parse + read + build + load + save), the process's total wall time (including importing
TensorFlow) and its peak RSS. The target is <= 15 s and <= 2 GB on a 2-core machine.
"""
from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

from yolo3.benchmarks.machine import machine_line, matmul_peak_gflops
from yolo3.benchmarks.memory import run_measured
from yolo3.core.errors import ArgumentError, CommandFailed
from yolo3.darknet.layout import layout_cfg_text
from yolo3.darknet.random_weights import write_random_weights

_CHILD = """
import json, sys, time
t0 = time.perf_counter()
from yolo3.checkpoint.darknet_convert import convert
t1 = time.perf_counter()
convert(sys.argv[1], sys.argv[2], sys.argv[3], progress=False)
t2 = time.perf_counter()
print(json.dumps({"import_s": t1 - t0, "convert_s": t2 - t1}))
"""


def run(args: argparse.Namespace) -> int:
    if args.cfg is not None:
        args.cfg = Path(args.cfg)
        if not args.cfg.is_file():
            raise ArgumentError(f"cfg not found: {args.cfg}")
    with tempfile.TemporaryDirectory() as tmp:
        if args.cfg is None:
            args.cfg = Path(tmp) / f"{args.variant}.cfg"
            args.cfg.write_text(layout_cfg_text(args.variant), encoding="utf-8")
        weights = Path(tmp) / "random.weights"
        t = time.perf_counter()
        write_random_weights(args.cfg, weights, seed=0)
        gen_s = time.perf_counter() - t
        out = Path(tmp) / f"converted.{args.out_format}"
        # its peak is its own VmHWM: a child's ru_maxrss would count this process's pages too
        proc = run_measured([sys.executable, "-c", _CHILD, str(args.cfg), str(weights), str(out)])
        wall_s = proc.seconds
        if proc.returncode:
            raise CommandFailed(f"the converter process failed ({proc.returncode}):\n"
                                f"{proc.stderr[-3000:]}")
        times = json.loads(proc.stdout.strip().splitlines()[-1])
        peak = (f"{proc.largest_bytes / 2**20:.0f} MB" if proc.largest_bytes
                else "unknown (no /proc)")
        rows = [("cfg", str(args.cfg.name)),
                ("weights size", f"{weights.stat().st_size / 1e6:.1f} MB"),
                ("output", f"{out.name} ({out.stat().st_size / 1e6:.1f} MB)"),
                ("random weights written in", f"{gen_s:.1f} s"),
                ("import yolo3 + TF", f"{times['import_s']:.1f} s"),
                ("convert (parse, read, build, load, save)", f"{times['convert_s']:.1f} s"),
                ("converter process wall time", f"{wall_s:.1f} s"),
                ("converter process peak RSS", peak)]
    print(machine_line(matmul_peak_gflops()))
    width = max(len(k) for k, _ in rows)
    print(f"{'measure':<{width}} | value\n{'-' * width}-+------")
    for k, v in rows:
        print(f"{k:<{width}} | {v}")
    return 0
