"""The figures people read to choose a score threshold and to see which classes are confused.

- :func:`confusion_matrix`: ``(C + 1, C + 1)`` counts, rows the predicted class, columns the true
  class, the last row and column the background (a missed object: predicted background; a false
  detection: true background). Detections above ``score`` are matched one to one with the ground
  truth of their image by IoU above ``iou``, whatever their classes, largest IoU first (as
  Ultralytics' ``ConfusionMatrix``).
- :func:`confidence_curves`: per class and overall (the mean over classes with ground truth),
  precision, recall and F1 of the detections scored at least ``c``, for ``c`` on a grid over 0..1,
  with VOC's matching at IoU 0.5 (:func:`yolo3.evaluation.metrics.voc_class_matches`); and the
  threshold of best overall F1.

Inputs are :mod:`yolo3.evaluation.metrics`'s: ground truth ``id -> (N, 5)`` ``x1, y1, x2, y2,
class`` and detections ``id -> (boxes (M, 4) x1, y1, x2, y2, scores (M,), classes (M,))``. No
TensorFlow here.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Sequence

import numpy as np

from yolo3.evaluation.metrics import (
    DetectionSet,
    GroundTruth,
    ordered_ids,
    split_by_class,
    voc_class_matches,
)
from yolo3.ops.boxes import iou_xyxy

__all__ = ["confusion_matrix", "confidence_curves", "ConfidenceCurves", "Diagnostics", "diagnose",
           "CONFIDENCE_GRID", "CONFUSION_IOU"]

CONFIDENCE_GRID = np.linspace(0.0, 1.0, 1001)
CONFUSION_IOU = 0.45  # a detection and an object match above this IoU (Ultralytics' value)


def confusion_matrix(gt: GroundTruth, dets: DetectionSet, num_classes: int, score: float = 0.25,
                     iou: float = CONFUSION_IOU) -> np.ndarray:
    """``(num_classes + 1, num_classes + 1)`` int64 counts ``[predicted, true]`` (see the module)."""
    matrix = np.zeros((num_classes + 1, num_classes + 1), np.int64)
    background = num_classes
    for image_id in ordered_ids(gt, dets):
        g = np.asarray(gt.get(image_id, np.zeros((0, 5))), np.float64).reshape(-1, 5)
        boxes, scores, classes = dets.get(image_id, (np.zeros((0, 4)), np.zeros(0), np.zeros(0)))
        keep = np.asarray(scores, np.float64).reshape(-1) > score
        d = np.asarray(boxes, np.float64).reshape(-1, 4)[keep]
        dc = np.asarray(classes).reshape(-1).astype(np.int64)[keep]
        gc = g[:, 4].astype(np.int64)
        matched_g, matched_d = _match_by_iou(g[:, :4], d, iou)
        for gi, di in zip(matched_g, matched_d):
            matrix[dc[di], gc[gi]] += 1
        for gi in sorted(set(range(len(g))) - set(matched_g)):
            matrix[background, gc[gi]] += 1
        for di in sorted(set(range(len(d))) - set(matched_d)):
            matrix[dc[di], background] += 1
    return matrix


def _match_by_iou(g: np.ndarray, d: np.ndarray, threshold: float):
    """One-to-one pairs ``(gt indices, detection indices)`` with IoU above ``threshold``, the
    largest IoU first."""
    if not len(g) or not len(d):
        return [], []
    ious = iou_xyxy(g, d)
    gi, di = np.nonzero(ious > threshold)
    order = np.argsort(-ious[gi, di], kind="stable")
    used_g, used_d, pairs_g, pairs_d = set(), set(), [], []
    for k in order:
        if gi[k] in used_g or di[k] in used_d:
            continue
        used_g.add(gi[k])
        used_d.add(di[k])
        pairs_g.append(int(gi[k]))
        pairs_d.append(int(di[k]))
    return pairs_g, pairs_d


@dataclass
class ConfidenceCurves:
    """Precision, recall and F1 ``(K, G)`` per class against ``confidence`` ``(G,)``, their means
    ``(G,)`` over the classes with ground truth (``classes``), and the best mean F1."""

    confidence: np.ndarray
    classes: List[int]
    precision: np.ndarray
    recall: np.ndarray
    f1: np.ndarray

    @property
    def mean_precision(self) -> np.ndarray:
        return self.precision[self.classes].mean(axis=0)

    @property
    def mean_recall(self) -> np.ndarray:
        return self.recall[self.classes].mean(axis=0)

    @property
    def mean_f1(self) -> np.ndarray:
        return self.f1[self.classes].mean(axis=0)

    def best(self) -> Dict[str, float]:
        """The confidence of best mean F1 (the lowest such one), with its precision and recall."""
        k = int(np.argmax(self.mean_f1))
        return {"confidence": float(self.confidence[k]), "f1": float(self.mean_f1[k]),
                "precision": float(self.mean_precision[k]), "recall": float(self.mean_recall[k])}

    def as_dict(self, names: Sequence[str], step: int = 10) -> Dict[str, Any]:
        """JSON-ready figures, every ``step``-th grid point (0.01 apart by default)."""
        sel = slice(None, None, step)
        rounded = lambda a: [round(float(v), 5) for v in a]  # noqa: E731
        return {"confidence": rounded(self.confidence[sel]), "best": self.best(),
                "mean": {"precision": rounded(self.mean_precision[sel]),
                         "recall": rounded(self.mean_recall[sel]), "f1": rounded(self.mean_f1[sel])},
                "per_class": {names[k]: {"precision": rounded(self.precision[k][sel]),
                                         "recall": rounded(self.recall[k][sel]),
                                         "f1": rounded(self.f1[k][sel])} for k in self.classes}}


def confidence_curves(gt: GroundTruth, dets: DetectionSet, num_classes: int,
                      iou: float = 0.5, grid: Optional[np.ndarray] = None) -> ConfidenceCurves:
    """:class:`ConfidenceCurves` of the detections (see the module). At a confidence above every
    detection of a class its precision is 1 (nothing claimed, nothing wrong) and its recall 0."""
    grid = CONFIDENCE_GRID if grid is None else np.asarray(grid, np.float64)
    gts, dts = split_by_class(gt, dets, ordered_ids(gt, dets), num_classes)
    precision = np.ones((num_classes, len(grid)))
    recall = np.zeros((num_classes, len(grid)))
    with_gt = []
    for k in range(num_classes):
        scores, tp, num_gt = voc_class_matches(gts[k], dts[k], iou)
        if num_gt:
            with_gt.append(k)
        # detections scored >= c: the first n of the descending scores
        n = len(scores) - np.searchsorted(scores[::-1], grid, side="left")
        tp_sum = np.concatenate([[0.0], np.cumsum(tp, dtype=np.float64)])[n]
        precision[k] = np.where(n > 0, tp_sum / np.maximum(n, 1), 1.0)
        recall[k] = tp_sum / num_gt if num_gt else 0.0
    f1 = 2 * precision * recall / np.maximum(precision + recall, np.finfo(np.float64).eps)
    return ConfidenceCurves(grid, with_gt, precision, recall, f1)


@dataclass
class Diagnostics:
    """The curves against confidence, and the confusion matrix at ``score``."""

    curves: ConfidenceCurves
    matrix: np.ndarray
    score: float

    def as_dict(self, names: Sequence[str]) -> Dict[str, Any]:
        """JSON-ready: ``confidence_curves`` and ``confusion_matrix`` (with its labels)."""
        return {"confidence_curves": self.curves.as_dict(names),
                "confusion_matrix": {"score": self.score, "iou": CONFUSION_IOU,
                                     "rows": "predicted", "columns": "true",
                                     "labels": list(names) + ["background"],
                                     "counts": self.matrix.tolist()}}


def diagnose(gt: GroundTruth, dets: DetectionSet, num_classes: int,
             score: Optional[float] = None) -> Diagnostics:
    """:func:`confidence_curves`, and the :func:`confusion_matrix` at ``score`` (default: the
    confidence of best F1, the threshold a user would pick)."""
    curves = confidence_curves(gt, dets, num_classes)
    score = curves.best()["confidence"] if score is None else float(score)
    return Diagnostics(curves, confusion_matrix(gt, dets, num_classes, score=score), score)
