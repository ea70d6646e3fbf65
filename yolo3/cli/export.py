"""``yolo3 export`` (``yolo3-export``, ``tools/export.py``): export a detector as a SavedModel,
TFLite (float32, float16, int8), ONNX and/or OpenVINO IR (float32, float16, int8) model, each
checked against the Keras model.

Exported models take images letterboxed to the fixed input size and return the raw maps and (unless
``--raw``) boxes (x1, y1, x2, y2 input pixels), scores, classes and a count, with decoding and NMS
inside; they carry the class names, anchors and input size, so ``yolo3 detect`` and
``yolo3 evaluate`` run them with ``--model`` like a ``.keras`` model. See :mod:`yolo3.export`.
"""
from __future__ import annotations

import argparse
import os
import sys
from typing import Optional, Sequence

from yolo3.cli.common import (
    add_exist_ok_argument,
    add_model_arguments,
    add_threshold_arguments,
    protect_inputs,
    run_command,
    show_progress,
)
from yolo3.cli.flags import BATCH, InputPath, Number, OutputPath
from yolo3.inference.conversion import ONNX_OPSET

NAME = "export"
DESCRIPTION = ("Export a detector for deployment (SavedModel, TFLite float32/float16/int8, ONNX, "
               "OpenVINO IR float32/float16/int8), decoding and NMS inside, each run once and "
               "checked against the Keras model.")


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_model_arguments(p, "a .keras model, .weights.h5 template weights or a keras-yolo3 .h5")
    add_threshold_arguments(p, score_help="score threshold baked into the model",
                            iou_help="NMS IoU threshold baked into the model")
    p.add_argument("--max-boxes", type=Number(int, 1, 10_000), default=100,
                   help="detections per image")
    p.add_argument("--saved-model", type=OutputPath("folder"),
                   help="write a SavedModel to this folder")
    p.add_argument("--tflite", type=OutputPath("file", format="tflite"), help="write a TFLite model to this file")
    p.add_argument("--quantize", choices=["none", "float16", "int8"], default="none",
                   help="TFLite and OpenVINO weights: none (float32), float16, or int8 "
                        "(weights and activations, calibrated on --calibration; OpenVINO's by "
                        "NNCF)")
    p.add_argument("--calibration", type=InputPath("any"), help="int8 calibration images: an annotation file (text, VOC, "
                                         "COCO) or a folder of images; also the export check's "
                                         "images")
    p.add_argument("--calibration-images", type=Number(int, 1, 100_000), default=100,
                   help="at most this many calibration images (a seeded sample)")
    p.add_argument("--tflite-input", choices=["uint8", "int8", "float32"], default="uint8",
                   help="TFLite input type: uint8 RGB 0..255 (default), int8 (int8 models), "
                        "float32 RGB in [0, 1]")
    p.add_argument("--tflite-batch", type=BATCH, default=1, help="fixed TFLite batch size")
    p.add_argument("--onnx", type=OutputPath("file", format="onnx"), help=f"write an ONNX model to this file (opset {ONNX_OPSET}, needs "
                                  "yolo3[export])")
    p.add_argument("--onnx-input", choices=["uint8", "float32"], default="uint8",
                   help="ONNX input type")
    p.add_argument("--openvino", metavar="DIR", type=OutputPath("folder"), help="write an OpenVINO IR into this folder "
                   "(model.xml, model.bin; needs yolo3[openvino])")
    p.add_argument("--openvino-input", choices=["uint8", "float32"], default="uint8",
                   help="OpenVINO input type")
    p.add_argument("--openvino-batch", type=Number(int, 0, BATCH.hi), default=1, metavar="N",
                   help="fixed OpenVINO batch size (default 1); 0: any batch (with --raw)")
    p.add_argument("--raw", action="store_true", help="only the raw maps as outputs (no decoding)")
    add_exist_ok_argument(p)


