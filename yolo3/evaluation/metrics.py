"""Detection metrics: COCO AP (IoU 0.5:0.95, AP50, AP75) and Pascal VOC AP at IoU 0.5.

Conventions: boxes are ``(x1, y1, x2, y2)`` in continuous pixel coordinates; IoU has no ``+1``
(as pycocotools' ``bbox`` mode), except in the VOC figures of VOC files (below).

- COCO figures follow pycocotools' ``COCOeval`` (bbox, area range all, maxDets 100): per image and
  class the top 100 detections by score are matched greedily, each to the unmatched ground-truth box
  of highest IoU >= threshold; precision is made monotone and sampled at 101 recall points. Classes
  with no ground truth are left out of the means (pycocotools' -1).
- VOC figures follow the devkit: detections of a class over all images by descending score; each
  takes the ground-truth box of highest IoU; a hit (IoU > 0.5) on a box already taken is a false
  positive. ``AP50_voc`` is the all-point (area under the monotone curve) AP, ``AP50_voc07`` the
  VOC2007 11-point AP.

Ignore regions (COCO's ``iscrowd: 1``, VOC's ``difficult``; :class:`TruthDetails`) count as each
protocol says: in the COCO figures a detection matched to a crowd region (IoU: the share of the
detection inside it; the region is never used up) is ignored; in the VOC figures a detection
whose best-overlap box is a difficult object, above 0.5, is ignored. Neither is a false positive,
and neither region is a box to find. With VOC files (``TruthDetails.voc_pixels``) the VOC figures
use the devkit's ``+1`` pixel convention; the COCO figures never do.

Top-level keys: ``mAP50``, ``mAP75``, ``mAP50_95`` (COCO; equal to ``COCOeval.stats[1], [2], [0]``),
``mAP_small``, ``mAP_medium``, ``mAP_large`` (COCO's AP@[.5:.95] by area: below 32x32, up to
96x96, above; ``stats[3], [4], [5]``; a box's area is its COCO ``area`` where the file gives one,
else its width x height), ``mAR1``, ``mAR10``, ``mAR100`` (``mAR<max_dets>``) and ``mAR_small``,
``mAR_medium``, ``mAR_large`` (COCO's average recall, ``stats[6]`` to ``[11]``; :func:`coco_summary`
lists the twelve in pycocotools' order), ``mAP50_voc``, ``mAP50_voc07`` (VOC), ``num_ignored``
(ignore regions) and ``per_class`` (each class's ``AP_small`` ... too). Means are None when no
class has ground truth (of that size).
"""
from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from typing import Any, Dict, Hashable, List, Mapping, Optional, Sequence, Tuple

import numpy as np

from yolo3.core.errors import FileFormatError, PathLike
from yolo3.core.fileio import read_json, write_text_atomic
from yolo3.ops.boxes import ioa_xyxy, iou_xyxy

# Exactly pycocotools' Params: np.linspace(.5, 0.95, 10) and np.linspace(.0, 1.00, 101).
IOU_THRESHOLDS = np.linspace(.5, 0.95, int(np.round((0.95 - .5) / .05)) + 1, endpoint=True)
RECALL_POINTS = np.linspace(.0, 1.00, int(np.round((1.00 - .0) / .01)) + 1, endpoint=True)
# pycocotools' areaRng (box area in pixels squared): small, medium, large
AREA_RANGES = {"small": (0.0, 32.0 ** 2), "medium": (32.0 ** 2, 96.0 ** 2),
               "large": (96.0 ** 2, 1e5 ** 2)}

GroundTruth = Mapping[Hashable, np.ndarray]                       # id -> (N, 5) x1, y1, x2, y2, cls
DetectionSet = Mapping[Hashable, Tuple[np.ndarray, np.ndarray, np.ndarray]]  # id -> boxes, scores, cls


