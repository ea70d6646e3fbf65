"""Benchmark inference: OpenCV DNN forward vs our forward vs our end-to-end ``detect``.

    yolo3 benchmark inference [--cfg ../shared/darknet/yolov3.cfg | --model yolov3] [--image dog.jpg]
    (or python tools/benchmark_inference.py ...)

Without ``--cfg`` the cfg of ``--model`` is written from the registry. Writes random Darknet weights
for the cfg, converts them with ``yolo3.darknet.convert`` and times, on the same weights and input
size, batch 1, each contender in its own process (:mod:`yolo3.benchmarks.isolated`), the contenders
taking turns over ``--rounds``; medians of all runs:

- OpenCV DNN (``cv2.dnn.readNetFromDarknet``, CPU) forward of a prepared blob;
- our bare forward: the converted body on a prepared ``(1, h, w, 3)`` float32 input (compiled TF
  function, outputs copied to NumPy), at float32 and, where the hardware computes bfloat16
  natively, at bfloat16;
- our end-to-end time with the detector's default precision (``auto``): JPEG file -> decoded RGB
  array -> ``YOLO.detect`` (letterbox, forward, decode, NMS) -> boxes;
- images/s of ``YOLO.detect_batch`` on 8 images;
- the compute rate of our float32 forward (Darknet's FLOP count of the cfg) against the machine's
  float32 matrix-multiply yardstick;
- converter agreement: relative error (norm of difference / norm of OpenCV's) of the raw maps that
  feed each ``[yolo]`` layer, OpenCV's ``conv_<i>`` against our converted body and against the
  batch-norm-folded copy the detector runs, on the same input.

Targets (2-core CPU): ``detect`` end to end with default flags <= 0.6 x OpenCV's forward on a CPU
with native bfloat16, <= 1.0 x on an AVX2-only CPU.
"""
from __future__ import annotations

import argparse
import json
import os
import tempfile
from typing import List

import numpy as np

NAME = "inference"
DESCRIPTION = ("Inference: OpenCV DNN forward vs our forward vs our end-to-end detect, on the same "
               "random Darknet weights, each in its own process; plus the converter's agreement "
               "with OpenCV.")


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--cfg", help="Darknet cfg, e.g. ../shared/darknet/yolov3.cfg (default: the cfg "
                                 "of --model, written from the registry)")
    p.add_argument("--model", default="yolov3", help="variant whose cfg to use without --cfg")
    p.add_argument("--image", help="a JPEG for the end-to-end time (default: a synthetic 640x480 JPEG)")
    p.add_argument("--input-size", type=int, default=416)
    p.add_argument("--runs", type=int, default=12, help="timed runs per contender and round")
    p.add_argument("--rounds", type=int, default=2, help="turns each contender takes")
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--score", type=float, default=0.3)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--json", help="also write the figures to this JSON file")


def _rel_err(a: np.ndarray, ref: np.ndarray) -> float:
    """``|a - ref| / |ref|`` (Frobenius norms, float64)."""
    a64, r64 = np.asarray(a, np.float64), np.asarray(ref, np.float64)
    return float(np.linalg.norm(a64 - r64) / np.linalg.norm(r64))


def _prepared(image_path: str, size: int):
    """The image resized (no letterbox) to ``size``: ``(rgb uint8 (s, s, 3), x float32 (1, s, s, 3))``."""
    import cv2

    from yolo3.data.images import load_image
    resized = cv2.resize(load_image(image_path), (size, size))
    return resized, (resized.astype(np.float32) / 255.0)[None]


def opencv_child(p: dict) -> dict:
    """Time OpenCV DNN's forward of a prepared blob."""
    import cv2

    from yolo3.benchmarks.isolated import timed_runs
    net = cv2.dnn.readNetFromDarknet(p["cfg"], p["weights"])
    net.setPreferableBackend(cv2.dnn.DNN_BACKEND_OPENCV)
    net.setPreferableTarget(cv2.dnn.DNN_TARGET_CPU)
    names = net.getUnconnectedOutLayersNames()
    resized, _ = _prepared(p["image"], p["size"])
    blob = cv2.dnn.blobFromImage(resized, 1 / 255.0, (p["size"], p["size"]), swapRB=False, crop=False)

    def forward():
        net.setInput(blob)
        return net.forward(names)
    return {"times": timed_runs(forward, p["runs"], p["warmup"])}


