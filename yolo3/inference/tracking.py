"""Tracking: the same ID for the same object from frame to frame, by a maintained library's
motion trackers (Roboflow's ``trackers``, Apache-2.0, no PyTorch: ``pip install 'yolo3[track]'``).
Our code is the glue: boxes in, IDs out.

    tracker = Tracker("bytetrack")               # or botsort (camera-motion compensated), ocsort, sort
    for frame in frames:
        boxes, scores, classes = detector.detect(frame)
        tracks = tracker.update(boxes, scores, classes, frame)
        tracks.ids                               # (N,) int, from 1, kept while the object is

Boxes are ``(N, 4)`` float ``x1, y1, x2, y2`` image pixels. A detection that starts no track yet
(too few frames, too low a score) is left out of the result. Association is class-agnostic (a
track keeps the class of its latest detection), as in ByteTrack's paper. :func:`track_frames`
runs a detector and a tracker over a stream of frames, one frame in memory at a time.
"""
from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import Deque, Dict, Iterable, Iterator, List, Optional, Tuple

import numpy as np

from yolo3.core.errors import SettingError
from yolo3.core.extras import require

__all__ = ["DETECTION_SCORE", "TRACKERS", "TRACKER_SETTINGS", "DEFAULTS", "Tracks", "Tracker", "Trails",
           "track_frames"]

# detections down to this score reach the tracker (``yolo3 track --score``): ByteTrack's second
# pass follows existing tracks through their low-scoring detections
DETECTION_SCORE = 0.1
# our names -> the library's tracker classes; which of our settings each takes
TRACKERS = {"bytetrack": "ByteTrackTracker", "botsort": "BoTSORTTracker",
            "ocsort": "OCSORTTracker", "sort": "SORTTracker"}
# our setting -> the library's argument (the same meaning in every tracker that takes it)
TRACKER_SETTINGS = {"lost_frames": "lost_track_buffer", "frame_rate": "frame_rate",
                    "min_frames": "minimum_consecutive_frames",
                    "activation": "track_activation_threshold",
                    "high_score": "high_conf_det_threshold",
                    "match_iou": "minimum_iou_threshold"}
# where a tracker names one otherwise (BoT-SORT: the first association's IoU)
_ARGUMENT_OF = {("botsort", "match_iou"): "minimum_iou_threshold_first_assoc"}
# the defaults chosen behind trained detectors (docs/benchmarks.md, "Tracking behind trained
# detectors": 3 detectors of 2-8 epochs x 4 sequences, none of them the benchmark's): a track
# starts on a detection scoring 0.45 (lower lets a weak detector's false boxes start tracks,
# higher loses a weak detector's objects), and follows a detection overlapping its prediction by
# IoU 0.15; SORT keeps the ground-truth-with-noise choice; the rest is the library's
DEFAULTS = {"bytetrack": {"min_frames": 1, "activation": 0.45, "high_score": 0.45,
                          "match_iou": 0.15},
            "sort": {"min_frames": 1, "activation": 0.5, "match_iou": 0.2},
            "botsort": {"min_frames": 1, "activation": 0.45, "high_score": 0.45,
                        "match_iou": 0.15},
            "ocsort": {}}
_TAKES = {"bytetrack": set(TRACKER_SETTINGS), "botsort": set(TRACKER_SETTINGS),
          "ocsort": set(TRACKER_SETTINGS) - {"activation"},
          "sort": set(TRACKER_SETTINGS) - {"high_score"}}


@dataclass
class Tracks:
    """One frame's tracked objects: ``boxes (N, 4)`` ``x1, y1, x2, y2`` pixels, ``scores (N,)``,
    ``classes (N,)`` int, ``ids (N,)`` int (from 1: the library's IDs + 1), sorted by ID."""

    boxes: np.ndarray
    scores: np.ndarray
    classes: np.ndarray
    ids: np.ndarray

    def __len__(self) -> int:
        return len(self.ids)