@dataclass(frozen=True)
class TruthDetails:
    """What real annotation files add to the boxes that count (:class:`GroundTruth`).

    - ``ignored``: image id -> ``(M, 5)`` ignore regions ``x1, y1, x2, y2, class`` (COCO's
      ``iscrowd: 1``, VOC's ``difficult``). The COCO figures treat each as pycocotools treats a
      crowd region (matched by the detection's share inside it, any number of times); the VOC
      figures as the devkit treats a difficult object (a detection whose best-overlap box it is,
      above the IoU threshold, is neither a true nor a false positive).
    - ``areas``: image id -> ``(N,)`` COCO's ``area`` of each counted box, NaN where absent: the
      sizes (small, medium, large) use it, else width x height.
    - ``voc_pixels``: the boxes are VOC's inclusive pixel indices; the VOC figures then compute
      IoU with the devkit's ``+1`` (the COCO figures never do).
    """

    ignored: Mapping[Hashable, np.ndarray] = field(default_factory=dict)
    areas: Mapping[Hashable, np.ndarray] = field(default_factory=dict)
    voc_pixels: bool = False

    def regions(self, image_id: Hashable) -> np.ndarray:
        """The ``(M, 5)`` ignore regions of one image."""
        return np.asarray(self.ignored.get(image_id, np.zeros((0, 5))), np.float64).reshape(-1, 5)


def ground_truth(records: Sequence[Any], keys: Optional[Sequence[Hashable]] = None
                 ) -> Tuple[Dict[Hashable, np.ndarray], TruthDetails]:
    """The evaluation's ground truth of :class:`~yolo3.data.annotations.Record` s: ``(id -> (N, 5)
    float64 boxes, their details)``, keyed by ``keys`` (default: each record's path; records of
    one image are merged)."""
    gt: Dict[Hashable, np.ndarray] = {}
    ignored: Dict[Hashable, np.ndarray] = {}
    areas: Dict[Hashable, np.ndarray] = {}
    keys = [r.path for r in records] if keys is None else list(keys)
    for key, r in zip(keys, records):
        boxes = np.asarray(r.boxes, np.float64).reshape(-1, 5)
        area = (np.full(len(boxes), np.nan) if getattr(r, "areas", None) is None
                else np.asarray(r.areas, np.float64).reshape(-1))
        regions = np.asarray(getattr(r, "ignored", np.zeros((0, 5))), np.float64).reshape(-1, 5)
        gt[key] = np.concatenate([gt[key], boxes]) if key in gt else boxes
        areas[key] = np.concatenate([areas[key], area]) if key in areas else area
        ignored[key] = np.concatenate([ignored[key], regions]) if key in ignored else regions
    voc = bool(records) and all(getattr(r, "pixel_indices", False) for r in records)
    return gt, TruthDetails({k: v for k, v in ignored.items() if len(v)}, areas, voc)


def without_ignored(gt: GroundTruth, dets: DetectionSet, details: Optional[TruthDetails],
                    overlap: float = 0.5) -> DetectionSet:
    """``dets`` less the detections on ignore regions, for the analyses that match by their own
    rules (confidence curves, confusion matrix, error analysis): a detection at least
    ``overlap`` inside a region of its class (by its own area, as COCO's crowd rule) that
    overlaps no counted box of its class by IoU ``overlap`` is dropped. The mAP figures apply
    each protocol's exact rule instead (:func:`evaluate_detections`)."""
    if details is None or not details.ignored:
        return dets
    out = dict(dets)
    for image_id, (boxes, scores, classes) in dets.items():
        regions = details.regions(image_id)
        if not len(regions):
            continue
        boxes = np.asarray(boxes, np.float64).reshape(-1, 4)
        classes = np.asarray(classes).reshape(-1).astype(np.int64)
        g = np.asarray(gt.get(image_id, np.zeros((0, 5))), np.float64).reshape(-1, 5)
        inside = ioa_xyxy(boxes, regions[:, :4]) * (classes[:, None] == regions[None, :, 4])
        hits = iou_xyxy(boxes, g[:, :4]) * (classes[:, None] == g[None, :, 4])
        drop = (inside.max(axis=1, initial=0.0) >= overlap) & (hits.max(axis=1, initial=0.0) < overlap)
        if drop.any():
            keep = ~drop
            out[image_id] = (boxes[keep], np.asarray(scores).reshape(-1)[keep], classes[keep])
    return out


def ordered_ids(gt: GroundTruth, dets: DetectionSet) -> List[Hashable]:
    ids = list(gt.keys()) + [k for k in dets.keys() if k not in gt]
    try:
        return sorted(ids)
    except TypeError:
        return ids


@dataclass
class ClassTruth:
    """One class's ground truth, per image (lists in image order): the counted boxes ``(G, 4)``,
    their COCO areas ``(G,)`` and the ignore regions ``(R, 4)``."""

    boxes: List[np.ndarray]
    areas: List[np.ndarray]
    regions: List[np.ndarray]

    def __len__(self) -> int:
        return len(self.boxes)

    def __iter__(self):
        return iter(self.boxes)

    def __getitem__(self, i):
        return self.boxes[i]