def yolo3_child(p: dict) -> dict:
    """Time our forward (``what='forward'``, at ``precision``), ``detect`` from the JPEG file
    (``'e2e'``, default precision) or ``detect_batch`` of 8 images (``'batch8'``)."""
    from yolo3.benchmarks.isolated import timed_runs
    from yolo3.data.images import load_image
    from yolo3.detector import YOLO
    det = YOLO(p["model"], input_size=p["size"], score=p["score"], precision=p["precision"])
    what = p["what"]
    if what == "forward":
        _, x = _prepared(p["image"], p["size"])
        fn = lambda: det.forward(x)  # noqa: E731
    elif what == "e2e":
        fn = lambda: det.detect(load_image(p["image"]))  # noqa: E731
    else:
        batch = [load_image(p["image"])] * 8
        fn = lambda: det.detect_batch(batch)  # noqa: E731
    return {"times": timed_runs(fn, p["runs"], p["warmup"]), "precision": det.precision,
            "detections": len(det.detect(load_image(p["image"]))[0])}


def _agreement(cfg, cfg_path: str, weights: str, model_path: str, image: str, size: int,
               with_bf16: bool) -> dict:
    import cv2

    from yolo3.detector import YOLO
    net = cv2.dnn.readNetFromDarknet(cfg_path, weights)
    resized, x = _prepared(image, size)
    net.setInput(cv2.dnn.blobFromImage(resized, 1 / 255.0, (size, size), swapRB=False, crop=False))
    reference = [np.asarray(o).transpose(0, 2, 3, 1)
                 for o in net.forward([f"conv_{i}" for i in cfg.output_indices()])]
    det = YOLO(model_path, input_size=size, precision="float32")
    body = det.body(x, training=False)
    body = body if isinstance(body, (list, tuple)) else [body]
    out = {"body": max(_rel_err(np.asarray(o), r) for o, r in zip(body, reference)),
           "folded": max(_rel_err(o, r) for o, r in zip(det.forward(x), reference))}
    if with_bf16:
        half = YOLO(model_path, input_size=size, precision="bfloat16")
        out["bf16"] = max(_rel_err(o, r) for o, r in zip(half.forward(x), reference))
    return out


def _synthetic_jpeg(path: str, seed: int) -> str:
    from PIL import Image
    rng = np.random.default_rng(seed)
    yy, xx = np.mgrid[0:480, 0:640]
    synth = np.stack([xx % 256, yy % 256, (xx + yy) % 256], -1) + rng.integers(0, 40, (480, 640, 3))
    Image.fromarray(np.clip(synth, 0, 255).astype(np.uint8)).save(path, quality=90)
    return path


