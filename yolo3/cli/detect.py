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

from yolo3.cli.common import (
    add_engine_argument,
    add_exist_ok_argument,
    add_model_arguments,
    add_precision_argument,
    add_threshold_arguments,
    add_tile_arguments,
    add_video_arguments,
    protect_inputs,
    run_command,
    show_progress,
    tiled_detector,
)
from yolo3.cli.flags import BATCH, MediaSource, OutputPath

VIDEO_EXTENSIONS = {".mp4", ".avi", ".mov", ".mkv", ".webm", ".m4v", ".mpg", ".mpeg", ".wmv", ".flv"}
IMAGE_EXTENSIONS = {".jpg", ".jpeg", ".png", ".bmp", ".gif", ".tif", ".tiff", ".webp", ".ppm", ".pgm"}

NAME = "detect"
DESCRIPTION = ("Detect objects in images, folders, globs, videos or a webcam: annotated copies "
               "in --output, detections in --json.")


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_model_arguments(p, "a .keras model (it carries its anchors and classes), .weights.h5 "
                           "template weights, a keras-yolo3 .h5, or an exported .tflite, .onnx, "
                           "OpenVINO IR (.xml or its folder) or SavedModel folder")
    p.add_argument("--input", required=True, type=MediaSource(),
                   help="an image, a folder, a glob ('imgs/*.jpg'), a video file or a webcam index")
    p.add_argument("--output", required=True, type=OutputPath("folder"),
                   help="folder for annotated images / video")
    p.add_argument("--json", type=OutputPath("file", format="json"), help="write detections to this JSON file")
    add_threshold_arguments(p)
    p.add_argument("--batch-size", type=BATCH, default=1,
                   help="images per forward pass (default 1; on OpenVINO several passes are in "
                        "flight at once)")
    add_precision_argument(p)
    add_engine_argument(p)
    add_video_arguments(p)
    p.add_argument("--no-draw", action="store_true", help="only write the JSON / label files")
    p.add_argument("--save-txt", metavar="DIR", type=OutputPath("folder"), help="also write a YOLO-layout label file per "
                   "image into DIR (class cx cy w h, normalised; an image without detections "
                   "gets an empty file; images sharing a name get NAME_1.txt ...); never the "
                   "input images' own label folder")
    p.add_argument("--save-conf", action="store_true", help="with --save-txt: end each row with "
                   "its score")
    add_tile_arguments(p, "detect")
    add_exist_ok_argument(p)


def classify_input(spec: str) -> Tuple[str, List[str]]:
    """``('webcam', [index]) | ('video', [path]) | ('images', [paths])``; raises ArgumentError when
    nothing matches."""
    from yolo3.core.errors import ArgumentError
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


def _unique_names(pairs: Sequence[Tuple[str, str]]) -> List[str]:
    """``stem + extension`` of each pair; a name given before becomes ``stem_1`` + extension,
    ``stem_2`` ... (never a name another pair has of its own)."""
    reserved = {stem + ext for stem, ext in pairs}
    given: set = set()
    out = []
    for stem, ext in pairs:
        name = stem + ext
        if name in given:
            n = 1
            while f"{stem}_{n}{ext}" in given or f"{stem}_{n}{ext}" in reserved:
                n += 1
            name = f"{stem}_{n}{ext}"
        given.add(name)
        out.append(name)
    return out


def _output_names(paths: Sequence[str]) -> List[str]:
    """Output file names: the input's name, with ``_1``, ``_2``... when names repeat."""
    pairs = [os.path.splitext(os.path.basename(p)) for p in paths]
    return _unique_names([(stem, ext or ".jpg") for stem, ext in pairs])


def _label_names(paths: Sequence[str]) -> List[str]:
    """``--save-txt`` file names: ``STEM.txt`` of each image. Two images of one stem (``x.jpg``
    and ``x.png``, or ``a/x.jpg`` and ``b/x.jpg``) are refused naming both: a label file is
    found by its image's stem, so a second name would match no image."""
    from yolo3.core.errors import SettingError
    seen: dict = {}
    for path in paths:
        stem = os.path.splitext(os.path.basename(path))[0]
        if stem in seen:
            raise SettingError(f"{seen[stem]} and {path} share the stem {stem!r}: their label "
                               f"files would both be {stem}.txt in --save-txt, and a label file "
                               "is found by its image's stem; detect them in separate runs, or "
                               "rename one", "save_txt")
        seen[stem] = path
    return [stem + ".txt" for stem in seen]