def split_by_class(gt: GroundTruth, dets: DetectionSet, ids: Sequence[Hashable], num_classes: int,
                   details: Optional[TruthDetails] = None):
    """Per class, per image: the ground truth (:class:`ClassTruth`; iterating it gives the boxes
    ``(G, 4)``) and detections ``(boxes (D, 4), scores (D,))``."""
    details = details or TruthDetails()
    gts = [ClassTruth([], [], []) for _ in range(num_classes)]
    dts = [[] for _ in range(num_classes)]
    for image_id in ids:
        g = np.asarray(gt.get(image_id, np.zeros((0, 5))), dtype=np.float64).reshape(-1, 5)
        area = details.areas.get(image_id)
        area = np.full(len(g), np.nan) if area is None else np.asarray(area, np.float64).reshape(-1)
        if len(area) != len(g):
            raise ValueError(f"image {image_id!r}: {len(area)} areas for {len(g)} boxes")
        regions = details.regions(image_id)
        d = dets.get(image_id)
        if d is None:
            db, ds, dc = np.zeros((0, 4)), np.zeros((0,)), np.zeros((0,), np.int64)
        else:
            db = np.asarray(d[0], dtype=np.float64).reshape(-1, 4)
            ds = np.asarray(d[1], dtype=np.float64).reshape(-1)
            dc = np.asarray(d[2]).reshape(-1).astype(np.int64)
            if not len(db) == len(ds) == len(dc):
                raise ValueError(f"image {image_id!r}: {len(db)} boxes, {len(ds)} scores, "
                                 f"{len(dc)} classes")
        gc = g[:, 4].astype(np.int64)
        rc = regions[:, 4].astype(np.int64)
        for arr, what in ((gc, "ground-truth"), (dc, "detection"), (rc, "ignore region")):
            if arr.size and (arr.min() < 0 or arr.max() >= num_classes):
                raise ValueError(f"image {image_id!r}: {what} class id outside 0..{num_classes - 1}")
        for k in range(num_classes):
            gts[k].boxes.append(g[gc == k, :4])
            gts[k].areas.append(area[gc == k])
            gts[k].regions.append(regions[rc == k, :4])
            sel = dc == k
            dts[k].append((db[sel], ds[sel]))
    return gts, dts


def _class_truth(gts) -> ClassTruth:
    """``gts`` as a :class:`ClassTruth` (a plain list of ``(G, 4)`` arrays: no areas, no regions)."""
    if isinstance(gts, ClassTruth):
        return gts
    boxes = [np.asarray(g, np.float64).reshape(-1, 4) for g in gts]
    return ClassTruth(boxes, [np.full(len(g), np.nan) for g in boxes],
                      [np.zeros((0, 4)) for _ in boxes])


def _coco_match(ious: np.ndarray, thresholds: np.ndarray,
                gt_ignored: Optional[np.ndarray] = None,
                gt_crowd: Optional[np.ndarray] = None) -> Tuple[np.ndarray, np.ndarray]:
    """Greedy COCO matching of score-sorted detections: ``ious`` ``(D, G)`` -> ``(matched (T, D),
    matched to an ignored ground-truth box (T, D))`` bool. As pycocotools: each detection takes
    the free ground-truth box of highest IoU >= threshold (ties: the last), a box that counts
    before one that is ignored (outside the area range, or a crowd region); a crowd region
    (``gt_crowd``) is never taken, any number of detections may match it."""
    num_t = len(thresholds)
    num_d, num_g = ious.shape
    matched = np.zeros((num_t, num_d), dtype=bool)
    to_ignored = np.zeros((num_t, num_d), dtype=bool)
    if num_g == 0:
        return matched, to_ignored
    ignored = np.zeros(num_g, bool) if gt_ignored is None else np.asarray(gt_ignored, bool)
    crowd = np.zeros(num_g, bool) if gt_crowd is None else np.asarray(gt_crowd, bool)
    taken = np.zeros((num_t, num_g), dtype=bool)
    thr = np.minimum(thresholds, 1 - 1e-10)[:, None]
    rows = np.arange(num_t)
    for d in range(num_d):
        ok = (ious[d][None, :] >= thr) & ~taken                  # (T, G)
        picks = []
        for allowed in (ok & ~ignored, ok & ignored):
            masked = np.where(allowed, ious[d][None, :], -1.0)
            g = num_g - 1 - np.argmax(masked[:, ::-1], axis=1)    # ties: the last gt, as pycocotools
            picks.append((g, allowed[rows, g]))
        (g_kept, hit_kept), (g_ign, hit_ign) = picks
        g = np.where(hit_kept, g_kept, g_ign)
        hit = hit_kept | hit_ign
        matched[:, d] = hit
        to_ignored[:, d] = hit & ~hit_kept
        taken[rows[hit], g[hit]] = ~crowd[g[hit]]
    return matched, to_ignored


