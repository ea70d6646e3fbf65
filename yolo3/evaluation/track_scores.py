"""Tracking scores by the field's measures, computed by TrackEval (the HOTA authors' reference
code, ``pip install 'yolo3[track]'``): HOTA (with DetA, AssA, LocA), IDF1 (with IDP, IDR), MOTA
(with MOTP, ID switches, fragmentations, mostly tracked and mostly lost).

Ground truth and tracks are :class:`yolo3.data.mot.MotTracks`. Boxes of the ground truth marked
not considered (score 0: MOT17's column 7) are not scored, and the tracker's boxes that match one
of them (IoU >= 0.5, one to one) are dropped before scoring, as the MOT Challenge's evaluation
does. Similarity: box IoU. Several sequences combine as TrackEval combines them (sums of the
counts; HOTA over the pooled matches). No TensorFlow here.
"""
from __future__ import annotations

from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np

from yolo3.core.extras import require
from yolo3.data.mot import MotTracks
from yolo3.ops.boxes import iou_xyxy

__all__ = ["TRACK_METRICS", "sequence_data", "track_metrics", "score_sequences",
           "combine_track_metrics"]

# what track_metrics returns, in the order tables print them
TRACK_METRICS = ("HOTA", "DetA", "AssA", "LocA", "IDF1", "IDP", "IDR", "MOTA", "MOTP", "IDSW",
                 "Frag", "MT", "ML", "GT_IDs", "IDs")
MATCH_IOU = 0.5


def _without_ignored(gt: MotTracks, pred: MotTracks, t: int) -> tuple:
    """Frame ``t``'s considered ground truth and the predictions left once those matching an
    ignored ground-truth box (IoU >= 0.5, one to one) are dropped: ``(gt ids, gt boxes, pred ids,
    pred boxes)``."""
    from scipy.optimize import linear_sum_assignment
    g, p = gt.frame(t), pred.frame(t)
    considered = g.scores != 0
    ignored = g.boxes[~considered]
    keep = np.ones(len(p), bool)
    if len(ignored) and len(p):
        iou = iou_xyxy(ignored, p.boxes)
        rows, cols = linear_sum_assignment(-iou)
        keep[cols[iou[rows, cols] >= MATCH_IOU]] = False
    return g.ids[considered], g.boxes[considered], p.ids[keep], p.boxes[keep]


def sequence_data(gt: MotTracks, pred: MotTracks, num_frames: Optional[int] = None) -> dict:
    """TrackEval's per-sequence input: IDs renumbered from 0, IoU per frame."""
    count = max(gt.num_frames, pred.num_frames) if num_frames is None else int(num_frames)
    frames = [_without_ignored(gt, pred, t) for t in range(1, count + 1)]
    gt_map = {int(i): k for k, i in enumerate(np.unique(np.concatenate(
        [f[0] for f in frames] + [np.zeros(0, np.int64)])))}
    pr_map = {int(i): k for k, i in enumerate(np.unique(np.concatenate(
        [f[2] for f in frames] + [np.zeros(0, np.int64)])))}
    data: Dict[str, object] = {
        "num_timesteps": count, "num_gt_ids": len(gt_map), "num_tracker_ids": len(pr_map),
        "num_gt_dets": int(sum(len(f[0]) for f in frames)),
        "num_tracker_dets": int(sum(len(f[2]) for f in frames)),
        "gt_ids": [np.asarray([gt_map[int(i)] for i in f[0]], np.int64) for f in frames],
        "tracker_ids": [np.asarray([pr_map[int(i)] for i in f[2]], np.int64) for f in frames],
        "similarity_scores": [iou_xyxy(f[1], f[3]) if len(f[1]) and len(f[3]) else
                              np.zeros((len(f[1]), len(f[3]))) for f in frames],
    }
    return data


def _metrics():
    trackeval = require("trackeval", "tracking scores (HOTA, IDF1, MOTA)")
    quiet = {"PRINT_CONFIG": False}
    return (trackeval.metrics.HOTA(quiet), trackeval.metrics.Identity(quiet),
            trackeval.metrics.CLEAR(quiet), trackeval.metrics.Count(quiet))


def _summary(hota: dict, identity: dict, clear: dict, count: dict) -> Dict[str, float]:
    return {"HOTA": float(np.mean(hota["HOTA"])), "DetA": float(np.mean(hota["DetA"])),
            "AssA": float(np.mean(hota["AssA"])), "LocA": float(np.mean(hota["LocA"])),
            "IDF1": float(identity["IDF1"]), "IDP": float(identity["IDP"]),
            "IDR": float(identity["IDR"]), "MOTA": float(clear["MOTA"]),
            "MOTP": float(clear["MOTP"]), "IDSW": int(clear["IDSW"]), "Frag": int(clear["Frag"]),
            "MT": int(clear["MT"]), "ML": int(clear["ML"]), "GT_IDs": int(count["GT_IDs"]),
            "IDs": int(count["IDs"])}


def _evaluate(gt: MotTracks, pred: MotTracks, num_frames: Optional[int]) -> List[dict]:
    data = sequence_data(gt, pred, num_frames)
    return [metric.eval_sequence(data) for metric in _metrics()]


def track_metrics(gt: MotTracks, pred: MotTracks,
                  num_frames: Optional[int] = None) -> Dict[str, float]:
    """One sequence's scores (:data:`TRACK_METRICS`; HOTA, DetA, AssA, LocA, IDF1, IDP, IDR,
    MOTA, MOTP as fractions, the rest counts). ``num_frames``: the sequence's length (default:
    the last frame holding a box)."""
    return _summary(*_evaluate(gt, pred, num_frames))


def score_sequences(pairs: Sequence[tuple]) -> Tuple[List[Dict[str, float]], Dict[str, float]]:
    """Each sequence's scores and the combined ones, every sequence evaluated once (``pairs``:
    ``(gt, pred[, num_frames])`` each)."""
    metrics = _metrics()
    per_sequence = [_evaluate(*pair) if len(pair) == 3 else _evaluate(pair[0], pair[1], None)
                    for pair in pairs]
    combined = [metric.combine_sequences({str(s): res[k] for s, res in enumerate(per_sequence)})
                for k, metric in enumerate(metrics)]
    return [_summary(*res) for res in per_sequence], _summary(*combined)


def combine_track_metrics(pairs: Sequence[tuple]) -> Dict[str, float]:
    """Several sequences' scores combined (``pairs``: ``(gt, pred[, num_frames])`` each)."""
    return score_sequences(pairs)[1]