def _refuse_label_folder_of_inputs(save_txt: str, images: Sequence[str]) -> None:
    """``--save-txt`` is never where the YOLO layout keeps the input images' own labels (the
    ``labels`` twin of their ``images`` folder, or their own folder): the files written there
    would replace them."""
    from yolo3.core.errors import ArgumentError
    from yolo3.core.paths import same_or_inside
    from yolo3.data.yolo_layout import input_folders
    for folder in input_folders(images):
        if same_or_inside(save_txt, folder) and same_or_inside(folder, save_txt):
            raise ArgumentError(f"{save_txt}: --save-txt is the input images' own label folder "
                                f"(the YOLO layout reads their labels from {folder}); writing "
                                "there would replace them: choose another folder")


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


def run_images(detector, paths: List[str], args, entries: list, folders: dict) -> int:
    """Detect in each image of ``paths``, drawn into ``folders['--output']`` and labelled into
    ``folders['--save-txt']`` (:class:`yolo3.core.output_folder.OutputFolder`, where given); returns
    how many images failed (each named, the rest done)."""
    from PIL import Image
    from tqdm import tqdm

    from yolo3.data.images import load_image
    from yolo3.evaluation.metrics import detection_entry
    from yolo3.evaluation.visualize import draw_detections

    failures = 0
    label_names = dict(zip(paths, _label_names(paths))) if args.save_txt else {}

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
                _save_labels(args, folders["--save-txt"], label_names[path], image.shape[:2],
                             boxes, scores, classes)
            if not args.no_draw:
                drawn = draw_detections(Image.fromarray(image), boxes, scores, classes,
                                        detector.class_names)
                try:
                    folders["--output"].write(name, lambda tmp: drawn.save(
                        tmp, format=_pil_format(name)))
                except (OSError, ValueError) as e:
                    failures += 1
                    tqdm.write(f"yolo3 detect: error: {os.path.join(args.output, name)}: cannot "
                               f"write annotated image: {e}", file=sys.stderr)
            bar.update(1)
    return failures


def _pil_format(path: str) -> str:
    """PIL's format name for an output file (its temporary name ends otherwise)."""
    from PIL import Image
    Image.init()
    return Image.EXTENSION.get(os.path.splitext(path)[1].lower(), "JPEG")


def _save_labels(args, folder, name: str, image_hw, boxes, scores, classes) -> None:
    """The label file ``NAME`` of one image's detections, in the ``--save-txt`` ``folder``."""
    import numpy as np

    from yolo3.data.yolo_layout import label_rows
    rows = np.concatenate([np.asarray(boxes, np.float64).reshape(-1, 4),
                           np.asarray(classes, np.float64).reshape(-1, 1)], axis=1)
    folder.write_text(name, label_rows(rows, image_hw, scores if args.save_conf else None))


def run_video(detector, source: str, is_webcam: bool, args, entries: list, folders: dict) -> int:
    """Detect in each frame of a video or webcam; the annotated video goes to
    ``folders['--output']``, label files to ``folders['--save-txt']``."""
    import contextlib

    from tqdm import tqdm

    from yolo3.core.errors import CommandFailed
    from yolo3.evaluation.metrics import detection_entry
    from yolo3.evaluation.visualize import draw_on_array
    from yolo3.inference.video import VideoWriter, open_video

    video = open_video(source)
    total = video.frame_count
    if args.max_frames:
        total = min(total, args.max_frames) if total > 0 else args.max_frames
    stem, name = _video_names(source, is_webcam, args.fourcc)
    frame_index = 0
    with contextlib.ExitStack() as stack:
        writer = None
        if not args.no_draw:
            tmp = stack.enter_context(folders["--output"].writing(name))
            writer = VideoWriter(tmp, args.fourcc, video.fps,
                                 shown=os.path.join(args.output, name))
        try:
            with tqdm(total=total or None, desc=os.path.basename(str(source)), unit="frame",
                      file=sys.stderr, disable=not show_progress(args)) as bar:
                frames = ((rgb,) for rgb in video.frames(args.max_frames))
                for (rgb,), (boxes, scores, classes) in _detected(detector, frames,
                                                                  args.batch_size):
                    entry = detection_entry(str(source), boxes, scores, classes,
                                            detector.class_names)
                    entry["frame"] = frame_index
                    entries.append(entry)
                    if args.save_txt:
                        _save_labels(args, folders["--save-txt"], f"{stem}_{frame_index}.txt",
                                     rgb.shape[:2], boxes, scores, classes)
                    if writer is not None:
                        writer.write(draw_on_array(rgb, boxes, scores, classes,
                                                   detector.class_names))
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


