"""``yolo3 track`` (``yolo3-track``): detect and track objects through a video, a folder of frames
or a webcam: the same ID for the same object from frame to frame.

Writes into ``--output``, named after the input (a video's stem, a frame folder's name, or its
parent's for a MOT sequence's ``img1``):

- ``NAME.txt``: the tracks in the MOT Challenge layout, ``frame,id,x,y,w,h,score,-1,-1,-1``
  (frames from 1, pixels);
- ``NAME.json``: one object per tracked box, ``{"frame", "id", "box": [x1, y1, x2, y2],
  "score", "class", "name"}``;
- ``NAME.mp4`` (unless ``--no-draw``): the annotated video, each box with its ID and a short
  trail.

Frames stream one by one (memory does not grow with the video); every file is written to a
temporary name and moved into place at the end, so an interrupted or failed run leaves nothing
behind. Trackers: ``--tracker`` (:mod:`yolo3.inference.tracking`, ``pip install 'yolo3[track]'``).
"""
from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
from typing import Callable, Iterator, List, Optional, Sequence, Tuple

import numpy as np

from yolo3.cli.common import (
    add_engine_argument,
    add_exist_ok_argument,
    add_model_arguments,
    add_precision_argument,
    add_tile_arguments,
    add_video_arguments,
    protect_inputs,
    run_command,
    show_progress,
    tiled_detector,
)
from yolo3.cli.flags import COUNT, COUNT0, FRACTION, POSITIVE, MediaSource, OutputPath
from yolo3.inference.tracking import DETECTION_SCORE

NAME = "track"
DESCRIPTION = ("Track objects through a video, a folder of frames or a webcam: the same ID for "
               "the same object; MOT-layout tracks, JSON and an annotated video in --output.")
TRACKER_CHOICES = ("bytetrack", "botsort", "ocsort", "sort")


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_model_arguments(p, "a .keras model (it carries its anchors and classes), .weights.h5 "
                           "template weights, a keras-yolo3 .h5, or an exported .tflite, .onnx, "
                           "OpenVINO IR (.xml or its folder) or SavedModel folder")
    p.add_argument("--input", required=True, type=MediaSource(),
                   help="a video file, a folder of frames (sorted by name; a MOT sequence's "
                        "img1), a glob ('frames/*.jpg') or a webcam index")
    p.add_argument("--output", required=True, type=OutputPath("folder"),
                   help="folder for NAME.txt (MOT layout), NAME.json and NAME.mp4")
    p.add_argument("--tracker", choices=TRACKER_CHOICES, default="bytetrack",
                   help="bytetrack (default), botsort (compensates the camera's motion), ocsort "
                        "or sort: Roboflow's motion trackers")
    p.add_argument("--score", type=FRACTION, default=DETECTION_SCORE,
                   help=f"detections down to this score reach the tracker (default "
                        f"{DETECTION_SCORE:g}: ByteTrack keeps low-score boxes of existing tracks)")
    p.add_argument("--iou", type=FRACTION, default=0.45, help="NMS IoU threshold (default 0.45)")
    p.add_argument("--lost-frames", type=COUNT0, default=None, metavar="N",
                   help="how long a lost track waits for its object, in frames at 30 per second "
                        "(default: the tracker's, 30)")
    p.add_argument("--min-frames", type=COUNT, default=None, metavar="N",
                   help="consecutive frames before a track gets its ID (default 1; ocsort: "
                        "the tracker's)")
    p.add_argument("--activation", type=FRACTION, default=None, metavar="SCORE",
                   help="the score that starts a track (default: 0.45, sort 0.5; not ocsort)")
    p.add_argument("--high-score", type=FRACTION, default=None, metavar="SCORE",
                   help="bytetrack, botsort, ocsort: first-pass detections score at least this "
                        "(default 0.45; ocsort: the tracker's)")
    p.add_argument("--match-iou", type=FRACTION, default=None, metavar="IOU",
                   help="the least IoU of a detection with a track's predicted box to be its "
                        "next (default: 0.15 for bytetrack and botsort, 0.2 for sort, the "
                        "tracker's for ocsort)")
    p.add_argument("--frame-rate", type=POSITIVE, default=None, metavar="FPS",
                   help="frames per second (default: the video's, else 30)")
    p.add_argument("--trail", type=COUNT0, default=30, metavar="N",
                   help="draw each track's last N centres (default 30; 0: none)")
    add_precision_argument(p)
    add_engine_argument(p)
    add_video_arguments(p)
    p.add_argument("--no-draw", action="store_true", help="only write the tracks (txt, JSON)")
    add_tile_arguments(p, "detect")
    add_exist_ok_argument(p)


