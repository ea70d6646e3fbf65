"""Benchmark inference: OpenCV DNN and OpenVINO forwards vs our forward vs our end-to-end ``detect``.

    yolo3 benchmark inference [--cfg ../shared/darknet/yolov3.cfg | --variant yolov3] [--image dog.jpg]
    (or python tools/benchmark_inference.py ...)

Without ``--cfg`` the cfg of ``--variant`` is written from the registry. Writes random Darknet weights
for the cfg (or takes ``--weights``: real weights find a real number of boxes, which the NMS of the
end-to-end rows costs; random ones fill ``max_boxes``), converts them with
``yolo3.checkpoint.darknet_convert`` and times, on the same weights and input size, batch 1, each
contender in its own process (:mod:`yolo3.benchmarks.isolated`), the contenders taking turns over
``--rounds``; medians of all runs:

- OpenCV DNN (``cv2.dnn.readNetFromDarknet``, CPU) forward of a prepared blob;
- our bare forward: the converted body on a prepared ``(1, h, w, 3)`` float32 input (compiled TF
  function, outputs copied to NumPy), at float32 and, where the hardware computes bfloat16
  natively, at bfloat16;
- our end-to-end time with the detector's default precision (``auto``): JPEG file -> decoded RGB
  array -> ``YOLO.detect`` (letterbox, forward, decode, NMS) -> boxes;
- images/s of ``YOLO.detect_batch`` on 8 images (the Keras engine);
- frames/s of ``yolo3 detect`` on a 16-frame video (written from the image, mp4v; reading,
  ``detect_stream``) with the default engine;
- with OpenVINO installed: its bare forward of our IR of the same network (raw maps, latency
  hint) at its own precision choice, forced to float32, and int8 (NNCF, calibrated on synthetic
  images: timing only); our end-to-end time with the default engine (``--engine auto``:
  OpenVINO) beside the Keras engine's; images/s of ``detect_stream`` over 8 images (what
  ``yolo3 detect`` runs over a folder: asynchronous requests) with the default engine, and the
  video's frames/s with the Keras engine;
- the compute rate of our float32 forward (Darknet's FLOP count of the cfg) against the machine's
  float32 matrix-multiply yardstick;
- converter agreement: relative error (norm of difference / norm of OpenCV's) of the raw maps that
  feed each ``[yolo]`` layer, OpenCV's ``conv_<i>`` against our converted body and against the
  batch-norm-folded copy the detector runs, on the same input.

Targets (2-core CPU): ``detect`` end to end with default flags <= 0.6 x OpenCV's forward on a CPU
with native bfloat16, <= 1.0 x on an AVX2-only CPU; <= 1.3 x OpenVINO's bare forward on every CPU;
OpenVINO int8 <= 0.7 x OpenVINO's default; a folder with default flags >= 2 x the Keras engine's
``detect_batch`` images/s.
"""
from __future__ import annotations

import argparse
import json
import os
import tempfile
from typing import List

import numpy as np

from yolo3.benchmarks.contenders import prepared
from yolo3.benchmarks.isolated import interleaved, median
from yolo3.benchmarks.machine import bfloat16_text, machine_line, matmul_peak_gflops
from yolo3.checkpoint.darknet_convert import convert
from yolo3.config.precision import resolve_precision
from yolo3.core.fileio import write_text_atomic
from yolo3.darknet.cfg import parse_cfg
from yolo3.darknet.layout import layout_cfg_text
from yolo3.darknet.random_weights import write_random_weights
from yolo3.data.images import load_image
from yolo3.export import export_openvino
from yolo3.export.calibration import sample_images
from yolo3.inference.detector import YOLO
from yolo3.inference.engines import engine_installed, engine_version
from yolo3.inference.runners import relative_error

VIDEO_FRAMES = 16  # frames of the synthetic video timed end to end


def _agreement(cfg, cfg_path: str, weights: str, model_path: str, image: str, size: int,
               with_bf16: bool) -> dict:
    import cv2

    net = cv2.dnn.readNetFromDarknet(cfg_path, weights)
    resized, x = prepared(image, size)
    net.setInput(cv2.dnn.blobFromImage(resized, 1 / 255.0, (size, size), swapRB=False, crop=False))
    reference = [np.asarray(o).transpose(0, 2, 3, 1)
                 for o in net.forward([f"conv_{i}" for i in cfg.output_indices()])]
    det = YOLO(model_path, input_size=size, precision="float32")
    body = det.body(x, training=False)
    body = body if isinstance(body, (list, tuple)) else [body]
    out = {"body": max(relative_error(np.asarray(o), r) for o, r in zip(body, reference)),
           "folded": max(relative_error(o, r) for o, r in zip(det.forward(x), reference))}
    if with_bf16:
        half = YOLO(model_path, input_size=size, precision="bfloat16")
        out["bf16"] = max(relative_error(o, r) for o, r in zip(half.forward(x), reference))
    return out