def _video_names(source: str, is_webcam: bool, fourcc: str) -> Tuple[str, str]:
    """``(stem, annotated video name)`` of a video or webcam input."""
    stem = f"webcam{source}" if is_webcam else os.path.splitext(os.path.basename(source))[0]
    return stem, stem + (".avi" if fourcc.upper() in ("MJPG", "XVID") else ".mp4")


def _planned_outputs(args, kind: str, items: List[str]) -> List[tuple]:
    """``(flag, folder, names, patterns)`` of each output folder detect writes into: the names
    (and, for video frames' label files, the patterns) of what it writes there."""
    if kind == "images":
        drawn, label_patterns = _output_names(items), []
        labels = _label_names(items) if args.save_txt else []
    else:
        stem, video = _video_names(items[0], kind == "webcam", args.fourcc)
        drawn, labels, label_patterns = [video], [], [f"{stem}_*.txt"]
    planned = []
    if not args.no_draw:
        planned.append(("--output", args.output, drawn, []))
    if args.save_txt:
        planned.append(("--save-txt", args.save_txt, labels, label_patterns))
    return planned


def _check_tiles(args, image: str) -> None:
    """Refuse ``--tile`` / ``--overlap`` that would cut ``image`` into too many tiles
    (:data:`yolo3.ops.tiles.MAX_TILES`); an unreadable image is left to the detection loop."""
    from yolo3.core.errors import AnnotationError
    from yolo3.data.images import probe_image
    from yolo3.ops.tiles import check_tile_count
    try:
        hw, _ = probe_image(image)
    except AnnotationError:  # reported, and skipped, where it is read
        return
    check_tile_count([hw], args.tile, args.overlap)


def _escaped(names: Sequence[str]) -> List[str]:
    """File names as ``fnmatch`` patterns matching only themselves."""
    import glob
    return [glob.escape(n) for n in names]


def run(args: argparse.Namespace) -> int:
    """Detect; 0 when every input was processed, 1 when some failed (bad arguments raise: 2)."""
    kind, items = classify_input(args.input)
    sources = [] if kind == "webcam" else items
    if args.save_txt and kind == "images":
        _refuse_label_folder_of_inputs(args.save_txt, sources)
    # annotated copies keep the inputs' names: the output folder must not hold any input, nor
    # lie inside an input folder (or the input images' label folder)
    protect_inputs(args, sources)
    if args.tile and kind == "images":  # the first image's tiles, before any output is made
        _check_tiles(args, sources[0])
    # output folders holding what yolo3 did not write are refused (unless --exist-ok, and never
    # one of the paths written here) before the model loads (yolo3.core.output_folder)
    from yolo3.core.output_folder import OutputFolder
    folders = {flag: OutputFolder(folder, flag, args.exist_ok, [*_escaped(names), *patterns])
               for flag, folder, names, patterns in _planned_outputs(args, kind, items)}
    from yolo3.evaluation.metrics import save_detection_json
    from yolo3.inference.detector import load_detector

    detector = load_detector(args.model, args.anchors, args.classes, score=args.score,
                             iou=args.iou, input_size=args.input_size, variant=args.variant,
                             precision=args.precision, engine=args.engine)
    engine = detector.engine.summary()
    given_tile = args.tile
    detector, sliced = tiled_detector(detector, args)
    if sliced:  # the first line: how each image is cut
        print(sliced, file=sys.stderr)
    print(engine, file=sys.stderr)
    if sliced and given_tile is None and kind == "images":  # the model's tiles: checked now
        _check_tiles(args, sources[0])
    entries: list = []
    try:
        if kind == "images":
            failures = run_images(detector, items, args, entries, folders)
        else:
            failures = run_video(detector, items[0], kind == "webcam", args, entries, folders)
    finally:
        for folder in folders.values():
            folder.close()
    if args.json:
        save_detection_json(args.json, entries)
    done = len({e["image"] for e in entries}) if kind == "images" else len(entries)
    print(f"{done} {'images' if kind == 'images' else 'frames'} processed, {failures} failed"
          + ("" if args.no_draw else f"; output in {args.output}")
          + (f", detections in {args.json}" if args.json else "")
          + (f", label files in {args.save_txt}" if args.save_txt else ""),
          file=sys.stderr)
    return 1 if failures else 0


def main(argv: Optional[Sequence[str]] = None) -> int:
    return run_command(NAME, DESCRIPTION, add_arguments, run, argv)


if __name__ == "__main__":
    sys.exit(main())