def sequence_name(kind: str, items: Sequence[str]) -> str:
    """The outputs' name: a video's stem, ``webcamN``, or the frames' folder (its parent's name
    for a MOT sequence's ``img1``)."""
    if kind == "webcam":
        return f"webcam{items[0]}"
    if kind == "video":
        return os.path.splitext(os.path.basename(items[0]))[0]
    folder = os.path.dirname(os.path.abspath(items[0]))
    name = os.path.basename(folder)
    if name == "img1":
        name = os.path.basename(os.path.dirname(folder)) or name
    return name or "frames"


def _frame_sizes_agree(paths: Sequence[str]) -> Tuple[int, int]:
    """The frames' common ``(h, w)``; a frame of another size (or unreadable) is refused, named,
    before any work."""
    from yolo3.core.errors import AnnotationError
    from yolo3.data.images import probe_images
    probes = probe_images(paths, workers=8, errors=True)
    first = None
    for path, probe in zip(paths, probes):
        if isinstance(probe, AnnotationError):
            raise probe
        hw = tuple(int(v) for v in probe[0])
        if first is None:
            first = (path, hw)
        elif hw != first[1]:
            raise AnnotationError(path, f"frame of {hw[1]}x{hw[0]} px, but {first[0]} is "
                                        f"{first[1][1]}x{first[1][0]}: a sequence keeps one size")
    return first[1]


def _frames(kind: str, items: List[str], max_frames: int
            ) -> Tuple[Iterator[np.ndarray], float, int, Callable[[], None]]:
    """``(RGB frames, fps, frame count (0: unknown), release)``."""
    if kind == "images":
        from yolo3.data.images import load_image
        paths = items[:max_frames] if max_frames else items
        return (load_image(p) for p in paths), 0.0, len(paths), lambda: None
    from yolo3.core.errors import CommandFailed, FileFormatError
    from yolo3.inference.video import open_video
    try:
        video = open_video(int(items[0]) if kind == "webcam" else items[0])
    except CommandFailed as e:
        if kind == "webcam":
            raise
        raise FileFormatError(items[0], f"cannot be read as a video ({e}): an empty, truncated "
                                        "or unknown file") from None
    total = video.frame_count
    if max_frames:
        total = min(total, max_frames) if total > 0 else max_frames
    return video.frames(max_frames), float(video.fps), total, video.release


