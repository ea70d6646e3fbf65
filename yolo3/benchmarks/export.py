"""Deployment formats side by side: latency per image, model size and accuracy of Keras float32,
Keras bfloat16, TFLite float32 / float16 / int8 (LiteRT), ONNX Runtime, OpenVINO (its precision for
the machine, and int8 by NNCF; when installed) and OpenCV DNN.

    yolo3 benchmark export [--variants yolov3 tiny] [--input-size 416] [--darknet-dir DIR]
                           [--trained MODEL.keras --annotations VAL.txt] [--runs 10] [--rounds 2]
    (or python tools/benchmark_export.py ...)

Export cost: each format written by ``yolo3 export`` in a process of its own (as a user runs it,
the check against Keras included): its wall time, its peak memory (the largest process's peak
resident set, what ``/usr/bin/time`` reports, and the peak of the export with every process it
starts, summed: :mod:`yolo3.benchmarks.memory`) and the file's size.

Latency: for each variant the same Darknet weights (``tiny``: Darknet's real COCO weights from
``--darknet-dir`` when they are there, ``../shared/darknet`` by default; otherwise random weights
written for the registry's cfg) are converted, exported with ``yolo3 export --raw`` (each export
checked against Keras when written; a variant without a Darknet layout, such as ``tiny-af``:
random Keras weights, no OpenCV DNN) and timed, batch 1, on a prepared input: the raw maps, each
contender in its own process, taking turns over ``--rounds``; medians. int8 is calibrated on
``--calibration`` (default: 32 synthetic images). Keras bfloat16 runs only where it is native.

Accuracy (``--trained``, a model such as the demo's ``final.keras``, with ``--annotations``, its
held-out set): the model exported to each format (decoding included), every format's raw maps
decoded alike on the host, COCO mAP@0.5 and mAP@0.5:0.95; OpenCV DNN on its Darknet export.

Targets (2-core CPU): each format's export of YOLOv3-416 under 4 GB of memory; int8 mAP@0.5
within 0.01 and mAP@0.5:0.95 within 0.02 of float32, latency <= 0.5 x float32 TFLite, size
<= 0.3 x; ONNX Runtime <= 0.9 x OpenCV DNN for YOLOv3-416; OpenVINO int8 mAP@0.5 and
mAP@0.5:0.95 within 0.01 of OpenVINO float, latency <= 0.7 x it.
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
from typing import Dict, List, Optional, Tuple

import numpy as np

from yolo3.benchmarks.contenders import OpenCVRunner
from yolo3.benchmarks.isolated import interleaved, median
from yolo3.benchmarks.machine import machine_line, matmul_peak_gflops
from yolo3.benchmarks.memory import run_measured
from yolo3.checkpoint.darknet_convert import convert
from yolo3.checkpoint.metadata import ModelInfo
from yolo3.checkpoint.saving import atomic_save_model
from yolo3.config.precision import resolve_precision
from yolo3.config.specs import UnknownVariantError, get_spec
from yolo3.core.errors import CommandFailed
from yolo3.core.memory import gigabytes
from yolo3.darknet.cfg import parse_cfg
from yolo3.darknet.layout import layout_cfg_text
from yolo3.darknet.random_weights import write_random_weights
from yolo3.data.annotations import load_annotations
from yolo3.data.images import load_image
from yolo3.data.synthetic import make_synthetic_dataset
from yolo3.data.yolo_layout import read_data_file
from yolo3.evaluation.metrics import evaluate_detections
from yolo3.export.darknet import export_darknet
from yolo3.inference.detector import YOLO
from yolo3.inference.engines import engine_installed
from yolo3.inference.exported import ExportedDetector
from yolo3.modeling.bodies import build_body

FORMATS = ("keras", "keras-bf16", "tflite", "tflite-fp16", "tflite-int8", "onnx", "openvino",
           "openvino-int8", "opencv")
LABELS = {"keras": "Keras float32", "keras-bf16": "Keras bfloat16", "tflite": "TFLite float32",
          "tflite-fp16": "TFLite float16", "tflite-int8": "TFLite int8 (uint8 in)",
          "onnx": "ONNX Runtime", "openvino": "OpenVINO (its precision for the CPU)",
          "openvino-int8": "OpenVINO int8 (NNCF)", "opencv": "OpenCV DNN (Darknet files)"}


# -- runners of raw maps (children and the accuracy table) -----------------------------------------


# -- preparing the files ---------------------------------------------------------------------------

DARKNET_DIR = os.path.join("..", "shared", "darknet")  # --darknet-dir's default


def _darknet_files(model: str, size: int, darknet_dir: str, folder: str, seed: int
                   ) -> Tuple[Optional[str], Optional[str], str]:
    """``(cfg, weights, source)`` for ``model``: Darknet's real tiny weights when available;
    ``(None, None, ...)`` for a variant Darknet has no layout for (its weights are Keras's)."""
    real_cfg = os.path.join(darknet_dir, f"yolov3-{model}.cfg")
    real_weights = os.path.join(darknet_dir, f"yolov3-{model}.weights")
    cfg = os.path.join(folder, f"{model}.cfg")
    try:
        text = layout_cfg_text(model, input_size=(size, size))
    except UnknownVariantError:
        return None, None, "random Keras weights"
    with open(cfg, "w", encoding="utf-8") as f:
        f.write(text)
    if os.path.exists(real_weights) and os.path.exists(real_cfg):
        real = parse_cfg(real_cfg)
        if [c.spec.filters for c in real.convs()] == [c.spec.filters for c in parse_cfg(cfg).convs()]:
            return _resized_cfg(real_cfg, size, folder), real_weights, "Darknet's COCO weights"
    weights = os.path.join(folder, f"{model}.weights")
    write_random_weights(cfg, weights, seed=seed)
    return cfg, weights, "random weights"


def _keras_model(model: str, size: int, cfg: Optional[str], weights: Optional[str], path: str,
                 seed: int) -> None:
    """``path``: the Darknet files converted, or (no Darknet layout) a body of random weights."""
    if cfg is not None:
        convert(cfg, weights, path, progress=False)
        return
    import keras
    keras.utils.set_random_seed(seed)
    spec = get_spec(model)
    atomic_save_model(build_body(model, 80), path,
                      ModelInfo.of_head(spec.head, 80, variant=model, input_size=(size, size)))


def _resized_cfg(cfg_path: str, size: int, folder: str) -> str:
    """A copy of ``cfg_path`` whose ``[net]`` width and height are ``size``."""
    import re
    text = open(cfg_path, encoding="utf-8").read()
    text = re.sub(r"(?m)^(width|height)\s*=.*$", lambda m: f"{m.group(1)}={size}", text)
    out = os.path.join(folder, "real-" + os.path.basename(cfg_path))
    with open(out, "w", encoding="utf-8") as f:
        f.write(text)
    return out


# each format as `yolo3 export` writes it for the tables: (name, its file or folder, its flags)
EXPORTS = (
    ("saved-model", "{stem}-saved", ["--saved-model", "{out}"]),
    ("tflite", "{stem}.tflite", ["--tflite", "{out}", "--tflite-input", "float32"]),
    ("tflite-fp16", "{stem}-fp16.tflite", ["--tflite", "{out}", "--tflite-input", "float32",
                                           "--quantize", "float16"]),
    ("tflite-int8", "{stem}-int8.tflite", ["--tflite", "{out}", "--quantize", "int8", "{cal}"]),
    ("onnx", "{stem}.onnx", ["--onnx", "{out}", "--onnx-input", "float32"]),
    ("openvino", "{stem}-openvino", ["--openvino", "{out}", "--openvino-input", "float32"]),
    ("openvino-int8", "{stem}-openvino-int8", ["--openvino", "{out}", "--openvino-input",
                                               "float32", "--quantize", "int8", "{cal}"]),
)
COST_LABELS = {"saved-model": "SavedModel", "tflite": "TFLite float32",
               "tflite-fp16": "TFLite float16", "tflite-int8": "TFLite int8",
               "onnx": "ONNX", "openvino": "OpenVINO IR", "openvino-int8": "OpenVINO int8 (NNCF)"}


def _export_all(keras_path: str, folder: str, stem: str, calibration: str, count: int,
                raw: bool) -> Tuple[Dict[str, str], List[tuple]]:
    """``({format: path}, cost rows)``: every format of :data:`EXPORTS` written by ``yolo3
    export`` in its own measured process (checked against Keras as the command checks it), and
    each one's ``(label, seconds, peak of the largest process, peak of all together, size MB)``.
    OpenVINO's only when it is installed; the SavedModel is in the costs, not in the paths."""
    paths, rows = {}, []
    for fmt, name, flags in EXPORTS:
        if fmt.startswith("openvino") and not engine_installed("openvino"):
            continue
        out = os.path.join(folder, name.format(stem=os.path.basename(stem)))
        argv = []
        for flag in flags:
            argv += (["--calibration", calibration, "--calibration-images", str(count)]
                     if flag == "{cal}" else [flag.format(out=out)])
        measured = run_measured([sys.executable, "-m", "yolo3", "export", "--model", keras_path,
                                 *argv, *(["--raw"] if raw else []), "--quiet"])
        if measured.returncode != 0:
            last = (measured.stderr.strip().splitlines() or ["no message"])[-1]
            raise CommandFailed(f"yolo3 export of {keras_path} as {fmt} failed: {last}")
        largest = measured.largest_bytes
        rows.append((COST_LABELS[fmt], f"{measured.seconds:.1f}",
                     gigabytes(largest) if largest else "-",
                     gigabytes(measured.peak_bytes) if measured.peak_bytes else "-",
                     f"{_size_mb(out):.1f}"))
        if fmt != "saved-model":
            paths[fmt] = out
    return paths, rows


def _calibration_folder(folder: str, size: int, count: int, seed: int) -> str:
    make_synthetic_dataset(os.path.join(folder, "calibration"), count, (size, size), seed=seed,
                           style="textured")
    return os.path.join(folder, "calibration", "images")


def _size_mb(path: str) -> float:
    """Megabytes of a model file, or of the files in a model folder (an OpenVINO IR, a SavedModel)."""
    if os.path.isdir(path):
        return sum(os.path.getsize(os.path.join(root, f)) for root, _, files in os.walk(path)
                   for f in files) / 1e6
    return os.path.getsize(path) / 1e6


# -- the run ----------------------------------------------------------------------------------------

def run(args: argparse.Namespace) -> int:
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    peak = matmul_peak_gflops()
    native_bf16 = resolve_precision("auto") == "bfloat16"
    size = args.input_size
    tables: List[Tuple[str, List[tuple]]] = []
    costs: List[Tuple[str, List[tuple]]] = []
    accuracy: Optional[List[tuple]] = None
    with tempfile.TemporaryDirectory(prefix="yolo3-export-bench-") as tmp:
        calibration = args.calibration or _calibration_folder(tmp, size, args.calibration_images,
                                                              args.seed)
        for model in args.variants:
            folder = os.path.join(tmp, model)
            os.makedirs(folder)
            cfg, weights, source = _darknet_files(model, size, args.darknet_dir or DARKNET_DIR,
                                                  folder, args.seed)
            keras_path = os.path.join(folder, f"{model}.keras")
            _keras_model(model, size, cfg, weights, keras_path, args.seed)
            exported, cost_rows = _export_all(keras_path, folder, os.path.join(folder, model),
                                              calibration, args.calibration_images, True)
            costs.append((f"{model}-{size} ({source})", cost_rows))
            paths = {"keras": keras_path, **exported}
            if weights is not None:
                paths["opencv"] = weights
            common = dict(size=size, runs=args.runs, warmup=args.warmup, cfg=cfg,
                          strides=list(get_spec(model).strides))
            contenders = {fmt: ("yolo3.benchmarks.contenders:raw_map_latency",
                                dict(common, format=fmt, path=paths[fmt])) for fmt in paths}
            if native_bf16 or args.force_bf16:
                contenders["keras-bf16"] = ("yolo3.benchmarks.contenders:raw_map_latency",
                                            dict(common, format="keras-bf16", path=keras_path))
            times = {k: median(v) for k, v in interleaved(contenders, args.rounds).items()}
            tables.append((f"{model}-{size} ({source})", _latency_rows(times, paths, native_bf16,
                                                                       args.force_bf16)))
        if args.trained:
            accuracy = _accuracy(args, tmp, calibration, native_bf16 or args.force_bf16)
    print(machine_line(peak))
    print("exporting: each format written by `yolo3 export --raw` in a process of its own, its "
          "check against Keras included; peak memory of the largest process (as /usr/bin/time "
          "reports it) and of the export with the processes it starts, summed")
    for title, rows in costs:
        print(f"\n{title}")
        print("| format | seconds | peak memory, largest process | peak memory, all processes | "
              "size MB |")
        print("|---|---|---|---|---|")
        for r in rows:
            print("| " + " | ".join(r) + " |")
    print(f"\nbatch 1, raw maps of a prepared input, each contender in its own process, "
          f"{args.rounds} rounds x {args.runs} runs, medians")
    for title, rows in tables:
        print(f"\n{title}")
        print("| format | median ms | vs TFLite float32 | vs OpenCV DNN | size MB | vs float32 |")
        print("|---|---|---|---|---|---|")
        for r in rows:
            print("| " + " | ".join(r) + " |")
    if accuracy is not None:
        print(f"\naccuracy of {args.trained} on {args.data or args.annotations} (score 0.001, "
              "IoU 0.45, decoding on the host alike for all)")
        print("| format | mAP@0.5 | mAP@0.5:0.95 | vs Keras float32 |\n|---|---|---|---|")
        for r in accuracy:
            print("| " + " | ".join(r) + " |")
    return 0


def _latency_rows(times: Dict[str, float], paths: Dict[str, str], native_bf16: bool,
                  forced: bool) -> List[tuple]:
    rows = []
    for fmt in FORMATS:
        if fmt not in times:
            if fmt == "keras-bf16":
                rows.append((LABELS[fmt], "-", "-", "-", "-", "skipped: emulated on this CPU"))
            continue
        path = paths.get(fmt, paths["keras"])
        size = _size_mb(path)
        picks_float32 = fmt == "keras-bf16" and not native_bf16
        label = LABELS[fmt] + (" (auto picks float32 here)" if picks_float32 else "")
        rows.append((label, f"{times[fmt]:.1f}", f"{times[fmt] / times['tflite']:.2f}x",
                     f"{times[fmt] / times['opencv']:.2f}x" if "opencv" in times else "-",
                     f"{size:.1f}",
                     f"{size / _size_mb(paths['tflite']):.2f}x"))
    return rows


def _accuracy(args: argparse.Namespace, tmp: str, calibration: str, with_bf16: bool) -> List[tuple]:
    """mAP of ``--trained`` in every format on ``--annotations``."""
    folder = os.path.join(tmp, "trained")
    os.makedirs(folder)
    keras_det = YOLO(args.trained, score=0.001, iou=0.45, precision="float32")
    held_out = (read_data_file(args.data).sources("val") if getattr(args, "data", None)
                else args.annotations)
    records = load_annotations(held_out, keras_det.class_names)
    images = [load_image(r.path) for r in records]
    gt = {k: np.asarray(r.boxes, np.float64).reshape(-1, 5) for k, r in enumerate(records)}
    paths, _ = _export_all(args.trained, folder, os.path.join(folder, "trained"),
                        args.calibration or (held_out[0] if isinstance(held_out, list) else held_out),
                        args.calibration_images, False)
    cfg, weights = os.path.join(folder, "trained.cfg"), os.path.join(folder, "trained.weights")
    export_darknet(keras_det.body, cfg, weights, anchors=keras_det.anchors,
                   masks=keras_det.anchor_mask, input_size=keras_det.input_hw)
    detectors = {"keras": keras_det}
    if with_bf16:
        detectors["keras-bf16"] = YOLO(args.trained, score=0.001, iou=0.45, precision="bfloat16")
    for fmt, path in paths.items():
        detectors[fmt] = ExportedDetector(path, score=0.001, iou=0.45)
    opencv = OpenCVRunner(cfg, weights, _strides(keras_det))
    detectors["opencv"] = ExportedDetector.from_runner(opencv, _with_export(keras_det.info, keras_det),
                                                       score=0.001, iou=0.45)
    rows, reference = [], None
    for fmt in FORMATS:
        if fmt not in detectors:
            continue
        det = detectors[fmt]
        dets = {}
        for start in range(0, len(images), 8):
            for k, result in enumerate(det.detect_batch(images[start:start + 8]), start=start):
                dets[k] = result
        figures = evaluate_detections(gt, dets, keras_det.num_classes, keras_det.class_names)
        m50, m95 = float(figures["mAP50"]), float(figures["mAP50_95"])
        if reference is None:
            reference = (m50, m95)
        rows.append((LABELS[fmt], f"{m50:.4f}", f"{m95:.4f}",
                     f"{m50 - reference[0]:+.4f} / {m95 - reference[1]:+.4f}"))
    return rows


def _strides(detector) -> List[int]:
    return list(get_spec(detector.info.variant).strides)


def _with_export(info, detector):
    """``info`` with the export facts OpenCV's raw maps need (its input size)."""
    import dataclasses
    return dataclasses.replace(info, export={"input_size": list(detector.input_hw)})
