"""``yolo3 synth`` (``yolo3-synth``, ``tools/make_synthetic_dataset.py``): write a synthetic
shapes dataset: images/, annotations.txt (+ train.txt/val.txt), classes.txt.

    yolo3 synth --out data/shapes --num-images 600 --size 256 --val-fraction 0.2
    yolo3 synth --out data/photo --style photo --num-images 600 --val-fraction 0.2 [--photos DIR]
"""
from __future__ import annotations

import argparse
import os
import sys
from typing import List, Optional

from yolo3.cli.common import SideOrHeightWidth, add_exist_ok_argument, run_command
from yolo3.cli.flags import (
    IMAGE_SIDE,
    SEED,
    SHARE,
    WEIGHT,
    InputPath,
    Number,
    OutputPath,
)
from yolo3.config.choices import BOX_EXTENTS, SIZE_DISTRIBUTIONS
from yolo3.data.synthetic import SHAPES, STYLES

ALL_STYLES = (*STYLES, "photo")

NAME = "synth"
DESCRIPTION = ("Write a synthetic shapes dataset with exact boxes: images/, annotations.txt, "
               "train.txt/val.txt, classes.txt. Styles: solid (the demo's), textured, photo "
               "(realistic: photo-textured shapes on real photographs, occlusion, small and thin "
               "objects, non-square images, negatives).")


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--out", required=True, type=OutputPath("folder"), help="output folder")
    p.add_argument("--num-images", type=Number(int, 1, 1_000_000), default=500)
    p.add_argument("--size", type=IMAGE_SIDE, nargs="+", action=SideOrHeightWidth, default=None,
                   metavar="SIDE",
                   help="image size: S or H W (default 256; photo: 240x320, 320x240 and 288x288, "
                        "one drawn per image)")
    p.add_argument("--seed", type=SEED, default=0)
    p.add_argument("--classes", nargs="+", default=None, choices=SHAPES,
                   help="shape classes (default circle square triangle; photo: and cross)")
    p.add_argument("--format", choices=["png", "jpg"], default="png",
                   help="image format (photo: always JPEG, quality 80 to 95)")
    p.add_argument("--max-objects", type=Number(int, 1, 1000), default=None,
                   help="objects per image at most (default: 4 solid, 6 textured)")
    p.add_argument("--style", choices=ALL_STYLES, default="solid",
                   help="solid: saturated solid shapes (the demo's); textured: harder (textured "
                        "shapes, busy backgrounds, smaller objects); photo: looks like real data")
    p.add_argument("--photos", default=None, type=InputPath("folder"),
                   help="photo style: a folder of photographs for backgrounds and textures "
                        "(default: the ones scikit-image ships: pip install 'yolo3[bench]')")
    p.add_argument("--min-size", type=SHARE, default=None,
                   help="smallest object side as a fraction of the image (default: the style's)")
    p.add_argument("--max-size", type=SHARE, default=None,
                   help="largest object side as a fraction of the image (default: the style's)")
    p.add_argument("--size-distribution", choices=SIZE_DISTRIBUTIONS, default=None,
                   help="photo style: how object sides spread between --min-size and --max-size "
                        "(default log: log-uniform, as many objects in each doubling of size, so many "
                        "small ones; uniform: mostly large ones)")
    p.add_argument("--no-distractors", dest="distractors", action="store_false",
                   help="photo style: leave out the distractor blobs (photo-textured shapes of no "
                        "class); the same seed draws the same objects with and without them")
    p.add_argument("--background-photos", default=None, type=InputPath("folder"),
                   help="photo style: a folder of photographs for the backgrounds alone "
                        "(default: --photos), so that no object is textured with a crop of its "
                        "own background")
    p.add_argument("--background-zoom", type=SHARE, nargs=2, default=None, metavar=("LOW", "HIGH"),
                   help="photo style: the share of a photograph's extent that a background crop "
                        "spans, drawn between LOW and HIGH (default 0.4 1: sharp, detailed "
                        "backgrounds; e.g. 0.1 0.25: enlarged details, smooth backgrounds, an "
                        "easier set with the same objects)")
    p.add_argument("--boxes", choices=BOX_EXTENTS, default=None,
                   help="photo style: what a box spans: the visible pixels of its object (default) "
                        "or the full object, hidden parts included")
    p.add_argument("--min-visible", type=SHARE, default=None,
                   help="photo style: the share of each object's pixels that later objects leave "
                        "in view (default 0.4; 1: no occlusion)")
    p.add_argument("--no-recolour", dest="recolour", action="store_false",
                   help="photo style: objects keep their photographs' own colours (the same seed "
                        "draws the same objects)")
    p.add_argument("--class-shares", type=WEIGHT, nargs="+", default=None, metavar="W",
                   help="photo style: how often each class is drawn, one weight per class in "
                        "--classes order (e.g. 1 1 1 0.15: the fourth class about 5%% of the "
                        "objects; default: all alike)")
    p.add_argument("--val-fraction", type=Number(float, 0.0, 1.0, hi_open=True), default=0.0,
                   help="also write train.txt / val.txt with this fraction held out")
    p.add_argument("--video", type=Number(int, 1, 100_000), default=None, metavar="FRAMES",
                   help="write video sequences of FRAMES frames with ground-truth tracks instead "
                        "(MOT layout: --out/seq01/img1/000001.jpg ..., gt/gt.txt, seqinfo.ini): "
                        "the same objects moving, crossing and hiding each other, leaving and "
                        "coming back, the camera panning; --style photo for photographs, "
                        "flat colours otherwise; --size H W (default 240 320), --max-objects "
                        "(default 10), --min-size/--max-size (sides as shares of the height)")
    p.add_argument("--sequences", type=Number(int, 1, 1000), default=1,
                   help="with --video: how many sequences (seed, seed + 1, ...; default 1)")
    p.add_argument("--no-pan", dest="pan", action="store_false",
                   help="with --video: the camera stands still")
    add_exist_ok_argument(p)


