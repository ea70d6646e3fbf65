"""The peer's side of ``yolo3 benchmark track --peer-python``: Ultralytics' ByteTrack and BoT-SORT
(``BYTETracker``, ``BOTSORT`` with its default ``bytetrack.yaml`` / ``botsort.yaml`` settings,
BoT-SORT's camera-motion compensation on the frames, no re-identification) fed the detections
yolo3's trackers get, frame by frame. Runs under the peer's own Python (an environment with
``pip install ultralytics``, which pulls torch), never inside yolo3's: it imports nothing of
yolo3, only Ultralytics, NumPy, OpenCV and the standard library.

    PEER_PYTHON ultralytics_track_peer.py --detections DETS.npz --out TRACKS.npz

``DETS.npz``: ``frames`` (the frame image paths, for BoT-SORT's motion compensation) and per frame
``t`` (from 0) ``boxes_t`` ``(N, 4)`` ``x1, y1, x2, y2``, ``scores_t``, ``classes_t``.
``TRACKS.npz``: per tracker ``NAME_rows`` ``(M, 7)`` ``frame (from 1), id, x1, y1, x2, y2,
score``, and ``NAME_seconds``, the tracking time (detections in, tracks out; frames read apart).
"""
from __future__ import annotations

import argparse
import os
import sys
import time


class _Detections:
    """What Ultralytics' trackers read of a frame's results: ``conf``, ``cls``, ``xywh``,
    ``xyxy``, boolean indexing and ``len``."""

    def __init__(self, xyxy, conf, cls):
        self.xyxy, self.conf, self.cls = xyxy, conf, cls

    @property
    def xywh(self):
        import numpy as np
        x1, y1, x2, y2 = (self.xyxy[:, k] for k in range(4))
        return np.stack([(x1 + x2) / 2, (y1 + y2) / 2, x2 - x1, y2 - y1], axis=1)

    def __getitem__(self, index):
        return _Detections(self.xyxy[index], self.conf[index], self.cls[index])

    def __len__(self) -> int:
        return len(self.conf)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--detections", required=True)
    p.add_argument("--out", required=True)
    args = p.parse_args(argv)
    os.environ.setdefault("YOLO_OFFLINE", "1")
    import cv2
    import numpy as np
    from ultralytics.trackers.bot_sort import BOTSORT
    from ultralytics.trackers.byte_tracker import BYTETracker
    from ultralytics.utils import YAML, IterableSimpleNamespace
    from ultralytics.utils.checks import check_yaml

    data = np.load(args.detections)
    frames = [str(f) for f in data["frames"]]
    images = [cv2.imread(f) for f in frames]  # BGR, as Ultralytics reads them
    out = {}
    for name, kind, cfg in (("ultralytics-bytetrack", BYTETracker, "bytetrack.yaml"),
                            ("ultralytics-botsort", BOTSORT, "botsort.yaml")):
        settings = IterableSimpleNamespace(**YAML.load(check_yaml(cfg)))
        tracker = kind(args=settings)  # track_buffer: frames, at any rate
        rows = []
        seconds = 0.0
        for t, image in enumerate(images):
            dets = _Detections(data[f"boxes_{t}"].astype(np.float32),
                               data[f"scores_{t}"].astype(np.float32),
                               data[f"classes_{t}"].astype(np.float32))
            start = time.perf_counter()
            tracks = tracker.update(dets, image)
            seconds += time.perf_counter() - start
            for x1, y1, x2, y2, ident, score, *_ in np.asarray(tracks).reshape(-1, 8):
                rows.append((t + 1, ident, x1, y1, x2, y2, score))
        out[f"{name}_rows"] = np.asarray(rows, np.float64).reshape(-1, 7)
        out[f"{name}_seconds"] = np.float64(seconds)
    import ultralytics
    out["version"] = np.array(ultralytics.__version__)
    np.savez(args.out, **out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
