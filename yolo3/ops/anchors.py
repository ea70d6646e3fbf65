"""Anchor files and k-means anchors (class-list files: :mod:`yolo3.data.class_names`).

Anchors are ``(N, 2)`` float32 arrays of ``(width, height)`` in input-image pixels, sorted by area
(smallest first), as in Darknet cfgs and keras-yolo3's ``model_data/*_anchors.txt`` files: one or more
lines of comma-separated numbers read as ``w,h`` pairs (``10,13,  16,30,  33,23``).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import List, Optional

import numpy as np

from yolo3.config.specs import get_spec
from yolo3.core.errors import FileFormatError, PathLike
from yolo3.core.fileio import read_text, write_text_atomic
from yolo3.ops.boxes import wh_iou

# Darknet's COCO anchors for YOLOv3-416 and tiny YOLOv3 (identical to model_data/*.txt); the
# registry (yolo3.config.specs) owns them.
YOLO_ANCHORS = get_spec("yolov3").default_anchors()
TINY_YOLO_ANCHORS = get_spec("tiny").default_anchors()


def parse_anchors(text: str, path: Optional[PathLike] = None) -> np.ndarray:
    """Parse anchor-file text into a ``(N, 2)`` float32 array of ``(w, h)``."""
    values: List[float] = []
    for line_no, raw in enumerate(text.splitlines(), start=1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        for field in line.replace(",", " ").split():
            try:
                value = float(field)
            except ValueError:
                raise FileFormatError(path, f"anchor value {field!r} is not a number", line=line_no)
            if not np.isfinite(value) or value <= 0:
                raise FileFormatError(path, f"anchor value {field!r} must be a positive number",
                                      line=line_no)
            values.append(value)
        if len(values) % 2:
            raise FileFormatError(path, "odd number of anchor values: anchors are width,height pairs",
                                  line=line_no)
    if not values:
        raise FileFormatError(path, "no anchors found (expected comma-separated width,height pairs)")
    return np.asarray(values, dtype=np.float32).reshape(-1, 2)


def read_anchors(path: PathLike) -> np.ndarray:
    """Read an anchors file into a ``(N, 2)`` float32 array of ``(width, height)`` pixels."""
    return parse_anchors(read_text(path, "anchors"), path)


def format_anchors(anchors: np.ndarray) -> str:
    """Anchors as one line ``w,h,  w,h, ...`` (integers when the values are whole)."""
    anchors = np.asarray(anchors, dtype=np.float64).reshape(-1, 2)

    def fmt(v: float) -> str:
        return str(int(round(v))) if abs(v - round(v)) < 1e-9 else f"{v:.2f}"

    return ",  ".join(f"{fmt(w)},{fmt(h)}" for w, h in anchors) + "\n"


def write_anchors(path: PathLike, anchors: np.ndarray) -> None:
    """Write anchors in the keras-yolo3 one-line format (atomically)."""
    write_text_atomic(path, format_anchors(anchors))


def default_anchors(variant: str) -> np.ndarray:
    """Darknet's default COCO anchors for ``variant`` (see :mod:`yolo3.config.specs`)."""
    return get_spec(variant).default_anchors()


# --------------------------------------------------------------------------------------- k-means


def average_best_iou(box_wh: np.ndarray, anchors: np.ndarray) -> float:
    """Mean over boxes ``(N, 2)`` of the best centred IoU with any of the ``(K, 2)`` anchors."""
    box_wh = np.asarray(box_wh, dtype=np.float64).reshape(-1, 2)
    if len(box_wh) == 0:
        raise ValueError("average_best_iou needs at least one box")
    return float(wh_iou(box_wh, anchors).max(axis=1).mean())


# Ultralytics' AutoAnchor: a box is within reach of an anchor when neither side differs by more
# than ANCHOR_RATIO_LIMIT times, and anchors fit the data when that holds for BPR_THRESHOLD of boxes.
ANCHOR_RATIO_LIMIT = 4.0
BPR_THRESHOLD = 0.98