def run(args: argparse.Namespace) -> int:
    """Track; 0 when the stream went through (bad arguments raise: 2)."""
    from yolo3.cli.detect import classify_input
    from yolo3.core.errors import FileFormatError
    from yolo3.core.output_folder import OutputFolder
    from yolo3.inference.detector import load_detector
    from yolo3.inference.tracking import Tracker

    kind, items = classify_input(args.input)
    protect_inputs(args, [] if kind == "webcam" else items)
    if kind == "images":
        _frame_sizes_agree(items[:args.max_frames] if args.max_frames else items)
    name = sequence_name(kind, items)
    video_name = name + (".avi" if args.fourcc.upper() in ("MJPG", "XVID") else ".mp4")
    written = [f"{name}.txt", f"{name}.json"] + ([] if args.no_draw else [video_name])
    folder = OutputFolder(args.output, "--output", args.exist_ok, written)  # refused now
    settings = dict(lost_frames=args.lost_frames, min_frames=args.min_frames,
                    activation=args.activation, high_score=args.high_score,
                    match_iou=args.match_iou)
    Tracker(args.tracker, **settings)  # a setting this tracker does not take: refused now
    frames, fps, total, release = _frames(kind, items, args.max_frames)  # the input first
    try:
        detector = load_detector(args.model, args.anchors, args.classes, score=args.score,
                                 iou=args.iou, input_size=args.input_size, variant=args.variant,
                                 precision=args.precision, engine=args.engine)
        engine = detector.engine.summary()
        detector, sliced = tiled_detector(detector, args)
        if sliced:
            print(sliced, file=sys.stderr)
        print(engine, file=sys.stderr)
        tracker = Tracker(args.tracker, frame_rate=args.frame_rate or fps or None, **settings)
        print(f"tracker: {args.tracker}" + "".join(f", {k} {v:g}" for k, v in
                                                   tracker.settings.items()), file=sys.stderr)
        with folder:
            count, ids = _track(detector, tracker, frames, fps, total, name, video_name,
                                folder, args)
    except _NoFrames:
        raise FileFormatError(args.input, "no frame could be read (an empty, truncated or "
                                          "unreadable video); nothing was written") from None
    finally:
        release()
    if kind == "video" and total and count < total:
        print(f"warning: {args.input}: the video says {total} frames, {count} could be read "
              "(truncated?): the tracks cover those", file=sys.stderr)
    print(f"{count} frames, {ids} tracks: {os.path.join(args.output, name)}.txt (MOT layout), "
          f"{name}.json" + ("" if args.no_draw else f", {video_name}"), file=sys.stderr)
    return 0


def _track(detector, tracker, frames, fps: float, total: int, name: str, video_name: str,
           folder, args) -> Tuple[int, int]:
    """Detect and track every frame, writing the three files through temporary names (moved
    into place only when the whole stream went through); ``(frames, distinct IDs)``."""
    from tqdm import tqdm

    from yolo3.data.mot import mot_lines
    from yolo3.evaluation.visualize import draw_on_array
    from yolo3.inference.tracking import Trails, track_frames
    from yolo3.inference.video import VideoWriter

    names = detector.class_names
    trails = Trails(args.trail) if args.trail else None
    seen: set = set()
    count = 0
    with contextlib.ExitStack() as stack:
        mot = open(stack.enter_context(folder.writing(f"{name}.txt")), "w", encoding="utf-8")
        stack.callback(mot.close)
        js = open(stack.enter_context(folder.writing(f"{name}.json")), "w", encoding="utf-8")
        stack.callback(js.close)
        writer = None
        if not args.no_draw:
            writer = VideoWriter(stack.enter_context(folder.writing(video_name)), args.fourcc,
                                 fps or args.frame_rate or 30.0,
                                 shown=os.path.join(args.output, video_name))
            stack.callback(writer.release)
        js.write("[")
        bar = stack.enter_context(tqdm(total=total or None, desc=name, unit="frame",
                                       file=sys.stderr, disable=not show_progress(args)))
        entries = 0
        for frame, tracks in track_frames(detector, tracker, frames):
            count += 1
            seen.update(int(i) for i in tracks.ids)
            for line in mot_lines(count, tracks.ids, tracks.boxes, tracks.scores):
                mot.write(line + "\n")
            for i, box, score, cls in zip(tracks.ids, tracks.boxes, tracks.scores,
                                          tracks.classes):
                entry = {"frame": count, "id": int(i), "box": [round(float(v), 2) for v in box],
                         "score": round(float(score), 4), "class": int(cls),
                         "name": names[int(cls)] if 0 <= int(cls) < len(names) else str(cls)}
                js.write(("\n" if entries == 0 else ",\n") + json.dumps(entry))
                entries += 1
            if writer is not None:
                trail = trails.update(tracks) if trails is not None else None
                writer.write(draw_on_array(frame, tracks.boxes, tracks.scores, tracks.classes,
                                           names, ids=tracks.ids, trails=trail))
            bar.update(1)
        js.write("\n]\n")
        if count == 0:  # nothing is kept: the temporary files go
            raise _NoFrames()
    return count, len(seen)


class _NoFrames(Exception):
    """Raised inside the writing context so that no empty file is moved into place."""


def main(argv: Optional[Sequence[str]] = None) -> int:
    return run_command(NAME, DESCRIPTION, add_arguments, run, argv)


if __name__ == "__main__":
    sys.exit(main())
