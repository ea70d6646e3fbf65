"""Benchmark inference: OpenCV DNN forward vs our forward vs our end-to-end ``detect``.

    yolo3 benchmark inference [--cfg ../shared/darknet/yolov3.cfg | --model yolov3] [--image dog.jpg]
    (or python tools/benchmark_inference.py ...)

Without ``--cfg`` the cfg of ``--model`` is written from the registry. Writes random Darknet weights
for the cfg in a temporary folder, converts them with
``yolo3.darknet.convert`` and, in one process on the same weights and input size, measures (batch 1,
median of ``--runs`` after warm-up):

- OpenCV DNN (``cv2.dnn.readNetFromDarknet``, CPU) forward of a prepared blob;
- our bare forward: the converted body on a prepared ``(1, h, w, 3)`` float32 input (compiled TF
  function, outputs copied to NumPy);
- our end-to-end time: JPEG file -> decoded RGB array -> ``YOLO.detect`` (letterbox, forward, decode,
  NMS) -> boxes;
- images/s of ``YOLO.detect_batch`` on 8 images;
- our bare forward with ``precision="bfloat16"`` where the CPU multiplies bfloat16 natively
  (AVX-512 BF16 / AMX) or on a GPU;
- the compute rate of our float32 forward (Darknet's FLOP count of the cfg) against the machine's
  float32 matrix-multiply peak, measured in the same run: how far float32 can still go;
- converter agreement: relative error (norm of difference / norm of OpenCV's) of the raw maps that
  feed each ``[yolo]`` layer, OpenCV's ``conv_<i>`` against our converted body and against the
  batch-norm-folded copy the detector runs, on the same input.

Targets (2-core CPU): our forward <= 0.85 x OpenCV's; end-to-end <= 1.10 x our forward.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
from typing import Callable, List

import numpy as np


def median_ms(fn: Callable[[], object], runs: int, warmup: int) -> float:
    for _ in range(warmup):
        fn()
    times: List[float] = []
    for _ in range(runs):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1000.0)
    return statistics.median(times)


def _rel_err(a: np.ndarray, ref: np.ndarray) -> float:
    """``|a - ref| / |ref|`` (Frobenius norms, float64)."""
    a64, r64 = np.asarray(a, np.float64), np.asarray(ref, np.float64)
    return float(np.linalg.norm(a64 - r64) / np.linalg.norm(r64))


NAME = "inference"
DESCRIPTION = ("Inference: OpenCV DNN forward vs our forward vs our end-to-end detect, on the same "
               "random Darknet weights, plus the converter's agreement with OpenCV.")


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--cfg", help="Darknet cfg, e.g. ../shared/darknet/yolov3.cfg (default: the cfg "
                                 "of --model, written from the registry)")
    p.add_argument("--model", default="yolov3", help="variant whose cfg to use without --cfg")
    p.add_argument("--image", help="a JPEG for the end-to-end time (default: a synthetic 640x480 JPEG)")
    p.add_argument("--input-size", type=int, default=416)
    p.add_argument("--runs", type=int, default=30)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--block", type=int, default=4, help="consecutive runs per measure before rotating")
    p.add_argument("--score", type=float, default=0.3)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--json", help="also write the figures to this JSON file")


def run(args: argparse.Namespace) -> int:
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

    import cv2
    import tensorflow as tf
    from PIL import Image

    from yolo3.benchmarks.machine import has_fast_bfloat16, machine_line, matmul_peak_gflops
    from yolo3.darknet.cfg import parse_cfg
    from yolo3.darknet.convert import convert
    from yolo3.darknet.random_weights import write_random_weights
    from yolo3.data.images import load_image
    from yolo3.detector import YOLO

    size = args.input_size
    tmp_cfg = None
    if args.cfg is None:
        from yolo3.darknet.layout import layout_cfg_text
        tmp_cfg = tempfile.NamedTemporaryFile("w", suffix=".cfg", prefix=f"{args.model}-",
                                              delete=False)
        tmp_cfg.write(layout_cfg_text(args.model, input_size=(size, size)))
        tmp_cfg.close()
        args.cfg = tmp_cfg.name
    cfg = parse_cfg(args.cfg)
    peak = matmul_peak_gflops()
    gflop = cfg.conv_flops(size, size) / 1e9
    with_bf16 = has_fast_bfloat16() or bool(tf.config.list_physical_devices("GPU"))
    with tempfile.TemporaryDirectory(prefix="yolo3_bench_") as tmp:
        weights = os.path.join(tmp, "random.weights")
        write_random_weights(args.cfg, weights, seed=args.seed)
        model_path = os.path.join(tmp, "random.keras")
        convert(args.cfg, weights, model_path, progress=False)
        image_path = args.image
        if image_path is None:
            rng = np.random.default_rng(args.seed)
            yy, xx = np.mgrid[0:480, 0:640]
            synth = np.stack([xx % 256, yy % 256, (xx + yy) % 256], -1) + rng.integers(0, 40, (480, 640, 3))
            image_path = os.path.join(tmp, "synthetic.jpg")
            Image.fromarray(np.clip(synth, 0, 255).astype(np.uint8)).save(image_path, quality=90)

        net = cv2.dnn.readNetFromDarknet(args.cfg, weights)
        net.setPreferableBackend(cv2.dnn.DNN_BACKEND_OPENCV)
        net.setPreferableTarget(cv2.dnn.DNN_TARGET_CPU)
        out_names = net.getUnconnectedOutLayersNames()
        rgb = load_image(image_path)
        resized = cv2.resize(rgb, (size, size))
        blob = cv2.dnn.blobFromImage(resized, 1 / 255.0, (size, size), swapRB=False, crop=False)

        def cv_forward():
            net.setInput(blob)
            return net.forward(out_names)

        det = YOLO(model_path, input_size=size, score=args.score)
        x = (resized.astype(np.float32) / 255.0)[None]

        def our_forward():
            return det.forward(x)

        def end_to_end():
            return det.detect(load_image(image_path))

        timed = {"opencv": cv_forward, "forward": our_forward, "e2e": end_to_end}
        if with_bf16:
            det16 = YOLO(model_path, input_size=size, score=args.score, precision="bfloat16")
            timed["bf16"] = lambda: det16.forward(x)

        raw_names = [f"conv_{i}" for i in cfg.output_indices()]
        net.setInput(blob)
        reference = [np.asarray(o).transpose(0, 2, 3, 1) for o in net.forward(raw_names)]
        body_out = det.body(x, training=False)
        body_out = body_out if isinstance(body_out, (list, tuple)) else [body_out]
        agreement = {"body": max(_rel_err(np.asarray(o), r) for o, r in zip(body_out, reference)),
                     "folded": max(_rel_err(o, r) for o, r in zip(our_forward(), reference))}
        if with_bf16:
            agreement["bf16"] = max(_rel_err(o, r) for o, r in zip(timed["bf16"](), reference))

        batch = [rgb] * 8

        def batch8():
            return det.detect_batch(batch)

        # Blocks of --block runs per measure, rotated, so that load from other processes hits all
        # alike; the first run of each block is dropped (the other library's idle thread pool may
        # still be spinning right after a switch).
        rows = {k: [] for k in timed}
        for fn in timed.values():
            for _ in range(args.warmup):
                fn()
        block = max(2, args.block)
        for _ in range(max(1, -(-args.runs // (block - 1)))):
            for key, fn in timed.items():
                for j in range(block):
                    t0 = time.perf_counter()
                    fn()
                    if j:
                        rows[key].append((time.perf_counter() - t0) * 1000.0)
        med = {k: statistics.median(v) for k, v in rows.items()}
        b8 = median_ms(batch8, max(3, args.runs // 4), 1)
        n_boxes = len(end_to_end()[0])

    result = {
        "cfg": args.cfg, "input_size": size, "runs": len(rows["opencv"]), "threads": os.cpu_count(),
        "opencv_forward_ms": med["opencv"], "our_forward_ms": med["forward"],
        "our_end_to_end_ms": med["e2e"], "batch8_images_per_s": 8000.0 / b8,
        "forward_vs_opencv": med["forward"] / med["opencv"],
        "end_to_end_vs_forward": med["e2e"] / med["forward"], "detections": n_boxes,
        "matmul_peak_gflops": peak, "forward_gflops": gflop / (med["forward"] / 1000.0),
        "bf16_forward_ms": med.get("bf16"), "rel_err_vs_opencv_bf16": agreement.get("bf16"),
        "rel_err_vs_opencv_body": agreement["body"], "rel_err_vs_opencv_folded": agreement["folded"],
    }
    if tmp_cfg is not None:
        os.unlink(tmp_cfg.name)
    print(machine_line(peak))
    print(f"{os.path.basename(args.cfg)} {size}x{size}, random weights, batch 1, median of "
          f"{len(rows['opencv'])} runs, {os.cpu_count()} CPU cores, OpenCV {cv2.__version__}")
    print(f"| {'measure':<40} | {'median ms':>10} | {'ratio':>22} |")
    print(f"|{'-' * 42}|{'-' * 12}|{'-' * 24}|")
    print(f"| {'OpenCV DNN forward':<40} | {med['opencv']:>10.1f} | {'1.00':>22} |")
    print(f"| {'yolo3 forward (bare body)':<40} | {med['forward']:>10.1f} | "
          f"{result['forward_vs_opencv']:>11.2f} x OpenCV    |")
    print(f"| {'yolo3 end-to-end (JPEG -> boxes)':<40} | {med['e2e']:>10.1f} | "
          f"{result['end_to_end_vs_forward']:>11.2f} x forward   |")
    print(f"| {'yolo3 detect_batch, 8 images':<40} | {b8:>10.1f} | "
          f"{result['batch8_images_per_s']:>12.2f} images/s |")
    if with_bf16:
        print(f"| {'yolo3 forward, precision=bfloat16':<40} | {med['bf16']:>10.1f} | "
              f"{med['bf16'] / med['opencv']:>11.2f} x OpenCV    |")
    else:
        print("(no bfloat16 row: this CPU has neither AVX-512 BF16 nor AMX, and there is no GPU)")
    print(f"float32 forward: {gflop:.1f} GFLOP per image at {result['forward_gflops']:.0f} GFLOP/s = "
          f"{100 * result['forward_gflops'] / peak:.0f}% of this machine's float32 matmul peak "
          f"({peak:.0f} GFLOP/s); 0.85 x OpenCV would need {gflop / (0.85 * med['opencv'] / 1000):.0f} GFLOP/s")
    print(f"converter agreement with OpenCV (raw [yolo] inputs, max over outputs): relative error "
          f"{agreement['body']:.1e} (converted body), {agreement['folded']:.1e} (folded copy)"
          + (f", {agreement['bf16']:.1e} (bfloat16)" if with_bf16 else ""))
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(result, f, indent=1)
    return 0
