"""Anchors by k-means (distance 1 - IoU) on the box sizes of an annotation file.

    python tools/kmeans.py --annotations train.txt --clusters 9 --out model_data/my_anchors.txt
"""
from __future__ import annotations

import argparse
import sys
from typing import List, Optional

import numpy as np

from yolo3.anchors import (average_best_iou, default_anchors, format_anchors, kmeans_anchors,
                           read_classes, write_anchors)
from yolo3.data.annotations import load_annotations
from yolo3.errors import FileFormatError


def main(argv: Optional[List[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--annotations", required=True, help="text / VOC / COCO annotations")
    ap.add_argument("--classes", help="classes file (bounds class ids; VOC names)")
    ap.add_argument("--clusters", type=int, default=9)
    ap.add_argument("--out", required=True, help="anchors file to write")
    ap.add_argument("--input-size", type=int, nargs=2, metavar=("H", "W"),
                    help="scale box sizes as letterboxed into this input (default: image pixels)")
    ap.add_argument("--restarts", type=int, default=5)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    try:
        names = read_classes(args.classes) if args.classes else None
        records = load_annotations(args.annotations, names, check_images=args.input_size is not None)
    except FileFormatError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    whs = []
    for r in records:
        wh = (r.boxes[:, 2:4] - r.boxes[:, 0:2]).astype(np.float64)
        if args.input_size is not None and len(wh):
            ih, iw = r.image_hw
            wh = wh * min(args.input_size[0] / ih, args.input_size[1] / iw)
        whs.append(wh)
    box_wh = np.concatenate(whs) if whs else np.zeros((0, 2))
    if len(box_wh) < args.clusters:
        print(f"error: {len(box_wh)} boxes, fewer than {args.clusters} clusters", file=sys.stderr)
        return 1
    anchors, iou = kmeans_anchors(box_wh, args.clusters, restarts=args.restarts, seed=args.seed,
                                  progress=True)
    write_anchors(args.out, anchors)
    print(f"{len(box_wh)} boxes; anchors: {format_anchors(anchors).strip()}")
    print(f"average best IoU with the new anchors:      {iou:.4f}")
    for model in ("yolov3", "tiny"):
        print(f"average best IoU with the default {model:6s} anchors: "
              f"{average_best_iou(box_wh, default_anchors(model)):.4f}")
    print(f"wrote {args.out}")
    return 0
