"""``yolo3 detect`` (``yolo3-detect``, ``tools/detect.py``): detect objects in images, folders,
globs, videos or a webcam.

Writes annotated images (same file names) or an annotated video (same frame rate) into ``--output``;
with ``--save-txt DIR`` a YOLO-layout label file per image (``NAME.txt``, rows ``class cx cy w h``
normalised to 0..1, ``--save-conf`` appends the score; video frames: ``NAME_FRAME.txt``), for
pseudo-labelling; and, with ``--json``, a list with one object per image or video frame::

    {"image": path, "boxes": [[x1, y1, x2, y2], ...], "scores": [...], "classes": [...], "names": [...]}

(video frames add ``"frame": index``); boxes are original image pixels. Unreadable inputs are
reported and skipped; the exit status is 1 when any input failed.
"""
from __future__ import annotations

import argparse
import glob
import os
import sys
from typing import Iterable, Iterator, List, Optional, Sequence, Tuple

from yolo3.cli.common import (add_engine_argument, add_model_arguments, add_precision_argument,
                              run_command, show_progress)

VIDEO_EXTENSIONS = {".mp4", ".avi", ".mov", ".mkv", ".webm", ".m4v", ".mpg", ".mpeg", ".wmv", ".flv"}
IMAGE_EXTENSIONS = {".jpg", ".jpeg", ".png", ".bmp", ".gif", ".tif", ".tiff", ".webp", ".ppm", ".pgm"}

NAME = "detect"
DESCRIPTION = ("Detect objects in images, folders, globs, videos or a webcam: annotated copies "
               "in --output, detections in --json.")


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_model_arguments(p, "a .keras model (it carries its anchors and classes), .weights.h5 "
                           "template weights, a keras-yolo3 .h5, or an exported .tflite, .onnx, "
                           "OpenVINO IR (.xml or its folder) or SavedModel folder")
    p.add_argument("--input", required=True,
                   help="an image, a folder, a glob ('imgs/*.jpg'), a video file or a webcam index")
    p.add_argument("--output", required=True, help="folder for annotated images / video")
    p.add_argument("--json", help="write detections to this JSON file")
    p.add_argument("--score", type=float, default=0.3, help="score threshold (default 0.3)")
    p.add_argument("--iou", type=float, default=0.45, help="NMS IoU threshold (default 0.45)")
    p.add_argument("--batch-size", type=int, default=1,
                   help="images per forward pass (default 1; on OpenVINO several passes are in "
                        "flight at once)")
    add_precision_argument(p)
    add_engine_argument(p)
    p.add_argument("--max-frames", type=int, default=0, help="stop a video/webcam after N frames (0: all)")
    p.add_argument("--fourcc", default="mp4v", help="OpenCV video codec for the annotated video")
    p.add_argument("--no-draw", action="store_true", help="only write the JSON / label files")
    p.add_argument("--save-txt", metavar="DIR", help="also write a YOLO-layout label file per "
                   "image into DIR (class cx cy w h, normalised; an image without detections "
                   "gets an empty file)")
    p.add_argument("--save-conf", action="store_true", help="with --save-txt: end each row with "
                   "its score")


def classify_input(spec: str) -> Tuple[str, List[str]]:
    """``('webcam', [index]) | ('video', [path]) | ('images', [paths])``; raises ArgumentError when
    nothing matches."""
    from yolo3.errors import ArgumentError
    if spec.isdigit() and not os.path.exists(spec):
        return "webcam", [spec]
    if os.path.isdir(spec):
        paths = sorted(os.path.join(spec, n) for n in os.listdir(spec)
                       if os.path.splitext(n)[1].lower() in IMAGE_EXTENSIONS | VIDEO_EXTENSIONS)
        images = [p for p in paths if os.path.splitext(p)[1].lower() in IMAGE_EXTENSIONS]
        if not images:
            raise ArgumentError(f"{spec}: folder has no image files ({', '.join(sorted(IMAGE_EXTENSIONS))})")
        return "images", images
    if os.path.isfile(spec):
        if os.path.splitext(spec)[1].lower() in VIDEO_EXTENSIONS:
            return "video", [spec]
        return "images", [spec]
    matches = sorted(p for p in glob.glob(spec, recursive=True) if os.path.isfile(p))
    if not matches:
        raise ArgumentError(f"{spec}: no such file or folder, and no file matches it as a glob")
    return "images", matches


def _output_names(paths: Sequence[str]) -> List[str]:
    """Output file names: the input's name, with ``_1``, ``_2``... when names repeat."""
    seen: dict = {}
    out = []
    for p in paths:
        stem, ext = os.path.splitext(os.path.basename(p))
        n = seen.get((stem, ext), 0)
        seen[(stem, ext)] = n + 1
        out.append(f"{stem}{'' if n == 0 else f'_{n}'}{ext or '.jpg'}")
    return out


def _detected(detector, items: Iterable[tuple], batch_size: int) -> Iterator[tuple]:
    """``(item, (boxes, scores, classes))`` for each ``item`` (a tuple ending with its image), in
    order: the detector's stream reads ahead, so the items sent wait beside it."""
    from collections import deque

    sent: deque = deque()

    def images():
        for item in items:
            sent.append(item)
            yield item[-1]
    for found in detector.detect_stream(images(), batch_size):
        yield sent.popleft(), found