def _coco_precision(scores: np.ndarray, matched: np.ndarray, num_gt: int,
                    ignored: Optional[np.ndarray] = None) -> np.ndarray:
    """Interpolated precision ``(T, 101)`` from concatenated scores ``(D,)`` and matches ``(T, D)``;
    ``ignored`` ``(T, D)`` detections count neither way."""
    order = np.argsort(-scores, kind="mergesort")
    tp = matched[:, order]
    fp = ~tp
    if ignored is not None:
        tp, fp = tp & ~ignored[:, order], fp & ~ignored[:, order]
    tp_sum = np.cumsum(tp, axis=1, dtype=np.float64)
    fp_sum = np.cumsum(fp, axis=1, dtype=np.float64)
    num_t = matched.shape[0]
    out = np.zeros((num_t, len(RECALL_POINTS)))
    if tp.shape[1] == 0:
        return out
    rc = tp_sum / num_gt
    pr = tp_sum / (fp_sum + tp_sum + np.spacing(1))
    pr = np.maximum.accumulate(pr[:, ::-1], axis=1)[:, ::-1]
    for t in range(num_t):
        idx = np.searchsorted(rc[t], RECALL_POINTS, side="left")
        valid = idx < len(rc[t])
        out[t, valid] = pr[t, idx[valid]]
    return out


def _box_areas(boxes: np.ndarray) -> np.ndarray:
    return np.prod(np.clip(boxes[:, 2:] - boxes[:, :2], 0, None), axis=-1)


def _outside(areas: np.ndarray, area_range: Tuple[float, float]) -> np.ndarray:
    """``(N,)`` bool: ``areas`` outside ``[low, high]``."""
    return (areas < area_range[0]) | (areas > area_range[1])


@dataclass
class CocoClass:
    """One class's COCO evaluation: ``precision`` ``(T, 101)`` (at ``max_dets``) and
    ``recall`` ``{max detections per image: (T,)}``, as pycocotools' ``accumulate``."""

    precision: np.ndarray
    recall: Dict[int, np.ndarray]


def coco_class_eval(gts, dts: Sequence[Tuple[np.ndarray, np.ndarray]], max_dets: int = 100,
                    area_range: Optional[Tuple[float, float]] = None,
                    recall_at: Sequence[int] = ()) -> Optional[CocoClass]:
    """COCO's evaluation of one class (pycocotools' ``evaluateImg`` and ``accumulate``); ``gts``
    a :class:`ClassTruth` (or a list of ``(G, 4)`` boxes per image), ``dts`` per image. None
    without ground truth that counts (in the area range). Ground-truth boxes outside
    ``area_range`` (COCO's small, medium, large, by each box's COCO area, else width x height)
    and crowd regions are ignored, and so are detections matched to one, and detections outside
    the range that match nothing (by their width x height). ``recall_at``: the recall with the
    best ``k`` detections per image, for each ``k`` (and ``max_dets``)."""
    truth = _class_truth(gts)
    rng = area_range or (0.0, np.inf)
    num_gt = 0
    all_scores, all_matched, all_ignored = [], [], []
    for g, area, regions, (db, ds) in zip(truth.boxes, truth.areas, truth.regions, dts):
        area = np.where(np.isnan(area), _box_areas(g), area)
        out = _outside(area, rng)
        num_gt += int((~out).sum())
        if len(db) == 0:
            continue
        order = np.argsort(-ds, kind="mergesort")[:max_dets]
        db, ds = db[order], ds[order]
        # ground truth that counts first, as pycocotools sorts it (ties then go to the last)
        gt_order = np.argsort(out, kind="mergesort")
        ious = np.concatenate([iou_xyxy(db, g[gt_order]), ioa_xyxy(db, regions)], axis=1)
        ignored = np.concatenate([out[gt_order], np.ones(len(regions), bool)])
        crowd = np.concatenate([np.zeros(len(g), bool), np.ones(len(regions), bool)])
        matched, to_ignored = _coco_match(ious, IOU_THRESHOLDS, ignored, crowd)
        all_scores.append(ds)
        all_matched.append(matched)
        all_ignored.append(to_ignored | (~matched & _outside(_box_areas(db), rng)[None, :]))
    if num_gt == 0:
        return None
    num_t = len(IOU_THRESHOLDS)
    if not all_scores:
        return CocoClass(np.zeros((num_t, len(RECALL_POINTS))),
                         {k: np.zeros(num_t) for k in (*recall_at, max_dets)})
    recall = {}
    for k in (*recall_at, max_dets):
        hits = sum((m[:, :k] & ~i[:, :k]).sum(axis=1) for m, i in zip(all_matched, all_ignored))
        recall[k] = hits / num_gt
    precision = _coco_precision(np.concatenate(all_scores), np.concatenate(all_matched, axis=1),
                                num_gt, np.concatenate(all_ignored, axis=1))
    return CocoClass(precision, recall)


