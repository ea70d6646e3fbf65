"""``yolo3 coco`` (``yolo3-coco``, ``tools/coco_annotation.py``): COCO instances JSON ->
keras-yolo3 text annotations and a classes file.

    yolo3 coco --annotations instances_train2017.json --images train2017 \
        --out train.txt --classes-out coco_classes.txt
"""
from __future__ import annotations

import argparse
import sys
from typing import List, Optional

from yolo3.cli.common import protect_inputs, run_command
from yolo3.cli.flags import InputPath, OutputPath

NAME = "coco"
DESCRIPTION = "COCO instances JSON -> keras-yolo3 text annotations and a classes file."


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--annotations", required=True, type=InputPath(text=True),
                   help="COCO instances_*.json")
    p.add_argument("--images", required=True, type=InputPath("folder"),
                   help="folder holding the images")
    p.add_argument("--out", required=True, type=OutputPath("file", format="text"),
                   help="text annotation file to write")
    p.add_argument("--classes-out", type=OutputPath("file", format="text"),
                   help="classes file to write (names sorted by category id)")
    p.add_argument("--include-crowd", action="store_true", help="keep iscrowd annotations")
    p.add_argument("--no-check-images", action="store_true", help="do not open the images")


def run(args: argparse.Namespace) -> int:
    from yolo3.data.annotations import (
        coco_class_names,
        load_annotations,
        write_annotations,
    )
    from yolo3.data.class_names import write_classes
    names = coco_class_names(args.annotations)
    records = load_annotations(args.annotations, include_crowd=args.include_crowd,
                               check_images=not args.no_check_images, image_dir=args.images)
    protect_inputs(args, [r.path for r in records])
    write_annotations(args.out, records)
    if args.classes_out:
        write_classes(args.classes_out, names)
    print(f"wrote {len(records)} images, {sum(len(r.boxes) for r in records)} boxes, "
          f"{len(names)} classes to {args.out}")
    return 0


def main(argv: Optional[List[str]] = None) -> int:
    return run_command(NAME, DESCRIPTION, add_arguments, run, argv)


if __name__ == "__main__":
    sys.exit(main())
