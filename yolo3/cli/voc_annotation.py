"""``yolo3 voc`` (``yolo3-voc``, ``tools/voc_annotation.py``): Pascal VOC -> keras-yolo3 text
annotations.

    yolo3 voc --voc-root VOCdevkit --year 2007 --image-set train --out train.txt
"""
from __future__ import annotations

import argparse
import os
import sys
from typing import List, Optional

from yolo3.cli.common import protect_inputs, run_command
from yolo3.cli.flags import InputPath, OutputPath, Text

NAME = "voc"
DESCRIPTION = "Pascal VOC (VOCdevkit/VOC<year>) -> keras-yolo3 text annotations."


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--voc-root", required=True, type=InputPath("folder"),
                   help="folder holding VOC<year>/ (e.g. VOCdevkit)")
    p.add_argument("--year", default="2007", type=Text(pattern=r"[0-9A-Za-z_-]{1,20}",
                                                       pattern_words="a VOC year, e.g. 2007"))
    p.add_argument("--image-set", default="train", type=Text(
                       pattern=r"[^/\\]{1,200}", pattern_words="an image set's name",
                       example="train"),
                   help="ImageSets/Main/<name>.txt (train, val, test...)")
    p.add_argument("--out", required=True, type=OutputPath("file", format="text"),
                   help="text annotation file to write")
    p.add_argument("--classes", type=InputPath(text=True),
                   help="classes file (default: the 20 VOC classes)")
    p.add_argument("--include-difficult", action="store_true", help="keep objects marked difficult")
    p.add_argument("--no-check-images", action="store_true", help="do not open the images")


def run(args: argparse.Namespace) -> int:
    from yolo3.data.annotations import VOC_CLASSES, load_annotations, write_annotations
    from yolo3.data.class_names import read_classes
    names = read_classes(args.classes) if args.classes else list(VOC_CLASSES)
    image_set = os.path.join(args.voc_root, f"VOC{args.year}", "ImageSets", "Main",
                             f"{args.image_set}.txt")
    records = load_annotations(image_set, names, include_difficult=args.include_difficult,
                               check_images=not args.no_check_images)
    protect_inputs(args, [image_set] + [r.path for r in records])
    write_annotations(args.out, records)
    print(f"wrote {len(records)} images, {sum(len(r.boxes) for r in records)} boxes to {args.out}")
    return 0


def main(argv: Optional[List[str]] = None) -> int:
    return run_command(NAME, DESCRIPTION, add_arguments, run, argv)


if __name__ == "__main__":
    sys.exit(main())
