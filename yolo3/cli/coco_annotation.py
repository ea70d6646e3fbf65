"""COCO instances JSON -> keras-yolo3 text annotations and a classes file.

    python tools/coco_annotation.py --annotations instances_train2017.json --images train2017 \
        --out train.txt --classes-out coco_classes.txt
"""
from __future__ import annotations

import argparse
import sys
from typing import List, Optional

from yolo3.anchors import write_classes
from yolo3.data.annotations import coco_class_names, load_annotations, write_annotations
from yolo3.errors import FileFormatError


def main(argv: Optional[List[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--annotations", required=True, help="COCO instances_*.json")
    ap.add_argument("--images", required=True, help="folder holding the images")
    ap.add_argument("--out", required=True, help="text annotation file to write")
    ap.add_argument("--classes-out", help="classes file to write (names sorted by category id)")
    ap.add_argument("--include-crowd", action="store_true", help="keep iscrowd annotations")
    ap.add_argument("--no-check-images", action="store_true", help="do not open the images")
    args = ap.parse_args(argv)
    try:
        names = coco_class_names(args.annotations)
        records = load_annotations(args.annotations, include_crowd=args.include_crowd,
                                   check_images=not args.no_check_images, image_dir=args.images)
    except FileFormatError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    write_annotations(args.out, records)
    if args.classes_out:
        write_classes(args.classes_out, names)
    print(f"wrote {len(records)} images, {sum(len(r.boxes) for r in records)} boxes, "
          f"{len(names)} classes to {args.out}")
    return 0
