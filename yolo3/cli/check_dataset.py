"""``yolo3 check`` (``yolo3-check``, ``tools/check_dataset.py``): read every annotation and image
header, print statistics and every problem.

    yolo3 check --annotations train.txt --classes classes.txt [--draw 8 --draw-dir out]

Exits 1 when there is any problem (each printed as FILE:LINE: REASON), else 0.
"""
from __future__ import annotations

import argparse
import os
import sys
from typing import List, Optional, Sequence

import numpy as np

from yolo3.cli.common import (
    add_exist_ok_argument,
    add_input_size_argument,
    add_source_arguments,
    annotation_sources,
    protect_inputs,
    run_command,
    show_progress,
)
from yolo3.cli.flags import FRACTION, SEED, InputPath, Number, OutputPath
from yolo3.data.annotations import Record

NAME = "check"
DESCRIPTION = ("Check a dataset: read every annotation and image header, print statistics and every "
               "problem as FILE:LINE: REASON (exit 1 when there is any), draw a few images.")


DRAWN_PATTERN = "[0-9][0-9][0-9]_*.png"  # what --draw writes into --draw-dir
DRAW_DIR = "dataset_check"  # --draw-dir's default
LABELS_PLOT = "labels.png"  # what --plots writes
BATCH_PICTURES = "train_batch[0-9]*.jpg"  # what --batches writes beside it
BATCH_SIZE = 16  # images per drawn batch


def draw_records(records: Sequence[Record], names: Sequence[str], folder) -> List[str]:
    """Draw each record's boxes and class names on its image; write ``<n>_<stem>.png`` into
    ``folder`` (a :class:`yolo3.core.output_folder.OutputFolder`); returns the written paths."""
    from PIL import Image

    from yolo3.data.images import load_image
    from yolo3.evaluation.visualize import draw_detections
    written = []
    for k, rec in enumerate(records):
        boxes = np.asarray(rec.boxes, np.float32).reshape(-1, 5)
        drawn = draw_detections(Image.fromarray(load_image(rec.path)), boxes[:, :4], None,
                                boxes[:, 4].astype(int), names)
        stem = os.path.splitext(os.path.basename(rec.path))[0]
        path = folder.write(f"{k:03d}_{stem}.png", lambda tmp: drawn.save(tmp, format="PNG"))
        written.append(str(path))
    return written


def _tile_line(records: Sequence[Record], input_hw) -> str:
    """What :func:`yolo3.ops.tiles.suggest_tile` suggests for these boxes at ``input_hw``."""
    from yolo3.data.annotations import box_image_sizes, box_sizes
    from yolo3.ops.tiles import suggest_tile
    known = [r for r in records if r.image_hw is not None]
    tip = suggest_tile(box_sizes(known), box_image_sizes(known), input_hw)
    size = (f"suggested --tile {tip.size}" if tip.size is not None else "no tiles suggested")
    return f"tiles: {size} ({tip.reason})"


RARE_SHARE = 0.2  # a class with under this share of the commonest class's boxes is rare
SUGGESTED_REPEAT = 0.5  # yolo3 benchmark balance's repeat contender (docs/benchmarks.md)


def _balance_lines(records: Sequence[Record], names: Sequence[str]) -> List[str]:
    """The rare classes and what the balance options would do for them."""
    from yolo3.ops.class_balance import class_counts, class_weights, repeat_factors
    labels = [np.asarray(r.boxes, np.float64).reshape(-1, 5)[:, 4] for r in records]
    counts = class_counts(labels, len(names))
    if not counts.any():
        return []
    rare = [k for k in range(len(names)) if 0 < counts[k] < RARE_SHARE * counts.max()]
    if not rare:
        return ["class balance: no class has under "
                f"{RARE_SHARE:.0%} of the commonest class's boxes: nothing to balance"]
    weights = class_weights(counts, "effective")
    factors = repeat_factors(labels, len(names), SUGGESTED_REPEAT)
    return ["class balance: rare: " + ", ".join(
                f"{names[k]} ({counts[k]} boxes, {counts[k] / counts.sum():.1%})" for k in rare),
            f"  suggested: --repeat-threshold {SUGGESTED_REPEAT:g}: repeats "
            f"{int((factors > 1).sum())} of {len(records)} images (an epoch of "
            f"{factors.sum():.0f}); it raised the rare class's AP on both sets measured, class "
            "weights and focal loss did not (docs/benchmarks.md#class-balance)",
            "  --class-weights auto would weigh " + ", ".join(
                f"{name} {w:.2f}" for name, w in zip(names, weights) if w > 0)]


