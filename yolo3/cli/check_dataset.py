"""Check a dataset: read every annotation and image header, print statistics and every problem.

    python tools/check_dataset.py --annotations train.txt --classes classes.txt [--draw 8 --draw-dir out]

Exits 1 when there is any problem (each printed as FILE:LINE: REASON), else 0.
"""
from __future__ import annotations

import argparse
import os
import sys
from typing import List, Optional, Sequence

import numpy as np

from yolo3.anchors import read_classes
from yolo3.data.annotations import Record, coco_class_names, detect_format, scan_annotations
from yolo3.errors import FileFormatError

_COLOURS = [(230, 25, 75), (60, 180, 75), (255, 225, 25), (0, 130, 200), (245, 130, 48),
            (145, 30, 180), (70, 240, 240), (240, 50, 230), (210, 245, 60), (250, 190, 212)]


def draw_records(records: Sequence[Record], names: Sequence[str], out_dir: str) -> List[str]:
    """Draw each record's boxes and class names on its image; write ``out_dir/<n>_<stem>.png``."""
    from PIL import Image, ImageDraw

    from yolo3.data.images import load_image

    os.makedirs(out_dir, exist_ok=True)
    written = []
    for k, rec in enumerate(records):
        img = Image.fromarray(load_image(rec.path))
        draw = ImageDraw.Draw(img)
        for x1, y1, x2, y2, c in rec.boxes:
            colour = _COLOURS[int(c) % len(_COLOURS)]
            draw.rectangle([x1, y1, x2 - 1, y2 - 1], outline=colour, width=2)
            label = names[int(c)] if int(c) < len(names) else str(int(c))
            draw.text((x1 + 2, max(0, y1 - 11)), label, fill=colour)
        stem = os.path.splitext(os.path.basename(rec.path))[0]
        path = os.path.join(out_dir, f"{k:03d}_{stem}.png")
        img.save(path)
        written.append(path)
    return written


def _stats(records: Sequence[Record], names: Sequence[str]) -> str:
    lines = [f"images: {len(records)}  (without boxes: {sum(len(r.boxes) == 0 for r in records)})"]
    boxes = np.concatenate([r.boxes for r in records]) if records else np.zeros((0, 5), np.float32)
    lines.append(f"boxes: {len(boxes)}")
    counts = np.bincount(boxes[:, 4].astype(int), minlength=len(names)) if len(boxes) else \
        np.zeros(len(names), int)
    width = max([len(n) for n in names] + [5])
    for i, n in enumerate(names):
        lines.append(f"  {n:<{width}} {counts[i]:8d}")
    if len(boxes):
        w = boxes[:, 2] - boxes[:, 0]
        h = boxes[:, 3] - boxes[:, 1]
        side = np.sqrt(w * h)
        q = np.percentile(side, [0, 10, 50, 90, 100])
        lines.append("box size sqrt(w*h) px: min {:.1f}  p10 {:.1f}  median {:.1f}  p90 {:.1f}  max {:.1f}"
                     .format(*q))
        bins = [0, 8, 16, 32, 64, 128, 256, 512, np.inf]
        hist, _ = np.histogram(side, bins=bins)
        lines.append("  " + "  ".join(f"[{int(a)},{'inf' if np.isinf(b) else int(b)}): {c}"
                                      for a, b, c in zip(bins[:-1], bins[1:], hist)))
        ar = w / np.maximum(h, 1e-9)
        lines.append("aspect w/h: p10 {:.2f}  median {:.2f}  p90 {:.2f}".format(*np.percentile(ar, [10, 50, 90])))
    return "\n".join(lines)


def main(argv: Optional[List[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--annotations", required=True, help="text / VOC / COCO annotations")
    ap.add_argument("--classes", help="classes file (COCO files bring their own)")
    ap.add_argument("--images", help="image folder (COCO; default: guessed from the JSON path)")
    ap.add_argument("--include-difficult", action="store_true")
    ap.add_argument("--include-crowd", action="store_true")
    ap.add_argument("--draw", type=int, default=0, help="draw the boxes of N random images")
    ap.add_argument("--draw-dir", default="dataset_check", help="folder for the drawn PNG files")
    ap.add_argument("--seed", type=int, default=0, help="seed choosing the images to draw")
    args = ap.parse_args(argv)
    try:
        if args.classes:
            names = read_classes(args.classes)
        elif detect_format(args.annotations) == "coco":
            names = coco_class_names(args.annotations)
        else:
            names = None
        res = scan_annotations(args.annotations, names, include_difficult=args.include_difficult,
                               include_crowd=args.include_crowd, image_dir=args.images)
    except FileFormatError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    if names is None:
        top = max([int(r.boxes[:, 4].max()) for r in res.records if len(r.boxes)] + [-1])
        names = [str(i) for i in range(top + 1)]
    print(_stats(res.records, names))
    if res.clipped_boxes:
        print(f"warning: {res.clipped_boxes} boxes extend past their image and were clipped")
    if res.skipped_difficult or res.skipped_crowd:
        print(f"skipped: {res.skipped_difficult} difficult, {res.skipped_crowd} crowd boxes")
    if args.draw and res.records:
        rng = np.random.default_rng(args.seed)
        pick = rng.choice(len(res.records), size=min(args.draw, len(res.records)), replace=False)
        files = draw_records([res.records[i] for i in sorted(pick)], names, args.draw_dir)
        print(f"drew {len(files)} images into {args.draw_dir}")
    for p in res.problems:
        print(f"problem: {p}", file=sys.stderr)
    if res.problems:
        print(f"{len(res.problems)} problems", file=sys.stderr)
        return 1
    print("no problems")
    return 0