def run_video(args: argparse.Namespace) -> int:
    """``--video``: ``--sequences`` sequences ``seq01`` ... in ``--out``."""
    from yolo3.core.output_folder import check_output_folder
    from yolo3.data.synthetic_video import make_video_sequence, sequence_entries
    folders = [os.path.join(args.out, f"seq{k + 1:02d}") for k in range(args.sequences)]
    # --out itself as synth's other outputs (a file of the user's there needs --exist-ok; the
    # sequences' own manifests make a rerun's folders yolo3's), then every sequence's folder,
    # all refused before any is written
    check_output_folder(args.out, "--out", args.exist_ok)
    for folder in folders:
        check_output_folder(folder, "--out", args.exist_ok, sequence_entries(args.video))
    size = (240, 320) if args.size is None else (
        (args.size, args.size) if isinstance(args.size, int) else tuple(args.size))
    kw = {"size": (args.min_size or 0.12, args.max_size or 0.3)}
    for k, folder in enumerate(folders):
        gt = make_video_sequence(folder, args.video, size, args.max_objects or 10, args.seed + k,
                                 "photo" if args.style == "photo" else "shapes", args.photos,
                                 exist_ok=args.exist_ok, flag="--out", pan=args.pan, **kw)
        print(f"wrote {args.video} frames: {gt}")
    return 0


def run(args: argparse.Namespace) -> int:
    if args.video:
        return run_video(args)
    from yolo3.core.output_folder import check_output_folder
    from yolo3.data.synthetic import dataset_entries, image_names
    image_format = "jpg" if args.style == "photo" else args.format
    check_output_folder(args.out, "--out", args.exist_ok,
                        dataset_entries(images=image_names(args.num_images, image_format)))
    size = None if args.size is None else (
        (args.size, args.size) if isinstance(args.size, int) else tuple(args.size))
    if args.style == "photo":
        from yolo3.data.photo_synthetic import (
            PHOTO_CLASSES,
            PHOTO_SIZES,
            make_photo_dataset,
        )
        given = dict(max_objects=args.max_objects, min_frac=args.min_size, max_frac=args.max_size,
                     size_distribution=args.size_distribution,
                     distractors=None if args.distractors else False, boxes=args.boxes,
                     min_visible=args.min_visible, recolour=None if args.recolour else False,
                     background_photos=args.background_photos,
                     background_zoom=None if args.background_zoom is None
                     else tuple(args.background_zoom),
                     class_shares=None if args.class_shares is None else tuple(args.class_shares))
        # the photographs are read (and a folder without any refused) before anything is written
        ann, classes = make_photo_dataset(
            args.out, args.num_images, args.photos, args.seed,
            tuple(args.classes or PHOTO_CLASSES), (size,) if size else PHOTO_SIZES,
            val_fraction=args.val_fraction, exist_ok=args.exist_ok,
            **{k: v for k, v in given.items() if v is not None})
    else:  # the photo style's own flags need --style photo: yolo3.cli.relations
        from yolo3.data.synthetic import make_synthetic_dataset
        ann, classes = make_synthetic_dataset(
            args.out, args.num_images, size or (256, 256), args.seed,
            tuple(args.classes or ("circle", "square", "triangle")), image_format=args.format,
            max_objects=args.max_objects, val_fraction=args.val_fraction, style=args.style,
            min_frac=args.min_size, max_frac=args.max_size, exist_ok=args.exist_ok)
    print(f"wrote {args.num_images} images: {ann}, {classes}")
    return 0


def main(argv: Optional[List[str]] = None) -> int:
    return run_command(NAME, DESCRIPTION, add_arguments, run, argv)


if __name__ == "__main__":
    sys.exit(main())
