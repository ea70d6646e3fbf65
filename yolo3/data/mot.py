"""Tracks in the MOT Challenge text layout: one line per box,
``frame,id,x,y,w,h,score,class,visibility[,...]`` (frames from 1, ``x, y`` the top-left corner
and ``w, h`` the size in pixels; a tracker's output writes ``-1`` for the last three).

- :func:`read_mot`: a ground-truth or tracker file -> :class:`MotTracks`, each bad line refused
  with the file, the line and the reason (too few fields, a number that is not one, a frame
  below 1, a negative ID, a box without area, an ID twice in one frame).
- :func:`mot_lines`: tracks -> the text lines a tracker writes (``-1, -1, -1`` at the end).

Ground truth from MOT17 carries a ``considered`` flag in column 7 (0: a box not scored; what a
tracker reports on it is not counted against it either) and a class in column 8 (MOT15's world
coordinates there are read as no class, -1): read as the ``scores`` and ``classes`` (:func:`yolo3.evaluation.track_scores.track_metrics` splits them). No
TensorFlow here.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Dict, Iterable, List, Optional, Sequence

import numpy as np

from yolo3.core.errors import AnnotationError, PathLike
from yolo3.core.limits import beyond_limit

__all__ = ["MotTracks", "read_mot", "mot_lines", "MOT_FIELDS"]

MOT_FIELDS = ("frame", "id", "x", "y", "w", "h", "score", "class", "visibility")


@dataclass
class MotTracks:
    """Boxes by frame: ``frames (N,)`` int (from 1), ``ids (N,)`` int, ``boxes (N, 4)`` float
    ``x1, y1, x2, y2`` pixels, ``scores (N,)`` float (ground truth: 1), ``classes (N,)`` int
    (-1: unknown). Rows sorted by frame, then ID."""

    frames: np.ndarray
    ids: np.ndarray
    boxes: np.ndarray
    scores: np.ndarray
    classes: np.ndarray

    def __post_init__(self):
        order = np.lexsort((np.asarray(self.ids), np.asarray(self.frames)))
        self.frames = np.asarray(self.frames, np.int64).reshape(-1)[order]
        self.ids = np.asarray(self.ids, np.int64).reshape(-1)[order]
        self.boxes = np.asarray(self.boxes, np.float64).reshape(-1, 4)[order]
        self.scores = np.asarray(self.scores, np.float64).reshape(-1)[order]
        self.classes = np.asarray(self.classes, np.int64).reshape(-1)[order]

    def __len__(self) -> int:
        return len(self.frames)

    @property
    def num_frames(self) -> int:
        """The last frame that holds a box (0 when none does)."""
        return int(self.frames.max()) if len(self.frames) else 0

    def frame(self, index: int) -> "MotTracks":
        """The boxes of frame ``index`` (from 1): a slice of the rows, sorted by frame."""
        lo, hi = np.searchsorted(self.frames, [index, index + 1])
        return MotTracks(self.frames[lo:hi], self.ids[lo:hi], self.boxes[lo:hi],
                         self.scores[lo:hi], self.classes[lo:hi])

    def by_frame(self, num_frames: Optional[int] = None) -> List[Dict[str, np.ndarray]]:
        """Per frame 1..``num_frames`` (default: the last with a box): ``{"ids", "boxes"}``."""
        count = self.num_frames if num_frames is None else int(num_frames)
        out = [{"ids": np.zeros(0, np.int64), "boxes": np.zeros((0, 4))} for _ in range(count)]
        if not len(self.frames):
            return out
        starts = np.searchsorted(self.frames, np.arange(1, count + 2))
        for t in range(count):
            lo, hi = starts[t], starts[t + 1]
            out[t] = {"ids": self.ids[lo:hi], "boxes": self.boxes[lo:hi]}
        return out


def _number(text: str, path: PathLike, line: int, field: str, whole: bool) -> float:
    try:
        value = float(text)
    except ValueError:
        raise AnnotationError(path, f"{field} {text.strip()!r} is not a number",
                              line=line) from None
    if not math.isfinite(value):
        raise AnnotationError(path, f"{field} {text.strip()!r} is not finite", line=line)
    if whole and value != int(value):
        raise AnnotationError(path, f"{field} {text.strip()!r} is not a whole number", line=line)
    return value


def read_mot(path: PathLike) -> MotTracks:
    """Read a MOT-layout file (module docstring; column 7, the score, defaults to 1). Raises
    :class:`AnnotationError` naming the file and line."""
    frames: List[int] = []
    ids: List[int] = []
    boxes: List[Sequence[float]] = []
    scores: List[float] = []
    classes: List[int] = []
    seen: Dict[tuple, int] = {}
    try:
        handle = open(path, encoding="utf-8")
    except OSError as e:
        raise AnnotationError(path, f"cannot read: {e.strerror or e}") from None
    with handle:
        try:
            lines = handle.read().splitlines()
        except UnicodeDecodeError:
            raise AnnotationError(path, "not a text file (MOT layout is comma-separated text)")\
                from None
    for number, raw in enumerate(lines, 1):
        text = raw.strip()
        if not text or text.startswith("#"):
            continue
        fields = [f for f in text.replace(" ", ",").split(",") if f != ""]
        if len(fields) < 6:
            raise AnnotationError(path, f"{len(fields)} fields; the MOT layout has at least 6 "
                                        "(frame,id,x,y,w,h[,score,class,visibility])", line=number)
        frame = int(_number(fields[0], path, number, "frame", True))
        ident = int(_number(fields[1], path, number, "id", True))
        x, y, w, h = (_number(fields[k], path, number, MOT_FIELDS[k], False) for k in range(2, 6))
        score = _number(fields[6], path, number, "score", False) if len(fields) > 6 else 1.0
        cls = -1
        if len(fields) > 7:  # MOT16/17's class; MOT15 keeps a world x there: no class
            value = _number(fields[7], path, number, "class", False)
            cls = int(value) if value == int(value) else -1
        if frame < 1:
            raise AnnotationError(path, f"frame {frame}: frames count from 1", line=number)
        too_long = beyond_limit("frame", frame)  # before anything is allocated per frame
        if too_long:
            raise AnnotationError(path, too_long, line=number)
        if ident < 0:
            raise AnnotationError(path, f"id {ident}: IDs are 0 or more", line=number)
        if w <= 0 or h <= 0:
            raise AnnotationError(path, f"box {w:g}x{h:g}: width and height must be above 0",
                                  line=number)
        key = (frame, ident)
        if key in seen:
            raise AnnotationError(path, f"id {ident} appears twice in frame {frame} (first on line "
                                        f"{seen[key]}): an ID names one object", line=number)
        seen[key] = number
        frames.append(frame)
        ids.append(ident)
        boxes.append((x, y, x + w, y + h))
        scores.append(score)
        classes.append(cls)
    return MotTracks(np.asarray(frames, np.int64), np.asarray(ids, np.int64),
                     np.asarray(boxes, np.float64).reshape(-1, 4), np.asarray(scores),
                     np.asarray(classes, np.int64))


def mot_lines(frame: int, ids: Iterable[int], boxes: np.ndarray,
              scores: Optional[Iterable[float]] = None) -> List[str]:
    """One frame's tracks as MOT lines ``frame,id,x,y,w,h,score,-1,-1,-1`` (``boxes`` ``(N, 4)``
    ``x1, y1, x2, y2`` pixels; scores default 1)."""
    boxes = np.asarray(boxes, np.float64).reshape(-1, 4)
    ids = list(ids)
    scores = [1.0] * len(ids) if scores is None else list(scores)
    return [f"{int(frame)},{int(i)},{b[0]:.2f},{b[1]:.2f},{b[2] - b[0]:.2f},{b[3] - b[1]:.2f},"
            f"{float(s):.4f},-1,-1,-1" for i, b, s in zip(ids, boxes, scores)]