@dataclass(frozen=True)
class AnchorFit:
    """How anchors fit box sizes: the best possible recall (the share of boxes with an anchor whose
    sides are within ``ANCHOR_RATIO_LIMIT`` times theirs) and the mean best centred IoU."""

    best_possible_recall: float
    mean_best_iou: float
    boxes: int

    @property
    def fits(self) -> bool:
        return self.best_possible_recall >= BPR_THRESHOLD

    def __str__(self) -> str:
        return (f"best possible recall {self.best_possible_recall:.3f}, mean best IoU "
                f"{self.mean_best_iou:.3f} over {self.boxes} boxes")


def anchor_fit(box_wh: np.ndarray, anchors: np.ndarray) -> AnchorFit:
    """:class:`AnchorFit` of ``anchors`` ``(K, 2)`` to box sizes ``box_wh`` ``(N, 2)`` (both
    ``(w, h)`` in the same pixels, e.g. letterboxed into the input); boxes without area ignored."""
    box_wh = np.asarray(box_wh, np.float64).reshape(-1, 2)
    box_wh = box_wh[np.all(box_wh > 0, axis=1)]
    if len(box_wh) == 0:
        raise ValueError("anchor_fit needs at least one box with positive size")
    ratio = box_wh[:, None, :] / np.asarray(anchors, np.float64)[None, :, :]  # (N, K, 2)
    worst_side = np.minimum(ratio, 1.0 / ratio).min(axis=2)  # 1: same size, 0.25: 4 times off
    recall = float((worst_side.max(axis=1) > 1.0 / ANCHOR_RATIO_LIMIT).mean())
    return AnchorFit(recall, average_best_iou(box_wh, anchors), len(box_wh))


def _kmeans_once(box_wh: np.ndarray, k: int, rng: np.random.Generator, max_iter: int):
    """One k-means run with distance ``1 - IoU`` and k-means++ initialisation -> (centres, avg IoU)."""
    n = len(box_wh)
    centres = [box_wh[rng.integers(n)]]
    dist = 1.0 - wh_iou(box_wh, np.asarray(centres))[:, 0]
    for _ in range(1, k):
        weights = dist ** 2
        total = weights.sum()
        idx = rng.integers(n) if total <= 0 else rng.choice(n, p=weights / total)
        centres.append(box_wh[idx])
        dist = np.minimum(dist, 1.0 - wh_iou(box_wh, box_wh[idx:idx + 1])[:, 0])
    centres = np.asarray(centres, dtype=np.float64)
    assign = None
    for _ in range(max_iter):
        new_assign = np.argmax(wh_iou(box_wh, centres), axis=1)
        if assign is not None and np.array_equal(new_assign, assign):
            break
        assign = new_assign
        for j in range(k):
            members = box_wh[assign == j]
            if len(members):
                centres[j] = members.mean(axis=0)
            else:  # an empty cluster restarts at the box farthest from its centre
                far = np.argmin(wh_iou(box_wh, centres).max(axis=1))
                centres[j] = box_wh[far]
    return centres, float(wh_iou(box_wh, centres).max(axis=1).mean())


def kmeans_anchors(box_wh: np.ndarray, k: int, *, restarts: int = 5, seed: int = 0,
                   max_iter: int = 300, progress: bool = False):
    """Cluster box sizes ``(N, 2)`` ``(w, h)`` into ``k`` anchors with distance ``1 - IoU``.

    k-means++ initialisation from ``np.random.default_rng(seed)``, ``restarts`` runs, the best (highest
    average best IoU) kept. Returns ``(anchors (k, 2) float32 sorted by area, avg_iou)``.
    """
    box_wh = np.asarray(box_wh, dtype=np.float64).reshape(-1, 2)
    box_wh = box_wh[np.all(box_wh > 0, axis=1)]
    if len(box_wh) < k:
        raise ValueError(f"k-means needs at least k={k} boxes with positive size, got {len(box_wh)}")
    rng = np.random.default_rng(seed)
    runs = range(max(1, restarts))
    if progress:
        from tqdm import tqdm
        runs = tqdm(runs, desc=f"k-means (k={k}, {len(box_wh)} boxes)", unit="run")
    best, best_iou = None, -1.0
    for _ in runs:
        centres, iou = _kmeans_once(box_wh, k, rng, max_iter)
        if iou > best_iou:
            best, best_iou = centres, iou
    order = np.argsort(best[:, 0] * best[:, 1], kind="stable")
    return best[order].astype(np.float32), best_iou