def run(args: argparse.Namespace) -> int:
    if not (args.saved_model or args.tflite or args.onnx or args.openvino):
        args.parser.error("give --saved-model DIR, --tflite FILE, --onnx FILE and/or --openvino DIR")
    from yolo3.core.extras import require
    require("tensorflow", "yolo3 export (every format converts through TensorFlow)")
    from yolo3.checkpoint.metadata import OPENVINO_ENTRIES, SAVED_MODEL_ENTRIES
    from yolo3.core.output_folder import check_output_folder
    from yolo3.export import (
        export_onnx,
        export_openvino,
        export_saved_model,
        export_tflite,
        verify_export,
    )
    from yolo3.export.calibration import (
        calibration_images,
        calibration_paths,
        sample_images,
    )
    from yolo3.inference.detector import YOLO
    for flag, folder, entries in (("--saved-model", args.saved_model, SAVED_MODEL_ENTRIES),
                                  ("--openvino", args.openvino, OPENVINO_ENTRIES)):
        if folder:
            check_output_folder(folder, flag, args.exist_ok, entries)
    paths = (calibration_paths(args.calibration, args.calibration_images)
             if args.calibration else None)
    protect_inputs(args, paths or [])  # the calibration images: never an output
    det = YOLO(args.model, args.anchors, args.classes, score=args.score, iou=args.iou,
               input_size=args.input_size, variant=args.variant, max_boxes=args.max_boxes,
               precision="float32")
    h, w = det.input_hw
    images = calibration_images(paths, det.input_hw, show_progress(args)) if paths else None
    check = images[:8] if images else sample_images(det.input_hw)

    def done(path: str, what: str, quantize: str = "none") -> None:
        report = verify_export(path, det, check, quantize)
        size = _written_size(path)
        print(f"wrote {what} {path} ({size / 1e6:.1f} MB); {report.summary()}", file=sys.stderr)

    if args.saved_model:
        export_saved_model(det, args.saved_model, exist_ok=args.exist_ok)
        done(args.saved_model, f"SavedModel (input (batch, {h}, {w}, 3) uint8; 'serve_float', "
                               f"'serve_image')")
    if args.tflite:
        export_tflite(det, args.tflite, input_dtype=args.tflite_input, batch=args.tflite_batch,
                      quantize=args.quantize, calibration=images, raw=args.raw)
        done(args.tflite, f"TFLite {args.quantize if args.quantize != 'none' else 'float32'} "
                          f"(input ({args.tflite_batch}, {h}, {w}, 3) {args.tflite_input})",
             args.quantize)
    if args.onnx:
        export_onnx(det, args.onnx, input_dtype=args.onnx_input, raw=args.raw)
        done(args.onnx, f"ONNX opset {ONNX_OPSET} (input (1, {h}, {w}, 3) {args.onnx_input})")
    if args.openvino:
        batch = args.openvino_batch or None
        export_openvino(det, args.openvino, input_dtype=args.openvino_input, batch=batch,
                        raw=args.raw, quantize=args.quantize, calibration=images,
                        exist_ok=args.exist_ok)
        done(args.openvino, f"OpenVINO IR {args.quantize if args.quantize != 'none' else 'float32'}"
                            f" (input ({batch or 'any'}, {h}, {w}, 3) {args.openvino_input})",
             args.quantize)
    return 0


def _written_size(path: str) -> int:
    """Bytes of an exported file, or of what yolo3 wrote in an exported folder (not the user's
    other files beside it)."""
    if not os.path.isdir(path):
        return os.path.getsize(path)
    from yolo3.core.output_folder import read_contents
    return sum(os.path.getsize(os.path.join(path, rel)) for rel in read_contents(path).ours)


def main(argv: Optional[Sequence[str]] = None) -> int:
    return run_command(NAME, DESCRIPTION, add_arguments, run, argv)


if __name__ == "__main__":
    sys.exit(main())
