"""``yolo3 export`` (``yolo3-export``, ``tools/export.py``): export a detector as a SavedModel
and/or TFLite model.

Both take images already resized to the fixed input size (no letterbox) and return ``boxes``
(x1, y1, x2, y2 input pixels), ``scores``, ``classes`` and ``count``; see :mod:`yolo3.export`.
"""
from __future__ import annotations

import argparse
import sys
from typing import Optional, Sequence

from yolo3.cli.common import add_model_arguments, run_command

NAME = "export"
DESCRIPTION = "Export a detector (decoding and NMS inside) as a SavedModel and/or a TFLite model."


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_model_arguments(p, "a .keras model or .weights.h5 template weights")
    p.add_argument("--score", type=float, default=0.3, help="score threshold baked into the model")
    p.add_argument("--iou", type=float, default=0.45, help="NMS IoU threshold baked into the model")
    p.add_argument("--max-boxes", type=int, default=100, help="detections per image")
    p.add_argument("--saved-model", help="write a SavedModel to this folder")
    p.add_argument("--tflite", help="write a TFLite model to this file")
    p.add_argument("--tflite-input", choices=["uint8", "float32"], default="uint8",
                   help="TFLite input type (float32: RGB in [0, 1])")
    p.add_argument("--tflite-batch", type=int, default=1, help="fixed TFLite batch size")


def run(args: argparse.Namespace) -> int:
    if not args.saved_model and not args.tflite:
        args.parser.error("give --saved-model DIR and/or --tflite FILE")
    from yolo3.detector import YOLO
    from yolo3.export import export_saved_model, export_tflite

    det = YOLO(args.model, args.anchors, args.classes, score=args.score, iou=args.iou,
               input_size=args.input_size, model_type=args.model_type, max_boxes=args.max_boxes)
    h, w = det.input_hw
    if args.saved_model:
        export_saved_model(det, args.saved_model)
        print(f"wrote SavedModel {args.saved_model} (input (batch, {h}, {w}, 3) uint8; "
              "'serve_float': float32 in [0, 1])", file=sys.stderr)
    if args.tflite:
        export_tflite(det, args.tflite, input_dtype=args.tflite_input, batch=args.tflite_batch)
        print(f"wrote TFLite {args.tflite} (input ({args.tflite_batch}, {h}, {w}, 3) "
              f"{args.tflite_input})", file=sys.stderr)
    return 0


def main(argv: Optional[Sequence[str]] = None) -> int:
    return run_command(NAME, DESCRIPTION, add_arguments, run, argv)


if __name__ == "__main__":
    sys.exit(main())