def coco_class_precision(gts, dts: Sequence[Tuple[np.ndarray, np.ndarray]],
                         max_dets: int = 100,
                         area_range: Optional[Tuple[float, float]] = None) -> Optional[np.ndarray]:
    """COCO precision ``(T, 101)`` of one class (:func:`coco_class_eval`); None without ground
    truth (in the area range)."""
    result = coco_class_eval(gts, dts, max_dets, area_range)
    return None if result is None else result.precision


def voc_class_matches(gts, dts: Sequence[Tuple[np.ndarray, np.ndarray]],
                      iou_threshold: float = 0.5, plus_one: bool = False
                      ) -> Tuple[np.ndarray, np.ndarray, int]:
    """VOC's greedy matching of one class over all images: ``(scores (D,) descending, true
    positive (D,) bool, ground-truth count)``. A detection is a true positive when its best-IoU
    box in its image overlaps more than ``iou_threshold`` and is not taken by a higher-scored
    detection. Where that box is an ignore region (a difficult object), the detection is left
    out (the devkit counts it neither way). ``gts``: a :class:`ClassTruth` or a list of ``(G, 4)``
    boxes per image; ``plus_one``: the devkit's IoU on inclusive pixel indices."""
    truth = _class_truth(gts)
    num_gt = sum(len(g) for g in truth.boxes)
    image_idx = np.concatenate([np.full(len(d[0]), i) for i, d in enumerate(dts)] + [np.zeros(0, int)])
    boxes = np.concatenate([d[0] for d in dts] + [np.zeros((0, 4))])
    scores = np.concatenate([d[1] for d in dts] + [np.zeros(0)])
    order = np.argsort(-scores, kind="mergesort")
    # Best-IoU box (counted, then ignore regions) of every detection, per image in one call.
    best_iou = np.zeros(len(scores))
    best_gt = np.zeros(len(scores), dtype=np.int64)
    for i, (g, regions) in enumerate(zip(truth.boxes, truth.regions)):
        sel = np.nonzero(image_idx == i)[0]
        if len(sel) and len(g) + len(regions):
            ious = iou_xyxy(boxes[sel], np.concatenate([g, regions]), plus_one)
            best_gt[sel] = np.argmax(ious, axis=1)
            best_iou[sel] = ious[np.arange(len(sel)), best_gt[sel]]
    taken = [np.zeros(len(g), dtype=bool) for g in truth.boxes]
    tp = np.zeros(len(scores), dtype=bool)
    kept = np.ones(len(scores), dtype=bool)
    for rank, d in enumerate(order):
        if best_iou[d] > iou_threshold:
            flags = taken[image_idx[d]]
            if best_gt[d] >= len(flags):  # a difficult object: neither way
                kept[rank] = False
            elif not flags[best_gt[d]]:
                flags[best_gt[d]] = True
                tp[rank] = True
    return scores[order][kept], tp[kept], num_gt


