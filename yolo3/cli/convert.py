"""``yolo3-convert``: Darknet -> Keras, or a Keras body -> Darknet.

Import:  yolo3-convert CFG WEIGHTS OUT.keras|OUT.weights.h5
Export:  yolo3-convert MODEL.keras OUT.cfg OUT.weights [--anchors FILE] [--masks 6,7,8/3,4,5/0,1,2]
         [--num-classes N]  (anchors, masks, classes default to the sidecars beside MODEL, written
         by the import, else to yolo3's defaults)
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import List, Optional

from yolo3.errors import Yolo3Error


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="yolo3-convert",
        description="Convert Darknet cfg+weights to a Keras body (CFG WEIGHTS OUT.keras|"
                    "OUT.weights.h5), or a yolo3/converted Keras body to Darknet "
                    "(MODEL.keras OUT.cfg OUT.weights).")
    p.add_argument("src", help="Darknet .cfg (import) or Keras .keras model (export)")
    p.add_argument("second", help="Darknet .weights (import) or output .cfg (export)")
    p.add_argument("out", help=".keras / .weights.h5 (import) or output .weights (export)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar while reading")
    p.add_argument("--anchors", help="export: anchors file (default: sidecar, else COCO anchors)")
    p.add_argument("--masks", help="export: masks per output, largest stride first, e.g. "
                                   "'3,4,5/0,1,2' (default: sidecar, else the default masks)")
    p.add_argument("--num-classes", type=int, help="export: class count (default: from the model)")
    p.add_argument("--width", type=int, help="export: [net] width (default: sidecar, else 416)")
    p.add_argument("--height", type=int, help="export: [net] height (default: sidecar, else 416)")
    return p


def _import(args) -> int:
    from yolo3.darknet.convert import convert
    result = convert(args.src, args.second, args.out, progress=not args.no_progress)
    print(result.summary())
    return 0


def _load_model(path: str):
    import keras
    import yolo3  # noqa: F401  (registers yolo3's serialisable layers)
    from yolo3.errors import FileFormatError
    try:
        return keras.models.load_model(path, compile=False)
    except Exception as e:  # Keras raises many types; report file and reason, not a traceback
        raise FileFormatError(path, f"cannot load Keras model: {e}") from None


def _export(args) -> int:
    from yolo3.anchors import read_anchors
    from yolo3.darknet.convert import read_sidecars
    from yolo3.darknet.export import export_darknet
    from yolo3.darknet.weights import Header
    meta = read_sidecars(args.src)
    anchors = read_anchors(args.anchors) if args.anchors else meta.get("anchors")
    masks = meta.get("masks")
    if args.masks:
        try:
            masks = [[int(v) for v in group.split(",")] for group in args.masks.split("/")]
        except ValueError:
            print(f"yolo3-convert: error: --masks {args.masks!r}: expected e.g. 3,4,5/0,1,2",
                  file=sys.stderr)
            return 2
    num_classes = args.num_classes if args.num_classes is not None else meta.get("num_classes")
    height, width = meta.get("input_size") or (416, 416)
    header = Header(*meta["header"]) if meta.get("header") else None
    model = _load_model(args.src)
    export_darknet(model, args.second, args.out, anchors=anchors, masks=masks,
                   num_classes=num_classes, header=header,
                   input_size=(args.height or height, args.width or width))
    print(f"wrote {args.second} and {args.out} from {args.src}")
    return 0


def main(argv: Optional[List[str]] = None) -> int:
    args = _parser().parse_args(argv)
    try:
        if args.src.endswith(".cfg"):
            return _import(args)
        if args.src.endswith(".keras"):
            return _export(args)
        print(f"yolo3-convert: error: {args.src}: expected a Darknet .cfg (import) or a .keras "
              f"model (export)", file=sys.stderr)
        return 2
    except (Yolo3Error, OSError) as e:
        print(f"yolo3-convert: error: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