def run_images(detector, paths: List[str], args, entries: list) -> int:
    from PIL import Image
    from tqdm import tqdm

    from yolo3.data.images import load_image
    from yolo3.evaluation import detection_entry
    from yolo3.visualize import draw_detections

    failures = 0

    def readable_images(bar):
        nonlocal failures
        for path, name in zip(paths, _output_names(paths)):
            try:
                image = load_image(path)
            except Exception as e:  # noqa: BLE001 - report any unreadable input and go on
                failures += 1
                tqdm.write(f"yolo3 detect: error: {e}", file=sys.stderr)
                bar.update(1)
                continue
            yield path, name, image

    with tqdm(total=len(paths), desc="images", unit="img", file=sys.stderr,
              disable=not show_progress(args)) as bar:
        for (path, name, image), (boxes, scores, classes) in _detected(
                detector, readable_images(bar), args.batch_size):
            entries.append(detection_entry(path, boxes, scores, classes, detector.class_names))
            if args.save_txt:
                _save_labels(args, os.path.splitext(name)[0], image.shape[:2], boxes, scores,
                             classes)
            if not args.no_draw:
                out = os.path.join(args.output, name)
                try:
                    draw_detections(Image.fromarray(image), boxes, scores, classes,
                                    detector.class_names).save(out)
                except (OSError, ValueError) as e:
                    failures += 1
                    tqdm.write(f"yolo3 detect: error: {out}: cannot write annotated image: {e}",
                               file=sys.stderr)
            bar.update(1)
    return failures


def _save_labels(args, stem: str, image_hw, boxes, scores, classes) -> None:
    """The label file ``--save-txt/STEM.txt`` of one image's detections."""
    import numpy as np

    from yolo3.data.yolo_layout import label_rows
    from yolo3.fileio import write_text_atomic
    rows = np.concatenate([np.asarray(boxes, np.float64).reshape(-1, 4),
                           np.asarray(classes, np.float64).reshape(-1, 1)], axis=1)
    write_text_atomic(os.path.join(args.save_txt, stem + ".txt"),
                      label_rows(rows, image_hw, scores if args.save_conf else None))


def run_video(detector, source: str, is_webcam: bool, args, entries: list) -> int:
    from tqdm import tqdm

    from yolo3.errors import CommandFailed
    from yolo3.evaluation import detection_entry
    from yolo3.video import VideoWriter, open_video
    from yolo3.visualize import draw_on_array

    video = open_video(source)
    total = video.frame_count
    if args.max_frames:
        total = min(total, args.max_frames) if total > 0 else args.max_frames
    stem = f"webcam{source}" if is_webcam else os.path.splitext(os.path.basename(source))[0]
    ext = ".avi" if args.fourcc.upper() in ("MJPG", "XVID") else ".mp4"
    writer = None if args.no_draw else VideoWriter(os.path.join(args.output, stem + ext),
                                                   args.fourcc, video.fps)
    frame_index = 0
    try:
        with tqdm(total=total or None, desc=os.path.basename(str(source)), unit="frame",
                  file=sys.stderr, disable=not show_progress(args)) as bar:
            frames = ((rgb,) for rgb in video.frames(args.max_frames))
            for (rgb,), (boxes, scores, classes) in _detected(detector, frames, args.batch_size):
                entry = detection_entry(str(source), boxes, scores, classes, detector.class_names)
                entry["frame"] = frame_index
                entries.append(entry)
                if args.save_txt:
                    _save_labels(args, f"{stem}_{frame_index}", rgb.shape[:2], boxes, scores,
                                 classes)
                if writer is not None:
                    writer.write(draw_on_array(rgb, boxes, scores, classes, detector.class_names))
                frame_index += 1
                bar.update(1)
    except KeyboardInterrupt:
        print(f"stopped after {frame_index} frames", file=sys.stderr)
    finally:
        video.release()
        if writer is not None:
            writer.release()
    if frame_index == 0:
        raise CommandFailed(f"{source}: no frame could be read")
    return 0


def run(args: argparse.Namespace) -> int:
    """Detect; 0 when every input was processed, 1 when some failed (bad arguments raise: 2)."""
    from yolo3.paths import check_outputs
    kind, items = classify_input(args.input)
    sources = [] if kind == "webcam" else items
    # annotated copies keep the inputs' names: the output folder must not hold any input
    check_outputs(dirs=[("--output", args.output), ("--save-txt", args.save_txt)], inputs=sources)
    check_outputs([("--json", args.json)], sources + [args.model, args.anchors, args.classes])
    if args.save_conf and not args.save_txt:
        from yolo3.errors import ArgumentError
        raise ArgumentError("--save-conf adds scores to the --save-txt label files: give --save-txt")
    from yolo3.evaluation import save_detection_json
    from yolo3.detector import load_detector

    detector = load_detector(args.model, args.anchors, args.classes, score=args.score,
                             iou=args.iou, input_size=args.input_size, variant=args.variant,
                             precision=args.precision, engine=args.engine)
    print(detector.engine.summary(), file=sys.stderr)
    os.makedirs(args.output, exist_ok=True)
    if args.save_txt:
        os.makedirs(args.save_txt, exist_ok=True)
    entries: list = []
    if kind == "images":
        failures = run_images(detector, items, args, entries)
    else:
        failures = run_video(detector, items[0], kind == "webcam", args, entries)
    if args.json:
        save_detection_json(args.json, entries)
    done = len({e["image"] for e in entries}) if kind == "images" else len(entries)
    print(f"{done} {'images' if kind == 'images' else 'frames'} processed, {failures} failed; "
          f"output in {args.output}" + (f", detections in {args.json}" if args.json else "")
          + (f", label files in {args.save_txt}" if args.save_txt else ""),
          file=sys.stderr)
    return 1 if failures else 0


def main(argv: Optional[Sequence[str]] = None) -> int:
    return run_command(NAME, DESCRIPTION, add_arguments, run, argv)


if __name__ == "__main__":
    sys.exit(main())