def voc_class_curve(gts, dts: Sequence[Tuple[np.ndarray, np.ndarray]],
                    iou_threshold: float = 0.5, plus_one: bool = False
                    ) -> Optional[Tuple[np.ndarray, np.ndarray]]:
    """VOC recall and precision ``(D,)`` of one class over all images; None without ground truth."""
    _, tp, num_gt = voc_class_matches(gts, dts, iou_threshold, plus_one)
    if num_gt == 0:
        return None
    tp_sum = np.cumsum(tp, dtype=np.float64)
    fp_sum = np.cumsum(~tp, dtype=np.float64)
    recall = tp_sum / num_gt
    precision = tp_sum / np.maximum(tp_sum + fp_sum, np.finfo(np.float64).eps)
    return recall, precision


def voc_ap(recall: np.ndarray, precision: np.ndarray, use_07_metric: bool = False) -> float:
    """Area under the monotone precision envelope (all-point), or the VOC2007 11-point average."""
    recall = np.asarray(recall, dtype=np.float64)
    precision = np.asarray(precision, dtype=np.float64)
    if use_07_metric:
        points = np.linspace(0.0, 1.0, 11)
        if len(recall) == 0:
            return 0.0
        # max precision at recall >= t: a suffix maximum read at the first index with recall >= t.
        suffix_max = np.maximum.accumulate(precision[::-1])[::-1]
        idx = np.searchsorted(recall, points, side="left")  # recall is non-decreasing
        vals = np.where(idx < len(recall), suffix_max[np.minimum(idx, len(recall) - 1)], 0.0)
        return float(np.mean(vals))
    mrec = np.concatenate([[0.0], recall, [1.0]])
    mpre = np.concatenate([[0.0], precision, [0.0]])
    mpre = np.maximum.accumulate(mpre[::-1])[::-1]
    steps = np.nonzero(mrec[1:] != mrec[:-1])[0]
    return float(np.sum((mrec[steps + 1] - mrec[steps]) * mpre[steps + 1]))


def _mean(values: Sequence[Optional[float]]) -> Optional[float]:
    kept = [v for v in values if v is not None]
    return float(np.mean(kept)) if kept else None


RECALL_MAX_DETS = (1, 10)  # COCO's AR@1 and AR@10 (AR at max_dets too)


def evaluate_detections(gt: GroundTruth, dets: DetectionSet, num_classes: int,
                        class_names: Optional[Sequence[str]] = None, max_dets: int = 100,
                        with_curves: bool = False, by_size: bool = True,
                        details: Optional[TruthDetails] = None) -> Dict[str, Any]:
    """COCO and VOC figures per class and overall.

    gt: image id -> ``(N, 5)`` ``(x1, y1, x2, y2, class)``; include images without boxes as ``(0, 5)``.
    dets: image id -> ``(boxes (M, 4) x1, y1, x2, y2, scores (M,), classes (M,))``; images missing
    from ``dets`` have no detections, detections on images missing from ``gt`` are all false positives.
    ``details``: the ignore regions, COCO areas and VOC pixel convention of real files
    (:class:`TruthDetails`, :func:`ground_truth`).
    Returns the dict described in the module docstring; ``with_curves=True`` adds ``pr_curves``: per
    class ``{"recall", "precision", "ap"}`` (VOC, IoU 0.5) or None. ``by_size=False`` leaves out
    the AP and AR by box size (each size matches every detection again: about 3.5x the time).
    """
    if class_names is None:
        class_names = [str(k) for k in range(num_classes)]
    if len(class_names) != num_classes:
        raise ValueError(f"{len(class_names)} class names for {num_classes} classes")
    details = details or TruthDetails()
    ids = ordered_ids(gt, dets)
    gts, dts = split_by_class(gt, dets, ids, num_classes, details)
    t50 = int(np.argmin(np.abs(IOU_THRESHOLDS - 0.5)))
    t75 = int(np.argmin(np.abs(IOU_THRESHOLDS - 0.75)))
    recall_at = tuple(k for k in RECALL_MAX_DETS if k < max_dets)
    per_class, curves = [], []
    recalls: Dict[str, List[Optional[float]]] = {}
    for k in range(num_classes):
        coco = coco_class_eval(gts[k], dts[k], max_dets, recall_at=recall_at)
        curve = voc_class_curve(gts[k], dts[k], 0.5, plus_one=details.voc_pixels)
        entry: Dict[str, Any] = {
            "class_id": k, "name": class_names[k],
            "num_gt": int(sum(len(g) for g in gts[k])),
            "num_ignored": int(sum(len(r) for r in gts[k].regions)),
            "num_det": int(sum(len(d[0]) for d in dts[k])),
            "AP50": None, "AP75": None, "AP50_95": None, "AP50_voc": None, "AP50_voc07": None,
        }
        for n in (*recall_at, max_dets):
            recalls.setdefault(f"mAR{n}", []).append(
                None if coco is None else float(coco.recall[n].mean()))
        if coco is not None:
            prec = coco.precision
            entry.update(AP50=float(prec[t50].mean()), AP75=float(prec[t75].mean()),
                         AP50_95=float(prec.mean()))
        for size, area_range in (AREA_RANGES.items() if by_size else ()):
            sized = coco_class_eval(gts[k], dts[k], max_dets, area_range)
            entry[f"AP_{size}"] = None if sized is None else float(sized.precision.mean())
            recalls.setdefault(f"mAR_{size}", []).append(
                None if sized is None else float(sized.recall[max_dets].mean()))
        if curve is not None:
            entry.update(AP50_voc=voc_ap(*curve), AP50_voc07=voc_ap(*curve, use_07_metric=True))
            curves.append({"recall": curve[0], "precision": curve[1], "ap": entry["AP50_voc"]})
        else:
            curves.append(None)
        per_class.append(entry)
    result: Dict[str, Any] = {
        "mAP50": _mean([c["AP50"] for c in per_class]),
        "mAP75": _mean([c["AP75"] for c in per_class]),
        "mAP50_95": _mean([c["AP50_95"] for c in per_class]),
        "mAP50_voc": _mean([c["AP50_voc"] for c in per_class]),
        "mAP50_voc07": _mean([c["AP50_voc07"] for c in per_class]),
        **{f"mAP_{size}": _mean([c[f"AP_{size}"] for c in per_class])
           for size in (AREA_RANGES if by_size else ())},
        **{key: _mean(values) for key, values in recalls.items()},
        "num_images": len(ids),
        "num_classes_with_gt": sum(c["num_gt"] > 0 for c in per_class),
        "num_ignored": sum(c["num_ignored"] for c in per_class),
        "voc_pixel_indices": details.voc_pixels,
        "per_class": per_class,
    }
    if with_curves:
        result["pr_curves"] = curves
    return result


