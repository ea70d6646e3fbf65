"""Write the synthetic shapes dataset: images/, annotations.txt (+ train.txt/val.txt), classes.txt.

    python tools/make_synthetic_dataset.py --out data/shapes --num-images 600 --size 256 --val-fraction 0.2
"""
from __future__ import annotations

import argparse
from typing import List, Optional

from yolo3.data.synthetic import SHAPES, make_synthetic_dataset


def main(argv: Optional[List[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True, help="output folder")
    ap.add_argument("--num-images", type=int, default=500)
    ap.add_argument("--size", type=int, nargs="+", default=[256], help="image size: S or H W")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--classes", nargs="+", default=["circle", "square", "triangle"], choices=SHAPES)
    ap.add_argument("--format", choices=["png", "jpg"], default="png")
    ap.add_argument("--max-objects", type=int, default=4)
    ap.add_argument("--val-fraction", type=float, default=0.0,
                    help="also write train.txt / val.txt with this fraction held out")
    args = ap.parse_args(argv)
    size = (args.size[0], args.size[0]) if len(args.size) == 1 else tuple(args.size[:2])
    ann, classes = make_synthetic_dataset(args.out, args.num_images, size, args.seed, tuple(args.classes),
                                          image_format=args.format, max_objects=args.max_objects,
                                          val_fraction=args.val_fraction)
    print(f"wrote {args.num_images} images: {ann}, {classes}")
    return 0
