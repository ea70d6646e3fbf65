"""Trackers run over one sequence's detections, for ``yolo3 benchmark track``: each of yolo3's
(:class:`yolo3.inference.tracking.Tracker`) in this process, Ultralytics' two under the peer's own
Python (:mod:`yolo3.benchmarks.ultralytics_track_peer`). Each returns its tracks and the seconds
it took, detections in, tracks out (frames read apart)."""
from __future__ import annotations

import os
import subprocess
import time
import warnings
from typing import Dict, List, Tuple, Union

import numpy as np
from PIL import Image

from yolo3.data.mot import MotTracks
from yolo3.inference.tracking import Tracker

__all__ = ["Detections", "tracked", "peer_tracks", "rows_to_tracks"]

Detections = Tuple[np.ndarray, np.ndarray, np.ndarray]


def tracked(tracker: Union[str, Tracker], detections: List[Detections], frames: List[str]
            ) -> Tuple[MotTracks, float]:
    """One of our trackers (a name: its defaults) over a sequence (``frames``: the image paths,
    read for BoT-SORT's camera motion): its tracks and seconds (detections in, tracks out)."""
    tracker = Tracker(tracker) if isinstance(tracker, str) else tracker
    out: List[tuple] = []
    seconds = 0.0
    for t, (dets, path) in enumerate(zip(detections, frames), 1):
        image = (np.asarray(Image.open(path).convert("RGB")) if tracker.method == "botsort"
                 else None)
        start = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # trackers warns that ByteTrack ignores frames
            tracks = tracker.update(*dets, image)
        seconds += time.perf_counter() - start
        out += [(t, i, *b, s) for i, b, s in zip(tracks.ids, tracks.boxes, tracks.scores)]
    return rows_to_tracks(np.asarray(out, np.float64).reshape(-1, 7)), seconds


def rows_to_tracks(rows: np.ndarray) -> MotTracks:
    """``(M, 7)`` rows ``frame, id, x1, y1, x2, y2, score`` as tracks (class unknown)."""
    return MotTracks(rows[:, 0], rows[:, 1], rows[:, 2:6], rows[:, 6], np.zeros(len(rows)))


def peer_tracks(python: str, detections: List[Detections], frames: List[str], folder: str
                ) -> Dict[str, Tuple[MotTracks, float]]:
    """Ultralytics' trackers under the peer's Python on the same detections."""
    data = {"frames": np.asarray(frames)}
    for t, (boxes, scores, classes) in enumerate(detections):
        data.update({f"boxes_{t}": boxes, f"scores_{t}": scores, f"classes_{t}": classes})
    dets, out = os.path.join(folder, "detections.npz"), os.path.join(folder, "tracks.npz")
    np.savez(dets, **data)
    driver = os.path.join(os.path.dirname(os.path.abspath(__file__)), "ultralytics_track_peer.py")
    proc = subprocess.run([python, driver, "--detections", dets, "--out", out],
                          capture_output=True, text=True,
                          env=dict(os.environ, YOLO_OFFLINE="1", OMP_NUM_THREADS="1"))
    if proc.returncode != 0:
        raise RuntimeError(f"the peer failed (exit {proc.returncode}):\n{proc.stderr[-3000:]}")
    result = np.load(out)
    names = sorted({k.rsplit("_", 1)[0] for k in result.files if k.endswith("_rows")})
    return {n: (rows_to_tracks(result[f"{n}_rows"]), float(result[f"{n}_seconds"]))
            for n in names}
