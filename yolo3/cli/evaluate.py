"""``yolo3 evaluate`` (``yolo3-evaluate``, ``tools/evaluate.py``): VOC and COCO mAP of a model or
of a detection JSON against ground truth.

Prints a table per class and the confidence of best F1, and writes ``--out`` (JSON: ``mAP50``,
``mAP75``, ``mAP50_95`` (COCO, as pycocotools' COCOeval), ``mAP50_voc``, ``mAP50_voc07`` (Pascal
VOC), ``per_class``, ``confidence_curves`` (precision, recall and F1 against confidence, per class
and overall, and the best F1), ``confusion_matrix`` (:mod:`yolo3.evaluation.diagnostics`), and the
error analysis (:mod:`yolo3.evaluation.error_analysis`): ``errors`` (the TIDE breakdown),
``errors_per_class`` (false positives by cause and missed boxes by size, at the confusion
matrix's score) and ``worst_images``) plus the plots ``<out stem>_pr.png``, ``_confusion.png``,
``_confidence.png``, ``_errors.png`` and the gallery of the worst images, ``_worst.png``, beside it.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Dict, Optional, Sequence

import numpy as np

from yolo3.cli.common import (
    add_engine_argument,
    add_input_size_argument,
    add_precision_argument,
    add_source_arguments,
    add_tile_arguments,
    add_variant_argument,
    annotation_sources,
    protect_inputs,
    run_command,
    show_progress,
    tiled_detector,
    warn,
)
from yolo3.cli.flags import BATCH, FRACTION, InputPath, Number, OutputPath

NAME = "evaluate"
DESCRIPTION = ("VOC and COCO mAP of a model (run on the annotated images) or of a detection JSON, "
               "against ground truth.")


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_source_arguments(p, "ground truth: text rows, VOC XML or COCO JSON", split="val")
    p.add_argument("--classes", type=InputPath(text=True), help="classes file (default: the class names --model or a COCO file carries; "
                                     "required with --detections)")
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--detections", type=InputPath(text=True), help="detection JSON written by yolo3 detect --json")
    src.add_argument("--model", type=InputPath("any"), help="a model to run on the images: .keras, .weights.h5, keras-yolo3 "
                                     ".h5, or an exported .tflite, .onnx, OpenVINO IR (.xml or its "
                                     "folder) or SavedModel folder")
    p.add_argument("--anchors", type=InputPath(text=True), help="anchors file for --model (default: what the model carries)")
    add_input_size_argument(p, None, "network input size for --model: one side or HEIGHT WIDTH "
                                     "(default: the model's)")
    add_variant_argument(p, old="--model-type", help="variant of a .weights.h5 --model")
    p.add_argument("--score", type=FRACTION, default=0.001, help="score threshold for --model")
    p.add_argument("--iou", type=FRACTION, default=0.45, help="NMS IoU threshold for --model")
    p.add_argument("--batch-size", type=BATCH, default=4, help="images per forward pass for --model")
    add_precision_argument(p)
    add_engine_argument(p)
    p.add_argument("--save-detections", type=OutputPath("file", format="json"), help="with --model: also write the detection JSON here")
    p.add_argument("--image-dir", type=InputPath("folder"), help="image folder for VOC / COCO annotations")
    p.add_argument("--max-dets", type=Number(int, 1, 10_000), default=100, help="COCO maxDets per image and class")
    p.add_argument("--out", required=True, type=OutputPath("file", format="json"), help="write the figures to this JSON file")
    p.add_argument("--confusion-score", type=FRACTION, default=None, help="score threshold of the "
                   "confusion matrix (default: the confidence of best F1)")
    p.add_argument("--no-plot", action="store_true", help="skip the PNG plots (precision-recall, "
                   "confusion matrix, precision / recall / F1 against confidence)")
    p.add_argument("--report", action="store_true", help="also write one self-contained HTML "
                   "page of the figures, plots and galleries: <out stem>_report.html")
    add_tile_arguments(p, "with --model: detect")


def build_parser() -> argparse.ArgumentParser:
    from yolo3.cli.common import make_parser
    p = make_parser(NAME, DESCRIPTION)
    add_arguments(p)
    return p


def _detector(args):
    from yolo3.inference.detector import load_detector
    return load_detector(args.model, args.anchors, args.classes, score=args.score, iou=args.iou,
                         input_size=args.input_size, variant=args.variant,
                         max_boxes=max(args.max_dets, 100), precision=args.precision,
                         engine=args.engine)


def _detect_records(det, records, class_names, batch_size: int, progress: bool = True) -> tuple:
    """Run detector ``det`` on every record's image; returns (dets by path, entries, failed paths);
    ``progress``: a progress bar on stderr."""
    from tqdm import tqdm

    from yolo3.data.images import load_image
    from yolo3.evaluation.metrics import detection_entry
    dets: Dict[str, tuple] = {}
    entries, failed = [], []
    paths = list(dict.fromkeys(r.path for r in records))
    step = max(1, batch_size)
    with tqdm(total=len(paths), desc="detect", unit="img", file=sys.stderr,
              disable=not progress) as bar:
        for i in range(0, len(paths), step):
            loaded = []
            for p in paths[i:i + step]:
                try:
                    loaded.append((p, load_image(p)))
                except Exception as e:  # noqa: BLE001 - report, skip, go on
                    failed.append(p)
                    tqdm.write(f"yolo3 evaluate: error: {e}", file=sys.stderr)
            for (p, _), (b, s, c) in zip(loaded, det.detect_batch([im for _, im in loaded])):
                dets[p] = (b, s, c)
                entries.append(detection_entry(p, b, s, c, class_names))
            bar.update(len(paths[i:i + step]))
    return dets, entries, failed


def _settings(args: argparse.Namespace) -> Dict[str, object]:
    """The flags of this evaluation, for the JSON and the report (plain values only)."""
    return {k: v for k, v in vars(args).items()
            if v is not None and isinstance(v, (str, int, float, bool, list, tuple))
            and k not in ("quiet", "verbose", "debug", "command")}


def _readable_image(path: str):
    """The image at ``path``, or None where it cannot be read (a detection JSON's images may be
    elsewhere): the gallery leaves it out."""
    from yolo3.core.errors import AnnotationError
    from yolo3.data.images import load_image
    try:
        return load_image(path)
    except AnnotationError:
        return None


def run(args: argparse.Namespace) -> int:
    from yolo3.core.errors import ArgumentError, CommandFailed
    from yolo3.core.fileio import write_text_atomic
    from yolo3.core.paths import check_outputs
    from yolo3.data.annotations import load_annotations, own_class_names
    from yolo3.data.class_names import read_classes
    from yolo3.evaluation.error_analysis import format_breakdown
    from yolo3.evaluation.full_evaluation import evaluate_fully, picture_paths
    from yolo3.evaluation.metrics import (
        align_image_keys,
        format_table,
        ground_truth,
        load_detection_json,
        save_detection_json,
    )
    stem = os.path.splitext(args.out)[0]
    if not args.no_plot or args.report:  # beside --out: never over a file of the user's
        from yolo3.core.output_folder import check_side_files
        plots = list(picture_paths(f"{stem}_").values()) if not args.no_plot else []
        page = [f"{stem}_report.html"] if args.report else []
        check_outputs([("--out (its plot)", path) for path in plots]
                      + [("--out (its report)", path) for path in page], [args.save_detections])
        check_side_files(plots, "--out", "give --no-plot")
        check_side_files(page, "--out", "leave out --report")
    sources, data_names = annotation_sources(args)
    det = _detector(args) if args.model else None
    if det is not None:
        engine = det.engine.summary()
        det, sliced = tiled_detector(det, args)
        if sliced:  # the first line: how each image is cut
            print(sliced, file=sys.stderr)
        print(engine, file=sys.stderr)
    if args.classes:
        class_names = read_classes(args.classes)
    elif data_names is not None:
        class_names = data_names
    elif det is not None:
        class_names = det.class_names
    else:
        class_names = own_class_names(sources)  # a COCO file's categories
        if class_names is None:
            raise ArgumentError("--classes (or --data) is required with --detections (a COCO "
                                "file brings its own)")
    records = load_annotations(sources, class_names, image_dir=args.image_dir,
                               check_images=det is not None)
    protect_inputs(args, [r.path for r in records])  # the images read: never an output
    if args.tile:  # refused now if an image would need too many tiles
        from yolo3.ops.tiles import check_tile_count
        check_tile_count([r.image_hw for r in records if r.image_hw is not None], args.tile,
                         args.overlap)
    gt, details = ground_truth(records)
    failed: list = []
    if det is None:
        raw = load_detection_json(args.detections, num_classes=len(class_names))
        mapping = align_image_keys(list(gt), list(raw))
        unmatched = [p for p in raw if p not in mapping]
        if raw and len(unmatched) == len(raw):
            raise CommandFailed(f"{args.detections}: none of its {len(raw)} images is an image of "
                                f"{args.data or args.annotations} (first: {unmatched[0]}): nothing to score")
        if unmatched:
            warn(NAME, f"{len(unmatched)} images in {args.detections} are not in "
                       f"{args.data or args.annotations} and are ignored (first: {unmatched[0]})")
        dets = {}
        for d, g in mapping.items():
            b, s, c = raw[d]
            if g in dets:
                ob, os_, oc = dets[g]
                b, s, c = np.concatenate([ob, b]), np.concatenate([os_, s]), np.concatenate([oc, c])
            dets[g] = (b, s, c)
    else:
        dets, entries, failed = _detect_records(det, records, class_names, args.batch_size,
                                                 show_progress(args))
        if failed and len(failed) == len(gt):
            raise CommandFailed(f"{args.data or args.annotations}: none of its {len(gt)} images could be read: "
                                "nothing to score")
        for p in failed:
            gt.pop(p, None)  # left out of the figures (not counted as misses), and said so below
        if args.save_detections:
            save_detection_json(args.save_detections, entries)
    full = evaluate_fully(gt, dets, class_names, max_dets=args.max_dets,
                          confusion_score=args.confusion_score, details=details)
    result = full.result
    if result["mAP50"] is None:
        raise CommandFailed(f"{args.data or args.annotations}: no ground-truth box to score against")
    print(format_table(result))
    best = full.diagnostics.curves.best()
    print(f"best F1 {best['f1']:.4f} at confidence {best['confidence']:.3f} (precision "
          f"{best['precision']:.4f}, recall {best['recall']:.4f}); confusion matrix at score "
          f"{full.diagnostics.score:.3f}")
    print(format_breakdown(full.errors.breakdown))
    result["settings"] = _settings(args)
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    write_text_atomic(args.out, json.dumps(result, indent=1))
    if not args.no_plot:
        written = full.draw(picture_paths(f"{stem}_"), gt, dets, _readable_image)
        if written:
            print("plots: " + ", ".join(written), file=sys.stderr)
    if args.report:
        from yolo3.evaluation.report import evaluation_report
        write_text_atomic(f"{stem}_report.html", evaluation_report(args.out, result))
        print(f"report: {stem}_report.html")
    if det is not None and failed:
        warn(NAME, f"{len(failed)} of {len(failed) + len(gt)} images could not be read and are "
                   "left out of the figures above")
        return 1
    return 0


def main(argv: Optional[Sequence[str]] = None) -> int:
    return run_command(NAME, DESCRIPTION, add_arguments, run, argv)


if __name__ == "__main__":
    sys.exit(main())