class Tracker:
    """A motion tracker (:data:`TRACKERS`) fed frame by frame (module docstring).

    ``settings`` (None: :data:`DEFAULTS`, else the library's): ``lost_frames`` (how long a lost track waits for
    its object, in frames at 30 per second), ``frame_rate``, ``min_frames`` (consecutive frames
    before a track gets its ID), ``activation`` (the score that starts a track), ``high_score``
    (ByteTrack's split between first- and second-pass detections), ``match_iou`` (the least IoU
    of a detection with a track's predicted box to be its next). ``botsort`` also compensates
    the camera's motion from the frames (pass them to :meth:`update`). ``smooth``: each track's
    box is its filtered state (the tracker's Kalman estimate after this frame's detection: less
    jitter, +0.03 HOTA on the benchmark's sequences), else the detection's own box.
    ``arguments``: the library tracker's own keyword arguments these settings became."""

    def __init__(self, method: str = "bytetrack", smooth: bool = True,
                 **settings: Optional[float]):
        if method not in TRACKERS:
            raise SettingError(f"tracker must be one of {', '.join(TRACKERS)}, got {method!r}",
                               "tracker")
        unknown = set(settings) - set(TRACKER_SETTINGS)
        if unknown:
            raise SettingError(f"unknown tracker settings {sorted(unknown)}: the settings are "
                               f"{', '.join(TRACKER_SETTINGS)}", *sorted(unknown))
        given = {k: v for k, v in settings.items() if v is not None}
        unused = set(given) - _TAKES[method]
        given = {**DEFAULTS[method], **given}
        if unused:
            raise SettingError(f"{method} does not take {', '.join(sorted(unused))}",
                               *sorted(unused))
        library = require("trackers", "tracking")
        self.method = method
        self.settings = given
        self.arguments = {_ARGUMENT_OF.get((method, k), TRACKER_SETTINGS[k]):
                          int(v) if k in ("lost_frames", "min_frames") else float(v)
                          for k, v in given.items()}
        self._tracker = getattr(library, TRACKERS[method])(**self.arguments)
        self._sv = require("supervision", "tracking")
        self._needs_frame = method == "botsort"
        self.smooth = bool(smooth)

    def reset(self) -> None:
        """Forget every track (a new video); IDs count from 1 again."""
        self._tracker.reset()

    def update(self, boxes: np.ndarray, scores: np.ndarray, classes: np.ndarray,
               frame: Optional[np.ndarray] = None) -> Tracks:
        """Feed one frame's detections (``frame``: its pixels, for BoT-SORT's camera motion);
        returns the frame's tracked objects."""
        boxes = np.asarray(boxes, np.float32).reshape(-1, 4)
        scores = np.asarray(scores, np.float32).reshape(-1)
        classes = np.asarray(classes, np.int64).reshape(-1)
        if not len(boxes) == len(scores) == len(classes):
            raise ValueError(f"{len(boxes)} boxes, {len(scores)} scores and {len(classes)} "
                             "classes: one of each per detection")
        detections = self._sv.Detections(xyxy=boxes, confidence=scores, class_id=classes)
        out = self._tracker.update(detections, frame if self._needs_frame else None)
        ids = np.asarray(out.tracker_id if out.tracker_id is not None else [], np.int64)
        keep = ids >= 0  # -1: no track yet
        ids = ids + 1  # the library counts from 0; MOT from 1
        order = np.argsort(ids[keep], kind="stable")
        pick = lambda a, dtype: np.asarray(a, dtype)[keep][order]  # noqa: E731
        n = len(ids)
        boxes = np.asarray(out.xyxy, np.float32).reshape(-1, 4)
        if self.smooth and n:
            state = {int(t.tracker_id) + 1: t.get_state_bbox() for t in self._tracker.tracks
                     if t.tracker_id >= 0}
            boxes = np.asarray([state.get(int(i), b) for i, b in zip(ids, boxes)],
                               np.float32).reshape(-1, 4)
        return Tracks(pick(boxes, np.float32).reshape(-1, 4),
                      pick(out.confidence if out.confidence is not None else np.ones(n),
                           np.float32),
                      pick(out.class_id if out.class_id is not None else np.zeros(n), np.int64),
                      ids[keep][order])


def track_frames(detector, tracker: Tracker, frames: Iterable[np.ndarray]
                 ) -> Iterator[Tuple[np.ndarray, Tracks]]:
    """``(frame, tracks)`` for each RGB frame of ``frames``, detected by ``detector``
    (``detect(image) -> boxes, scores, classes``) and tracked by ``tracker``; lazily, one frame
    at a time."""
    for frame in frames:
        boxes, scores, classes = detector.detect(frame)
        yield frame, tracker.update(boxes, scores, classes, frame)


class Trails:
    """Each track's last ``length`` box centres, for drawing its trail. A track unseen for
    ``length`` frames is forgotten: memory does not grow with the video."""

    def __init__(self, length: int = 30):
        self.length = int(length)
        self._centres: Dict[int, Deque[Tuple[float, float]]] = {}
        self._last_seen: Dict[int, int] = {}
        self._frame = 0

    def __len__(self) -> int:
        return len(self._centres)

    def update(self, tracks: Tracks) -> List[np.ndarray]:
        """Add one frame's tracks; returns each track's trail ``(T, 2)`` ``x, y`` (oldest
        first), in the order of ``tracks``."""
        self._frame += 1
        out = []
        for ident, (x1, y1, x2, y2) in zip(tracks.ids, tracks.boxes):
            ident = int(ident)
            trail = self._centres.setdefault(ident, deque(maxlen=max(self.length, 1)))
            trail.append(((x1 + x2) / 2.0, (y1 + y2) / 2.0))
            self._last_seen[ident] = self._frame
            out.append(np.asarray(trail, np.float32).reshape(-1, 2))
        for ident in [i for i, seen in self._last_seen.items()
                      if self._frame - seen >= max(self.length, 1)]:
            del self._centres[ident], self._last_seen[ident]
        return out
