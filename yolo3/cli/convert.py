"""``yolo3 convert`` (``yolo3-convert``, ``tools/convert.py``): Darknet -> Keras, a Keras body ->
Darknet, or a keras-yolo3 .h5 -> a yolo3 .keras.

Import:   yolo3 convert CFG WEIGHTS OUT.keras|OUT.weights.h5 [--classes FILE]
Export:   yolo3 convert MODEL.keras OUT.cfg OUT.weights [--anchors FILE] [--masks 6,7,8/3,4,5/0,1,2]
          [--num-classes N]  (anchors, masks, classes, input size and the weights header default to
          what MODEL carries (or, for older files, its side files), else to the variant's defaults)
Migrate:  yolo3 convert KERAS_YOLO3.h5 OUT.keras [--anchors FILE] [--classes FILE] [--variant V]
          (keras-yolo3's model_data/yolo.h5 or a trained_weights_*.h5; anchors default to the
          variant's COCO anchors, masks to keras-yolo3's)
"""
from __future__ import annotations

import argparse
import sys
from typing import List, Optional

from yolo3.cli.common import add_variant_argument, run_command, show_progress
from yolo3.cli.flags import INPUT_SIDE, InputPath, Number, OutputPath, Text

NAME = "convert"
DESCRIPTION = ("Convert Darknet cfg+weights to a Keras body (CFG WEIGHTS OUT.keras|OUT.weights.h5), "
               "a yolo3/converted Keras body to Darknet (MODEL.keras OUT.cfg OUT.weights), or a "
               "keras-yolo3 .h5 to a yolo3 model (IN.h5 OUT.keras).")


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("src", type=InputPath(), help="Darknet .cfg (import), Keras .keras model (export) or keras-yolo3 "
                               ".h5 (migrate)")
    p.add_argument("second", type=Text(4096), help="Darknet .weights (import), output .cfg (export) or output "
                                  ".keras (migrate)")
    p.add_argument("out", nargs="?", type=OutputPath("file"), help=".keras / .weights.h5 (import) or output .weights "
                                          "(export)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar while reading")
    p.add_argument("--classes", type=InputPath(text=True), help="import / migrate: class names to store in the .keras model "
                                     "(one per line, as many as the model's classes)")
    p.add_argument("--anchors", type=InputPath(text=True), help="export / migrate: anchors file (default: what the model "
                                     "carries, else the variant's COCO anchors)")
    add_variant_argument(p, old="--model-type", help="migrate: the variant of the .h5 (default: "
                         "from its layers)")
    p.add_argument("--masks", type=Text(pattern=r"[0-9]+(,[0-9]+)*(/[0-9]+(,[0-9]+)*)*",
                                        pattern_words="masks such as 6,7,8/3,4,5/0,1,2",
                                        example="3,4,5/0,1,2"),
                   help="export: masks per output, largest stride first, e.g. "
                                   "'3,4,5/0,1,2' (default: what the model carries, else the "
                                   "default masks)")
    p.add_argument("--num-classes", type=Number(int, 1, 100_000), help="export: class count (default: from the model)")
    p.add_argument("--width", type=INPUT_SIDE, help="export: [net] width (default: the model's input "
                                             "size, else 416)")
    p.add_argument("--height", type=INPUT_SIDE, help="export: [net] height (default: as --width)")


def _import(args) -> int:
    from yolo3.checkpoint.darknet_convert import convert
    from yolo3.data.class_names import read_classes
    names = read_classes(args.classes) if args.classes else None
    result = convert(args.src, args.second, args.out,
                     progress=not args.no_progress and show_progress(args),
                     class_names=names)
    print(result.summary())
    return 0


def _masks(text: str) -> List[List[int]]:
    from yolo3.core.errors import ArgumentError
    try:
        return [[int(v) for v in group.split(",")] for group in text.split("/")]
    except ValueError:
        raise ArgumentError(f"--masks {text!r}: expected e.g. 3,4,5/0,1,2") from None


def _export(args) -> int:
    from yolo3.checkpoint.metadata import read_sidecars
    from yolo3.checkpoint.saving import load_keras_model
    from yolo3.darknet.weights import Header
    from yolo3.export.darknet import export_darknet
    from yolo3.ops.anchors import read_anchors
    model, info = load_keras_model(args.src)
    meta = {} if info is not None else read_sidecars(args.src)
    anchors = (read_anchors(args.anchors) if args.anchors
               else info.anchors if info is not None else meta.get("anchors"))
    masks = (_masks(args.masks) if args.masks
             else info.masks if info is not None else meta.get("masks"))
    num_classes = (args.num_classes if args.num_classes is not None
                   else info.num_classes if info is not None else meta.get("num_classes"))
    size = (info.input_size if info is not None else meta.get("input_size")) or (416, 416)
    header = info.darknet_header if info is not None else meta.get("header")
    from yolo3.core.errors import ArgumentError
    try:
        export_darknet(model, args.second, args.out, anchors=anchors, masks=masks,
                       num_classes=num_classes, header=Header(*header) if header else None,
                       input_size=(args.height or size[0], args.width or size[1]))
    except ArgumentError as e:  # the model cannot be written as Darknet: name the file
        raise ArgumentError(f"{args.src}: {e}") from None
    print(f"wrote {args.second} and {args.out} from {args.src}")
    return 0


def _migrate(args) -> int:
    from yolo3.checkpoint.loading import load_keras_yolo3
    from yolo3.checkpoint.saving import atomic_save_model
    from yolo3.core.errors import ArgumentError
    if args.out is not None or not args.second.endswith(".keras"):
        raise ArgumentError("a keras-yolo3 .h5 converts to one .keras file: IN.h5 OUT.keras")
    from yolo3.core.paths import check_outputs
    check_outputs([("OUT.keras", args.second)], [args.src, args.anchors, args.classes])
    body, info = load_keras_yolo3(args.src, anchors_path=args.anchors, classes_path=args.classes,
                                  variant=args.variant, verbose=True)
    atomic_save_model(body, args.second, info)
    print(f"wrote {args.second}: {info.variant}, {info.num_classes} classes, masks {info.masks}, "
          f"anchors from {info.sources.get('anchors', 'the variant')}")
    return 0


def run(args: argparse.Namespace) -> int:
    from yolo3.core.errors import ArgumentError
    if args.src.endswith(".h5") and not args.src.endswith(".weights.h5"):
        return _migrate(args)
    if args.out is None:
        raise ArgumentError("give three paths: CFG WEIGHTS OUT (import) or MODEL.keras OUT.cfg "
                            "OUT.weights (export)")
    from yolo3.core.paths import check_outputs
    if args.src.endswith(".cfg"):
        check_outputs([("OUT", args.out)], [args.src, args.second, args.classes])
        from yolo3.checkpoint.metadata import check_sidecars
        check_sidecars(args.out, "OUT")  # OUT.anchors.txt, OUT.masks.json: written beside it
    else:
        check_outputs([("OUT.cfg", args.second), ("OUT.weights", args.out)],
                      [args.src, args.classes, args.anchors])
    if args.src.endswith(".cfg"):
        return _import(args)
    if args.src.endswith(".keras"):
        return _export(args)
    raise ArgumentError(f"{args.src}: expected a Darknet .cfg (import), a .keras model (export) "
                        "or a keras-yolo3 .h5 (migrate)")


def main(argv: Optional[List[str]] = None) -> int:
    return run_command(NAME, DESCRIPTION, add_arguments, run, argv,
                       epilog=__doc__.split("\n\n", 1)[1])


if __name__ == "__main__":
    sys.exit(main())