def _stats(records: Sequence[Record], names: Sequence[str], input_hw=(416, 416)) -> str:
    lines = [f"images: {len(records)}  (without boxes: {sum(len(r.boxes) == 0 for r in records)})"]
    boxes = np.concatenate([r.boxes for r in records]) if records else np.zeros((0, 5), np.float32)
    lines.append(f"boxes: {len(boxes)}")
    counts = np.bincount(boxes[:, 4].astype(int), minlength=len(names)) if len(boxes) else \
        np.zeros(len(names), int)
    width = max([len(n) for n in names] + [5])
    for i, n in enumerate(names):
        lines.append(f"  {n:<{width}} {counts[i]:8d}")
    lines.extend(_balance_lines(records, names))
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
        lines.append(_tile_line(records, input_hw))
    return "\n".join(lines)


def _plot_labels(args, records: Sequence[Record], names: Sequence[str], input_hw, folder) -> None:
    """``--plots``: the labels drawn into ``folder`` (a line, not an error, without matplotlib)."""
    from yolo3.core.extras import install_hint, installed
    if not installed("matplotlib"):
        print(f"plots skipped: matplotlib is not installed ({install_hint('matplotlib')})")
        return
    from yolo3.evaluation.visualize import plot_labels
    from yolo3.ops.anchors import YOLO_ANCHORS, read_anchors
    anchors = read_anchors(args.anchors) if args.anchors else YOLO_ANCHORS
    notes = [_tile_line(records, input_hw)] + _balance_lines(records, names)[:1]
    with folder, folder.writing(LABELS_PLOT) as tmp:
        plot_labels(records, names, input_hw, tmp, anchors=anchors, notes=notes)
    print(f"labels drawn: {os.path.join(args.plots, LABELS_PLOT)}")


def _draw_batches(args, records: Sequence[Record], names: Sequence[str], input_hw,
                  folder) -> None:
    """``--batches N``: the first N training batches of the NumPy pipeline (the same batches as
    tf.data's, no TensorFlow), augmented as train's defaults and ``--mosaic`` say."""
    from PIL import Image

    from yolo3.data.dataset_config import DatasetConfig
    from yolo3.data.planner import AugmentConfig
    from yolo3.data.numpy_pipeline import NumpyBatches
    from yolo3.evaluation.visualize import draw_batch
    usable = [r for r in records if r.image_hw is not None]
    config = DatasetConfig(tuple(input_hw), min(BATCH_SIZE, len(usable)), training=True,
                           seed=args.seed, augment=AugmentConfig(mosaic=args.mosaic))
    # on into the next epochs; made when asked (workers=0): only the batches drawn
    batches = NumpyBatches(usable, config, workers=0, repeat=True)
    count = args.batches
    with folder:
        for k in range(count):
            images, boxes = batches[k]
            picture = Image.fromarray(draw_batch(images, boxes, names))
            with folder.writing(f"train_batch{k}.jpg") as tmp:
                picture.save(tmp, format="JPEG", quality=90)
    print(f"{count} training batch{'' if count == 1 else 'es'} drawn: "
          f"{os.path.join(args.plots, 'train_batch0.jpg')} ...")


def _remove_older_batches(folder, drawn: int) -> None:
    """A rerun with fewer ``--batches`` removes the batches an earlier run drew beyond them (its
    own, unchanged; a user's file is kept), so that no picture in the folder looks current that
    is not."""
    import re
    names = sorted(os.listdir(folder.path)) if os.path.isdir(folder.path) else []
    older = [name for name in names if
             (m := re.fullmatch(r"train_batch(\d+)\.jpg", name)) and int(m.group(1)) >= drawn]
    if older:
        with folder:
            for name in older:
                folder.remove(name)


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_source_arguments(p, "text / VOC / COCO annotations", split=None)
    p.add_argument("--classes", type=InputPath(text=True),
                   help="classes file (COCO and data files bring their own)")
    p.add_argument("--images", type=InputPath("folder"),
                   help="image folder (COCO; default: guessed from the JSON path)")
    p.add_argument("--include-difficult", action="store_true", help="count VOC's difficult "
                   "objects as boxes (default: ignore regions, as training and evaluation read them)")
    p.add_argument("--include-crowd", action="store_true", help="count COCO's crowd annotations "
                   "as boxes (default: ignore regions)")
    p.add_argument("--draw", type=Number(int, 0, 100_000), default=0,
                   help="draw the boxes of N random images")
    p.add_argument("--draw-dir", type=OutputPath("folder"), default=None,
                   help=f"folder for the drawn PNG files (default {DRAW_DIR})")
    p.add_argument("--seed", type=SEED, default=0, help="seed choosing the images to draw")
    p.add_argument("--plots", type=OutputPath("folder"), default=None, metavar="DIR",
                   help=f"draw the labels into DIR/{LABELS_PLOT}: class counts, box centres, "
                        "box sizes at --input-size against the strides and anchors (needs "
                        "matplotlib: the plot extra)")
    p.add_argument("--batches", type=Number(int, 0, 100), default=0, metavar="N",
                   help="with --plots: draw the first N training batches as the input pipeline "
                        "delivers them (augmented, at --input-size; DIR/train_batch0.jpg ...)")
    p.add_argument("--mosaic", type=FRACTION, default=0.0,
                   help="with --batches: the share of images that are mosaics (train's "
                        "--mosaic; default 0)")
    p.add_argument("--anchors", type=InputPath(text=True), default=None,
                   help="with --plots: the anchors file to mark (default: YOLOv3's COCO "
                        "anchors)")
    add_input_size_argument(p, 416, "the network input size the tile suggestion is for: one side "
                                    "or HEIGHT WIDTH (default 416)")
    add_exist_ok_argument(p)