def coco_summary(result: Mapping[str, Any], max_dets: int = 100) -> List[Optional[float]]:
    """The twelve figures of pycocotools' ``COCOeval.summarize`` (``stats``), in its order:
    AP@[.5:.95], AP50, AP75, AP small, medium, large, AR@1, AR@10, AR@max_dets, AR small,
    medium, large (None where no class has ground truth of that kind)."""
    keys = ["mAP50_95", "mAP50", "mAP75", "mAP_small", "mAP_medium", "mAP_large",
            "mAR1", "mAR10", f"mAR{max_dets}", "mAR_small", "mAR_medium", "mAR_large"]
    return [result.get(k) for k in keys]


def format_table(result: Mapping[str, Any]) -> str:
    """A plain-text table: one row per class, then the means."""
    cols = ["AP50", "AP75", "AP50_95", "AP50_voc", "AP50_voc07"]
    width = max([len("class")] + [len(str(c["name"])) for c in result["per_class"]] + [4])

    def fmt(v: Optional[float]) -> str:
        return f"{v:>10.4f}" if v is not None else f"{'-':>10}"

    lines = [f"{'class':<{width}} {'gt':>6} {'dets':>6} " + " ".join(f"{c:>10}" for c in cols)]
    for c in result["per_class"]:
        lines.append(f"{str(c['name']):<{width}} {c['num_gt']:>6} {c['num_det']:>6} "
                     + " ".join(fmt(c[k]) for k in cols))
    means = [result["mAP50"], result["mAP75"], result["mAP50_95"], result["mAP50_voc"],
             result["mAP50_voc07"]]
    lines.append(f"{'mean':<{width}} {'':>6} {'':>6} " + " ".join(fmt(v) for v in means))
    if any(f"mAP_{size}" in result for size in AREA_RANGES):
        sizes = ", ".join(f"{size} {'-' if result.get(f'mAP_{size}') is None else format(result[f'mAP_{size}'], '.4f')}"
                          for size in AREA_RANGES)
        lines.append(f"AP50_95 by box size (COCO areas): {sizes}")
    by_count = [f"{k[3:]} per image {result[k]:.4f}" for k in result
                if k.startswith("mAR") and k[3:].isdigit() and result[k] is not None]
    by_size = [f"{size} {result[f'mAR_{size}']:.4f}" for size in AREA_RANGES
               if result.get(f"mAR_{size}") is not None]
    if by_count or by_size:
        lines.append("AR50_95 (COCO): " + "; ".join(", ".join(part) for part in (by_count, by_size)
                                                   if part))
    if result.get("num_ignored"):
        lines.append(f"{result['num_ignored']} ignore regions (COCO crowd, VOC difficult): a "
                     "detection on one counts neither way")
    return "\n".join(lines)


