"""Pascal VOC -> keras-yolo3 text annotations.

    python tools/voc_annotation.py --voc-root VOCdevkit --year 2007 --image-set train --out train.txt
"""
from __future__ import annotations

import argparse
import os
import sys
from typing import List, Optional

from yolo3.anchors import read_classes
from yolo3.data.annotations import VOC_CLASSES, load_annotations, write_annotations
from yolo3.errors import FileFormatError


def main(argv: Optional[List[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--voc-root", required=True, help="folder holding VOC<year>/ (e.g. VOCdevkit)")
    ap.add_argument("--year", default="2007")
    ap.add_argument("--image-set", default="train", help="ImageSets/Main/<name>.txt (train, val, test...)")
    ap.add_argument("--out", required=True, help="text annotation file to write")
    ap.add_argument("--classes", help="classes file (default: the 20 VOC classes)")
    ap.add_argument("--include-difficult", action="store_true", help="keep objects marked difficult")
    ap.add_argument("--no-check-images", action="store_true", help="do not open the images")
    args = ap.parse_args(argv)
    names = read_classes(args.classes) if args.classes else list(VOC_CLASSES)
    image_set = os.path.join(args.voc_root, f"VOC{args.year}", "ImageSets", "Main", f"{args.image_set}.txt")
    try:
        records = load_annotations(image_set, names, include_difficult=args.include_difficult,
                                   check_images=not args.no_check_images)
    except FileFormatError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    write_annotations(args.out, records)
    print(f"wrote {len(records)} images, {sum(len(r.boxes) for r in records)} boxes to {args.out}")
    return 0