def _synthetic_jpeg(path: str, seed: int) -> str:
    from PIL import Image
    rng = np.random.default_rng(seed)
    yy, xx = np.mgrid[0:480, 0:640]
    synth = np.stack([xx % 256, yy % 256, (xx + yy) % 256], -1) + rng.integers(0, 40, (480, 640, 3))
    Image.fromarray(np.clip(synth, 0, 255).astype(np.uint8)).save(path, quality=90)
    return path


def _synthetic_video(path: str, image_path: str, frames: int) -> str:
    """An mp4v video of ``frames`` frames: the image shifted a little more each frame."""
    import cv2
    bgr = load_image(image_path)[:, :, ::-1]
    h, w = bgr.shape[:2]
    writer = cv2.VideoWriter(path, cv2.VideoWriter_fourcc(*"mp4v"), 25.0, (w, h))
    try:
        for i in range(frames):
            writer.write(np.ascontiguousarray(np.roll(bgr, 8 * i, axis=1)))
    finally:
        writer.release()
    return path


def _openvino_irs(model_path: str, size: int, folder: str) -> tuple:
    """Our OpenVINO IRs of the converted model (raw maps, float32 input, any batch): float32 and
    int8 (calibrated on synthetic images: for timing, not accuracy). Returns their ``.xml``."""
    det = YOLO(model_path, input_size=size, precision="float32")
    common = dict(input_dtype="float32", batch=None, raw=True)
    float_ir = export_openvino(det, os.path.join(folder, "ir"), **common)
    int8_ir = export_openvino(det, os.path.join(folder, "ir8"), quantize="int8",
                              calibration=sample_images(det.input_hw, 8), **common)
    return float_ir, int8_ir