# -- detection JSON (written by tools/detect.py) ---------------------------------------------------

def save_detection_json(path: PathLike, entries: Sequence[Mapping[str, Any]]) -> None:
    """Write ``[{"image", "boxes", "scores", "classes", "names"}, ...]`` (boxes x1, y1, x2, y2 pixels)."""
    write_text_atomic(path, json.dumps(list(entries), indent=1))


def detection_entry(image: str, boxes: np.ndarray, scores: np.ndarray, classes: np.ndarray,
                    class_names: Sequence[str]) -> Dict[str, Any]:
    """One detection-JSON object for ``image``."""
    classes = [int(c) for c in np.asarray(classes).reshape(-1)]
    return {
        "image": image,
        "boxes": [[round(float(v), 3) for v in b] for b in np.asarray(boxes).reshape(-1, 4)],
        "scores": [round(float(s), 6) for s in np.asarray(scores).reshape(-1)],
        "classes": classes,
        "names": [class_names[c] if 0 <= c < len(class_names) else str(c) for c in classes],
    }


def load_detection_json(path: PathLike, num_classes: Optional[int] = None
                        ) -> Dict[str, Tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """Read a detection JSON into ``image path -> (boxes (M, 4), scores (M,), classes (M,))``."""
    data = read_json(path, "detections")
    if not isinstance(data, list):
        raise FileFormatError(path, "expected a list with one object per image")
    out: Dict[str, Tuple[np.ndarray, np.ndarray, np.ndarray]] = {}
    for i, entry in enumerate(data):
        where = f"entry {i}"
        if not isinstance(entry, dict) or "image" not in entry:
            raise FileFormatError(path, "expected an object with 'image', 'boxes', 'scores', 'classes'",
                                  where=where)
        try:
            boxes = np.asarray(entry.get("boxes", []), dtype=np.float64).reshape(-1, 4)
            scores = np.asarray(entry.get("scores", []), dtype=np.float64).reshape(-1)
            classes = np.asarray(entry.get("classes", []), dtype=np.int64).reshape(-1)
        except (TypeError, ValueError) as e:
            raise FileFormatError(path, f"bad boxes/scores/classes: {e}", where=where)
        if not len(boxes) == len(scores) == len(classes):
            raise FileFormatError(path, f"{len(boxes)} boxes, {len(scores)} scores and {len(classes)} "
                                  "classes", where=where)
        if not (np.isfinite(boxes).all() and np.isfinite(scores).all()):
            raise FileFormatError(path, "boxes and scores must be finite numbers (found NaN or "
                                  "infinity)", where=where)
        if num_classes is not None and classes.size and (classes.min() < 0 or classes.max() >= num_classes):
            raise FileFormatError(path, f"class id outside 0..{num_classes - 1}", where=where)
        key = str(entry["image"])
        if key in out:  # the same image twice: merge
            b, s, c = out[key]
            boxes, scores, classes = (np.concatenate([b, boxes]), np.concatenate([s, scores]),
                                      np.concatenate([c, classes]))
        out[key] = (boxes, scores, classes)
    return out


def align_image_keys(gt_paths: Sequence[str], det_paths: Sequence[str]) -> Dict[str, str]:
    """Map detection image paths onto ground-truth paths: exact, then absolute path, then unique
    file name. Returns ``det path -> gt path`` for the paths that match."""
    gt_set = set(gt_paths)
    by_abs = {os.path.normcase(os.path.abspath(p)): p for p in gt_paths}
    names: Dict[str, List[str]] = {}
    for p in gt_paths:
        names.setdefault(os.path.basename(p), []).append(p)
    mapping: Dict[str, str] = {}
    for d in det_paths:
        if d in gt_set:
            mapping[d] = d
        elif os.path.normcase(os.path.abspath(d)) in by_abs:
            mapping[d] = by_abs[os.path.normcase(os.path.abspath(d))]
        elif len(names.get(os.path.basename(d), [])) == 1:
            mapping[d] = names[os.path.basename(d)][0]
    return mapping