def run(args: argparse.Namespace) -> int:
    from yolo3.core.errors import CommandFailed
    from yolo3.data.annotations import coco_class_names, detect_format, scan_annotations
    from yolo3.data.class_names import read_classes

    plots = None
    if args.plots:
        from yolo3.core.output_folder import OutputFolder
        plots = OutputFolder(args.plots, "--plots", args.exist_ok,
                             [LABELS_PLOT, BATCH_PICTURES])  # refused now
    folder = None
    if args.draw:
        from yolo3.core.output_folder import OutputFolder
        args.draw_dir = args.draw_dir or DRAW_DIR
        protect_inputs(args)  # now that --draw-dir has its default
        folder = OutputFolder(args.draw_dir, "--draw-dir", args.exist_ok, [DRAWN_PATTERN])
    sources, names = annotation_sources(args)
    if args.classes:
        names = read_classes(args.classes)
    elif names is None and isinstance(sources, str) and detect_format(sources) == "coco":
        names = coco_class_names(sources)
    res = scan_annotations(sources, names, include_difficult=args.include_difficult,
                           include_crowd=args.include_crowd, image_dir=args.images)
    from yolo3.data.verify import verify_images
    decoded = {r.path for r in res.records}
    # the training pipeline's decoder, in full
    res.problems.extend(verify_images(sorted(decoded), progress=show_progress(args)))
    if names is None:
        top = max([int(r.boxes[:, 4].max()) for r in res.records if len(r.boxes)] + [-1])
        names = [str(i) for i in range(top + 1)]
    input_hw = (args.input_size if isinstance(args.input_size, tuple)
                else (args.input_size, args.input_size))
    print(_stats(res.records, names, input_hw))
    if res.clipped_boxes:
        print(f"warning: {res.clipped_boxes} boxes extend past their image and were clipped")
    if res.skipped_difficult or res.skipped_crowd:
        print(f"ignore regions: {res.skipped_difficult} difficult, {res.skipped_crowd} crowd: "
              "evaluation counts a detection on one neither way, training leaves them out "
              "(--include-difficult / --include-crowd read them as boxes)")
    if plots is not None:
        _plot_labels(args, res.records, names, input_hw, plots)
        drawn = args.batches if res.records else 0
        if drawn:
            _draw_batches(args, res.records, names, input_hw, plots)
        _remove_older_batches(plots, drawn)
    if args.draw and res.records:
        protect_inputs(args, [r.path for r in res.records])
        rng = np.random.default_rng(args.seed)
        pick = rng.choice(len(res.records), size=min(args.draw, len(res.records)), replace=False)
        with folder:
            files = draw_records([res.records[i] for i in sorted(pick)], names, folder)
        print(f"drew {len(files)} images into {args.draw_dir}")
    problems = res.problems + res.portability  # a list other tools cannot read is one too
    for p in problems:
        print(f"problem: {p}", file=sys.stderr)
    if problems:
        raise CommandFailed(f"{len(problems)} problem{'' if len(problems) == 1 else 's'}")
    print("no problems")
    return 0


def main(argv: Optional[List[str]] = None) -> int:
    return run_command(NAME, DESCRIPTION, add_arguments, run, argv)


if __name__ == "__main__":
    sys.exit(main())
