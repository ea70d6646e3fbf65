"""``yolo3 annotations`` (``yolo3-annotations``, ``tools/annotations.py``): convert annotations
between the supported layouts (keras-yolo3 text rows, Pascal VOC, COCO JSON, the YOLO layout).

    yolo3 annotations --data data.yaml --to coco --out coco/            # every split
    yolo3 annotations --annotations train.txt --classes classes.txt --to yolo --out yolo/
"""
from __future__ import annotations

import argparse
import sys
from typing import List, Optional

from yolo3.cli.common import (
    add_exist_ok_argument,
    add_source_arguments,
    protect_inputs,
    run_command,
)
from yolo3.cli.flags import InputPath, OutputPath, Text
from yolo3.config.choices import ANNOTATION_FORMATS

NAME = "annotations"
DESCRIPTION = ("Convert annotations between layouts: keras-yolo3 text rows, Pascal VOC, COCO JSON "
               "and the YOLO layout (data.yaml, images/, labels/).")


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_source_arguments(p, "annotations to convert: text rows, a VOC folder or image set, a COCO "
                            "JSON", split=None)
    p.add_argument("--classes", type=InputPath(text=True),
                   help="classes file (COCO and data files bring their own)")
    p.add_argument("--images", type=InputPath("folder"),
                   help="image folder of a COCO JSON (default: guessed from its path)")
    p.add_argument("--to", required=True, choices=ANNOTATION_FORMATS, help="the layout to write")
    p.add_argument("--out", required=True, type=OutputPath("folder"), help="a new or empty folder to write it into (or one "
                   "yolo3 wrote before; with --exist-ok, one holding other files, which are kept)")
    p.add_argument("--split-name", default="train", type=Text(
                       pattern=r"[A-Za-z0-9_-]{1,64}", pattern_words="a split name: letters, "
                       "digits, _ and -", example="train"), help="the split name of --annotations in "
                   "the output (--data keeps its splits; default %(default)s)")
    add_exist_ok_argument(p)


def run(args: argparse.Namespace) -> int:
    from yolo3.core.errors import ArgumentError
    from yolo3.core.output_folder import check_output_folder
    from yolo3.data.annotations import coco_class_names, detect_format, load_annotations
    from yolo3.data.class_names import read_classes
    from yolo3.data.conversion import write_dataset, written_entries
    from yolo3.data.yolo_layout import read_data_file

    if args.data:
        dataset = read_data_file(args.data)
        names = read_classes(args.classes) if args.classes else dataset.names
        split_names = [args.split] if args.split else list(dataset.splits)
        sources = {split: dataset.sources(split) for split in split_names}
    else:
        sources, names = {args.split_name: args.annotations}, None
        if args.classes:
            names = read_classes(args.classes)
        elif detect_format(args.annotations) == "coco":
            names = coco_class_names(args.annotations)
        elif detect_format(args.annotations) != "voc":
            raise ArgumentError("--classes is needed with text and YOLO-layout --annotations")
    if names is None:  # a VOC source without --classes: the 20 VOC classes
        from yolo3.data.annotations import VOC_CLASSES
        names = list(VOC_CLASSES)
    check_output_folder(args.out, "--out", args.exist_ok, written_entries(args.to, list(sources)))
    splits = {split: load_annotations(source, names, image_dir=args.images)
              for split, source in sources.items()}
    protect_inputs(args, [r.path for records in splits.values() for r in records])
    out = write_dataset(args.out, args.to, splits, names, exist_ok=args.exist_ok, flag="--out")
    counts = ", ".join(f"{split} {len(r)} images / {sum(len(x.boxes) for x in r)} boxes"
                       for split, r in splits.items())
    print(f"wrote {args.to} annotations into {out}: {counts}")
    return 0


def main(argv: Optional[List[str]] = None) -> int:
    return run_command(NAME, DESCRIPTION, add_arguments, run, argv)


if __name__ == "__main__":
    sys.exit(main())