def run(args: argparse.Namespace) -> int:
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import cv2  # --weights without --cfg is refused before: yolo3.cli.relations

    size = args.input_size
    peak = matmul_peak_gflops()
    default_precision = resolve_precision("auto")
    with_bf16 = default_precision == "bfloat16"
    with tempfile.TemporaryDirectory(prefix="yolo3_bench_") as tmp:
        cfg_path = args.cfg
        if cfg_path is None:
            cfg_path = os.path.join(tmp, f"{args.variant}.cfg")
            with open(cfg_path, "w", encoding="utf-8") as f:
                f.write(layout_cfg_text(args.variant, input_size=(size, size)))
        cfg = parse_cfg(cfg_path)
        gflop = cfg.conv_flops(size, size) / 1e9
        weights = args.weights
        if weights is None:
            weights = os.path.join(tmp, "random.weights")
            write_random_weights(cfg_path, weights, seed=args.seed)
        model_path = os.path.join(tmp, "random.keras")
        convert(cfg_path, weights, model_path, progress=False)
        image = args.image or _synthetic_jpeg(os.path.join(tmp, "synthetic.jpg"), args.seed)
        video = _synthetic_video(os.path.join(tmp, "video.mp4"), image, VIDEO_FRAMES)
        common = dict(size=size, image=image, runs=args.runs, warmup=args.warmup, score=args.score,
                      model=model_path, video=video)
        child = "yolo3.benchmarks.contenders:yolo3_inference"
        few = max(3, args.runs // 3)
        contenders = {
            "opencv": ("yolo3.benchmarks.contenders:opencv_forward",
                       dict(common, cfg=cfg_path, weights=weights)),
            "forward": (child, dict(common, what="forward", precision="float32")),
            "e2e": (child, dict(common, what="e2e", precision="auto", engine="auto")),
            "batch8": (child, dict(common, what="batch8", precision="auto", runs=few)),
            "video": (child, dict(common, what="video", precision="auto", engine="auto",
                                  runs=few)),
        }
        if with_bf16:
            contenders["bf16"] = (child, dict(common, what="forward", precision="bfloat16"))
        openvino = engine_installed("openvino")
        if openvino:
            float_ir, int8_ir = _openvino_irs(model_path, size, tmp)
            peer = "yolo3.benchmarks.contenders:openvino_forward"
            contenders.update({
                "ov": (peer, dict(common, ir=float_ir)),
                "ov_f32": (peer, dict(common, ir=float_ir, hint="f32")),
                "ov_int8": (peer, dict(common, ir=int8_ir)),
                "e2e_keras": (child, dict(common, what="e2e", precision="auto", engine="keras")),
                "folder": (child, dict(common, what="stream8", precision="auto", engine="auto",
                                       runs=few)),
                "video_keras": (child, dict(common, what="video", precision="auto",
                                            engine="keras", runs=few)),
            })
        times = interleaved(contenders, args.rounds)
        agreement = _agreement(cfg, cfg_path, weights, model_path, image, size, with_bf16)
    med = {k: median(v) for k, v in times.items()}
    result = {
        "cfg": args.cfg or args.variant, "weights": args.weights or "random", "input_size": size,
        "runs": len(times["opencv"]),
        "default_precision": default_precision,
        "opencv_forward_ms": med["opencv"], "our_forward_ms": med["forward"],
        "our_end_to_end_ms": med["e2e"], "batch8_images_per_s": 8000.0 / med["batch8"],
        "video_frames_per_s": VIDEO_FRAMES * 1000.0 / med["video"],
        "forward_vs_opencv": med["forward"] / med["opencv"],
        "end_to_end_vs_opencv": med["e2e"] / med["opencv"],
        "end_to_end_vs_forward": med["e2e"] / med["forward"],
        "matmul_peak_gflops": peak, "forward_gflops": gflop / (med["forward"] / 1000.0),
        "bf16_forward_ms": med.get("bf16"), "rel_err_vs_opencv_bf16": agreement.get("bf16"),
        "rel_err_vs_opencv_body": agreement["body"], "rel_err_vs_opencv_folded": agreement["folded"],
    }
    print(machine_line(peak))
    print(f"{os.path.basename(result['cfg'])} {size}x{size}, "
          f"{os.path.basename(args.weights) if args.weights else 'random weights'}, batch 1, each "
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
             ("yolo3 detect_batch, 8 images, --engine keras", med["batch8"],
              f"{result['batch8_images_per_s']:.2f} images/s"),
             (f"yolo3 detect, video of {VIDEO_FRAMES} frames, default flags", med["video"],
              f"{result['video_frames_per_s']:.2f} frames/s")]
    print(f"| {'measure':<52} | {'median ms':>10} | {'ratio':>18} |")
    print(f"|{'-' * 54}|{'-' * 12}|{'-' * 20}|")
    for name, ms, ratio in rows:
        print(f"| {name:<52} | {ms:>10.1f} | {ratio:>18} |")
    if openvino:
        result.update(openvino_forward_ms=med["ov"], openvino_f32_forward_ms=med["ov_f32"],
                      openvino_int8_forward_ms=med["ov_int8"], keras_end_to_end_ms=med["e2e_keras"],
                      folder_images_per_s=8000.0 / med["folder"],
                      end_to_end_vs_openvino=med["e2e"] / med["ov"],
                      int8_vs_openvino=med["ov_int8"] / med["ov"],
                      folder_vs_batch8=med["batch8"] / med["folder"],
                      keras_video_frames_per_s=VIDEO_FRAMES * 1000.0 / med["video_keras"],
                      video_vs_keras=med["video_keras"] / med["video"])
        ov = med["ov"]
        print(f"with OpenVINO {engine_version('openvino')} installed (the default engine, "
              "--engine auto):")
        for name, ms, ratio in [
                ("OpenVINO forward, its default precision", ov, "1.00 x OpenVINO"),
                ("OpenVINO forward, float32", med["ov_f32"], f"{med['ov_f32'] / ov:.2f} x OpenVINO"),
                ("OpenVINO forward, int8 (NNCF)", med["ov_int8"],
                 f"{result['int8_vs_openvino']:.2f} x OpenVINO"),
                ("yolo3 detect, --engine keras, JPEG -> boxes", med["e2e_keras"],
                 f"{med['e2e_keras'] / ov:.2f} x OpenVINO"),
                ("yolo3 detect, default flags, JPEG -> boxes", med["e2e"],
                 f"{result['end_to_end_vs_openvino']:.2f} x OpenVINO"),
                ("yolo3 detect, folder of 8 images, default flags", med["folder"],
                 f"{result['folder_images_per_s']:.2f} images/s"),
                (f"yolo3 detect, video of {VIDEO_FRAMES} frames, --engine keras",
                 med["video_keras"], f"{result['keras_video_frames_per_s']:.2f} frames/s")]:
            print(f"| {name:<52} | {ms:>10.1f} | {ratio:>18} |")
        print(f"8 images with the default engine: {result['folder_vs_batch8']:.2f} x the Keras "
              f"engine's detect_batch images/s; video: {result['video_vs_keras']:.2f} x the Keras "
              f"engine's frames/s")
    if not with_bf16:
        print(f"(no bfloat16 row: bfloat16 is {bfloat16_text()} on this machine, so the default "
              "precision is float32 here)")
    print(f"float32 forward: {gflop:.1f} GFLOP per image at {result['forward_gflops']:.0f} GFLOP/s "
          f"({result['forward_gflops'] / peak:.2f} x the float32 matmul yardstick of {peak:.0f} "
          f"GFLOP/s)")
    print(f"converter agreement with OpenCV (raw [yolo] inputs, max over outputs): relative error "
          f"{agreement['body']:.1e} (converted body), {agreement['folded']:.1e} (folded copy)"
          + (f", {agreement['bf16']:.1e} (bfloat16)" if with_bf16 else ""))
    if args.json:
        write_text_atomic(args.json, json.dumps(result, indent=1))
    return 0
