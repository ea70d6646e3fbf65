"""``yolo3 kmeans`` (``yolo3-kmeans``, ``tools/kmeans.py``): anchors by k-means (distance 1 - IoU)
on the box sizes of an annotation file.

    yolo3 kmeans --annotations train.txt --clusters 9 --out model_data/my_anchors.txt
"""
from __future__ import annotations

import argparse
import sys
from typing import List, Optional

from yolo3.cli.common import (
    add_input_size_argument,
    add_source_arguments,
    annotation_sources,
    protect_inputs,
    run_command,
    show_progress,
)
from yolo3.cli.flags import SEED, InputPath, Number, OutputPath

NAME = "kmeans"
DESCRIPTION = ("Anchors by k-means (distance 1 - IoU, k-means++, restarts) on the box sizes of an "
               "annotation file; reports the average best IoU of the new and default anchors.")


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_source_arguments(p, "text / VOC / COCO annotations", split="train")
    p.add_argument("--classes", type=InputPath(text=True),
                   help="classes file (bounds class ids; VOC names)")
    p.add_argument("--clusters", type=Number(int, 1, 1000), default=9,
                   help="number of anchors (default 9)")
    p.add_argument("--out", required=True, type=OutputPath("file", format="text"), help="anchors file to write")
    add_input_size_argument(p, None, "scale box sizes as letterboxed into this input: one side "
                            "or HEIGHT WIDTH (default: image pixels)")
    p.add_argument("--restarts", type=Number(int, 1, 1000), default=5,
                   help="k-means runs, the best kept (default 5)")
    p.add_argument("--seed", type=SEED, default=0)


def run(args: argparse.Namespace) -> int:
    from yolo3.config.specs import anchor_specs
    from yolo3.core.errors import ArgumentError
    from yolo3.data.annotations import box_sizes, load_annotations
    from yolo3.data.class_names import read_classes
    from yolo3.ops.anchors import (
        average_best_iou,
        format_anchors,
        kmeans_anchors,
        write_anchors,
    )
    sources, names = annotation_sources(args)
    names = read_classes(args.classes) if args.classes else names
    records = load_annotations(sources, names, check_images=args.input_size is not None)
    protect_inputs(args, [r.path for r in records])
    hw = None if args.input_size is None else (
        (args.input_size,) * 2 if isinstance(args.input_size, int) else args.input_size)
    box_wh = box_sizes(records, hw)
    if len(box_wh) < args.clusters:
        raise ArgumentError(f"{args.data or args.annotations}: {len(box_wh)} boxes, fewer than "
                            f"{args.clusters} clusters")
    anchors, iou = kmeans_anchors(box_wh, args.clusters, restarts=args.restarts, seed=args.seed,
                                  progress=show_progress(args))
    write_anchors(args.out, anchors)
    print(f"{len(box_wh)} boxes; anchors: {format_anchors(anchors).strip()}")
    print(f"average best IoU with the new anchors:      {iou:.4f}")
    for spec in anchor_specs():
        print(f"average best IoU with the default {spec.name:10s} anchors: "
              f"{average_best_iou(box_wh, spec.default_anchors()):.4f}")
    print(f"wrote {args.out}")
    return 0


def main(argv: Optional[List[str]] = None) -> int:
    return run_command(NAME, DESCRIPTION, add_arguments, run, argv)


if __name__ == "__main__":
    sys.exit(main())