def run(args: argparse.Namespace) -> int:
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import cv2

    from yolo3.benchmarks.isolated import interleaved, median
    from yolo3.benchmarks.machine import machine_line, matmul_peak_gflops
    from yolo3.darknet.cfg import parse_cfg
    from yolo3.darknet.convert import convert
    from yolo3.darknet.random_weights import write_random_weights
    from yolo3.precision import resolve_precision

    size = args.input_size
    peak = matmul_peak_gflops()
    default_precision = resolve_precision("auto")
    with_bf16 = default_precision == "bfloat16"
    with tempfile.TemporaryDirectory(prefix="yolo3_bench_") as tmp:
        cfg_path = args.cfg
        if cfg_path is None:
            from yolo3.darknet.layout import layout_cfg_text
            cfg_path = os.path.join(tmp, f"{args.model}.cfg")
            with open(cfg_path, "w", encoding="utf-8") as f:
                f.write(layout_cfg_text(args.model, input_size=(size, size)))
        cfg = parse_cfg(cfg_path)
        gflop = cfg.conv_flops(size, size) / 1e9
        weights = os.path.join(tmp, "random.weights")
        write_random_weights(cfg_path, weights, seed=args.seed)
        model_path = os.path.join(tmp, "random.keras")
        convert(cfg_path, weights, model_path, progress=False)
        image = args.image or _synthetic_jpeg(os.path.join(tmp, "synthetic.jpg"), args.seed)
        common = dict(size=size, image=image, runs=args.runs, warmup=args.warmup, score=args.score,
                      model=model_path)
        child = "yolo3.benchmarks.inference:yolo3_child"
        contenders = {
            "opencv": ("yolo3.benchmarks.inference:opencv_child",
                       dict(common, cfg=cfg_path, weights=weights)),
            "forward": (child, dict(common, what="forward", precision="float32")),
            "e2e": (child, dict(common, what="e2e", precision="auto")),
            "batch8": (child, dict(common, what="batch8", precision="auto",
                                   runs=max(3, args.runs // 3))),
        }
        if with_bf16:
            contenders["bf16"] = (child, dict(common, what="forward", precision="bfloat16"))
        times = interleaved(contenders, args.rounds)
        agreement = _agreement(cfg, cfg_path, weights, model_path, image, size, with_bf16)
    med = {k: median(v) for k, v in times.items()}
    result = {
        "cfg": args.cfg or args.model, "input_size": size, "runs": len(times["opencv"]),
        "default_precision": default_precision,
        "opencv_forward_ms": med["opencv"], "our_forward_ms": med["forward"],
        "our_end_to_end_ms": med["e2e"], "batch8_images_per_s": 8000.0 / med["batch8"],
        "forward_vs_opencv": med["forward"] / med["opencv"],
        "end_to_end_vs_opencv": med["e2e"] / med["opencv"],
        "end_to_end_vs_forward": med["e2e"] / med["forward"],
        "matmul_peak_gflops": peak, "forward_gflops": gflop / (med["forward"] / 1000.0),
        "bf16_forward_ms": med.get("bf16"), "rel_err_vs_opencv_bf16": agreement.get("bf16"),
        "rel_err_vs_opencv_body": agreement["body"], "rel_err_vs_opencv_folded": agreement["folded"],
    }
    print(machine_line(peak))
    print(f"{os.path.basename(result['cfg'])} {size}x{size}, random weights, batch 1, each "
          f"contender in its own process, {args.rounds} rounds, median of {result['runs']} runs, "
          f"OpenCV {cv2.__version__}; detector default precision here: {default_precision}")
    rows: List[tuple] = [
        ("OpenCV DNN forward", med["opencv"], "1.00 x OpenCV"),
        ("yolo3 forward, float32", med["forward"], f"{result['forward_vs_opencv']:.2f} x OpenCV"),
    ]
    if with_bf16:
        rows.append(("yolo3 forward, bfloat16", med["bf16"], f"{med['bf16'] / med['opencv']:.2f} x OpenCV"))
    rows += [(f"yolo3 detect, default flags ({default_precision}), JPEG -> boxes", med["e2e"],
              f"{result['end_to_end_vs_opencv']:.2f} x OpenCV"),
             ("yolo3 detect_batch, 8 images", med["batch8"],
              f"{result['batch8_images_per_s']:.2f} images/s")]
    print(f"| {'measure':<52} | {'median ms':>10} | {'ratio':>18} |")
    print(f"|{'-' * 54}|{'-' * 12}|{'-' * 20}|")
    for name, ms, ratio in rows:
        print(f"| {name:<52} | {ms:>10.1f} | {ratio:>18} |")
    if not with_bf16:
        print("(no bfloat16 row: this machine computes bfloat16 only by emulation, so the default "
              "precision is float32 here)")
    print(f"float32 forward: {gflop:.1f} GFLOP per image at {result['forward_gflops']:.0f} GFLOP/s "
          f"({result['forward_gflops'] / peak:.2f} x the float32 matmul yardstick of {peak:.0f} "
          f"GFLOP/s)")
    print(f"converter agreement with OpenCV (raw [yolo] inputs, max over outputs): relative error "
          f"{agreement['body']:.1e} (converted body), {agreement['folded']:.1e} (folded copy)"
          + (f", {agreement['bf16']:.1e} (bfloat16)" if with_bf16 else ""))
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(result, f, indent=1)
    return 0
