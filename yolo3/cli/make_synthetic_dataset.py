"""``yolo3 synth`` (``yolo3-synth``, ``tools/make_synthetic_dataset.py``): write the synthetic
shapes dataset: images/, annotations.txt (+ train.txt/val.txt), classes.txt.

    yolo3 synth --out data/shapes --num-images 600 --size 256 --val-fraction 0.2
"""
from __future__ import annotations

import argparse
import sys
from typing import List, Optional

from yolo3.cli.common import run_command
from yolo3.data.synthetic import SHAPES, STYLES

NAME = "synth"
DESCRIPTION = ("Write the synthetic shapes dataset (solid shapes on textured backgrounds, exact "
               "boxes): images/, annotations.txt, train.txt/val.txt, classes.txt.")


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--out", required=True, help="output folder")
    p.add_argument("--num-images", type=int, default=500)
    p.add_argument("--size", type=int, nargs="+", default=[256], help="image size: S or H W")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--classes", nargs="+", default=["circle", "square", "triangle"], choices=SHAPES)
    p.add_argument("--format", choices=["png", "jpg"], default="png")
    p.add_argument("--max-objects", type=int, default=None,
                   help="objects per image at most (default: 4 solid, 6 textured)")
    p.add_argument("--style", choices=STYLES, default="solid",
                   help="solid: saturated solid shapes (the demo's); textured: harder (textured "
                        "shapes, busy backgrounds, smaller objects)")
    p.add_argument("--min-size", type=float, default=None,
                   help="smallest object side as a fraction of the image (default: the style's)")
    p.add_argument("--max-size", type=float, default=None,
                   help="largest object side as a fraction of the image (default: the style's)")
    p.add_argument("--val-fraction", type=float, default=0.0,
                   help="also write train.txt / val.txt with this fraction held out")


def run(args: argparse.Namespace) -> int:
    from yolo3.data.synthetic import make_synthetic_dataset
    from yolo3.paths import check_output_dir
    check_output_dir(args.out, "--out")
    size = (args.size[0], args.size[0]) if len(args.size) == 1 else tuple(args.size[:2])
    ann, classes = make_synthetic_dataset(args.out, args.num_images, size, args.seed,
                                          tuple(args.classes), image_format=args.format,
                                          max_objects=args.max_objects,
                                          val_fraction=args.val_fraction, style=args.style,
                                          min_frac=args.min_size, max_frac=args.max_size)
    print(f"wrote {args.num_images} images: {ann}, {classes}")
    return 0


def main(argv: Optional[List[str]] = None) -> int:
    return run_command(NAME, DESCRIPTION, add_arguments, run, argv)


if __name__ == "__main__":
    sys.exit(main())
