"""Detection metrics: COCO AP (IoU 0.5:0.95, AP50, AP75) and Pascal VOC AP at IoU 0.5.

Conventions: boxes are ``(x1, y1, x2, y2)`` in continuous pixel coordinates; IoU has no ``+1``
(as pycocotools' ``bbox`` mode; the VOC devkit's ``+1`` is not used for either metric).

- COCO figures follow pycocotools' ``COCOeval`` (bbox, area range all, maxDets 100): per image and
  class the top 100 detections by score are matched greedily, each to the unmatched ground-truth box
  of highest IoU >= threshold; precision is made monotone and sampled at 101 recall points. Classes
  with no ground truth are left out of the means (pycocotools' -1).
- VOC figures follow the devkit: detections of a class over all images by descending score; each
  takes the ground-truth box of highest IoU; a hit (IoU > 0.5) on a box already taken is a false
  positive. ``AP50_voc`` is the all-point (area under the monotone curve) AP, ``AP50_voc07`` the
  VOC2007 11-point AP.

Top-level keys: ``mAP50``, ``mAP75``, ``mAP50_95`` (COCO; equal to ``COCOeval.stats[1], [2], [0]``),
``mAP_small``, ``mAP_medium``, ``mAP_large`` (COCO's AP@[.5:.95] by box area: below 32x32, up to
96x96, above; ``stats[3], [4], [5]``; a box's area is its width x height),
``mAP50_voc``, ``mAP50_voc07`` (VOC) and ``per_class`` (each class's ``AP_small`` ... too). Means
are None when no class has ground truth (of that size).
"""
from __future__ import annotations

import json
import os
from typing import Any, Dict, Hashable, List, Mapping, Optional, Sequence, Tuple

import numpy as np

from yolo3.core.errors import FileFormatError, PathLike
from yolo3.core.fileio import write_text_atomic
from yolo3.ops.boxes import iou_xyxy

# Exactly pycocotools' Params: np.linspace(.5, 0.95, 10) and np.linspace(.0, 1.00, 101).
IOU_THRESHOLDS = np.linspace(.5, 0.95, int(np.round((0.95 - .5) / .05)) + 1, endpoint=True)
RECALL_POINTS = np.linspace(.0, 1.00, int(np.round((1.00 - .0) / .01)) + 1, endpoint=True)
# pycocotools' areaRng (box area in pixels squared): small, medium, large
AREA_RANGES = {"small": (0.0, 32.0 ** 2), "medium": (32.0 ** 2, 96.0 ** 2),
               "large": (96.0 ** 2, 1e5 ** 2)}

GroundTruth = Mapping[Hashable, np.ndarray]                       # id -> (N, 5) x1, y1, x2, y2, cls
DetectionSet = Mapping[Hashable, Tuple[np.ndarray, np.ndarray, np.ndarray]]  # id -> boxes, scores, cls


def ordered_ids(gt: GroundTruth, dets: DetectionSet) -> List[Hashable]:
    ids = list(gt.keys()) + [k for k in dets.keys() if k not in gt]
    try:
        return sorted(ids)
    except TypeError:
        return ids


def split_by_class(gt: GroundTruth, dets: DetectionSet, ids: Sequence[Hashable], num_classes: int):
    """Per class, per image: gt boxes ``(G, 4)`` and detections ``(boxes (D, 4), scores (D,))``."""
    gts = [[] for _ in range(num_classes)]
    dts = [[] for _ in range(num_classes)]
    for image_id in ids:
        g = np.asarray(gt.get(image_id, np.zeros((0, 5))), dtype=np.float64).reshape(-1, 5)
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
        for arr, what in ((gc, "ground-truth"), (dc, "detection")):
            if arr.size and (arr.min() < 0 or arr.max() >= num_classes):
                raise ValueError(f"image {image_id!r}: {what} class id outside 0..{num_classes - 1}")
        for k in range(num_classes):
            gts[k].append(g[gc == k, :4])
            sel = dc == k
            dts[k].append((db[sel], ds[sel]))
    return gts, dts


def _coco_match(ious: np.ndarray, thresholds: np.ndarray,
                gt_ignored: Optional[np.ndarray] = None) -> Tuple[np.ndarray, np.ndarray]:
    """Greedy COCO matching of score-sorted detections: ``ious`` ``(D, G)`` -> ``(matched (T, D),
    matched to an ignored ground-truth box (T, D))`` bool. As pycocotools: each detection takes
    the free ground-truth box of highest IoU >= threshold (ties: the last), a box that counts
    before one that is ignored (outside the area range)."""
    num_t = len(thresholds)
    num_d, num_g = ious.shape
    matched = np.zeros((num_t, num_d), dtype=bool)
    to_ignored = np.zeros((num_t, num_d), dtype=bool)
    if num_g == 0:
        return matched, to_ignored
    ignored = np.zeros(num_g, bool) if gt_ignored is None else np.asarray(gt_ignored, bool)
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
        taken[rows[hit], g[hit]] = True
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


def _outside(boxes: np.ndarray, area_range: Tuple[float, float]) -> np.ndarray:
    """``(N,)`` bool: box areas (width x height) outside ``[low, high]``."""
    area = np.prod(np.clip(boxes[:, 2:] - boxes[:, :2], 0, None), axis=-1)
    return (area < area_range[0]) | (area > area_range[1])


def coco_class_precision(gts: Sequence[np.ndarray], dts: Sequence[Tuple[np.ndarray, np.ndarray]],
                         max_dets: int = 100,
                         area_range: Optional[Tuple[float, float]] = None) -> Optional[np.ndarray]:
    """COCO precision ``(T, 101)`` of one class; ``gts``/``dts`` per image. None without ground
    truth (in the area range). With ``area_range`` (COCO's small, medium, large: box area in
    pixels squared), ground-truth boxes outside it are ignored, and so are detections outside it
    that match nothing, as pycocotools does."""
    rng = area_range or (0.0, np.inf)
    ignored_gts = [_outside(g, rng) for g in gts]
    num_gt = sum(int((~ig).sum()) for ig in ignored_gts)
    if num_gt == 0:
        return None
    all_scores, all_matched, all_ignored = [], [], []
    for g, ig, (db, ds) in zip(gts, ignored_gts, dts):
        if len(db) == 0:
            continue
        order = np.argsort(-ds, kind="mergesort")[:max_dets]
        db, ds = db[order], ds[order]
        # ground truth that counts first, as pycocotools sorts it (ties then go to the last)
        gt_order = np.argsort(ig, kind="mergesort")
        matched, to_ignored = _coco_match(iou_xyxy(db, g[gt_order]), IOU_THRESHOLDS, ig[gt_order])
        all_scores.append(ds)
        all_matched.append(matched)
        all_ignored.append(to_ignored | (~matched & _outside(db, rng)[None, :]))
    if not all_scores:
        return np.zeros((len(IOU_THRESHOLDS), len(RECALL_POINTS)))
    return _coco_precision(np.concatenate(all_scores), np.concatenate(all_matched, axis=1), num_gt,
                           np.concatenate(all_ignored, axis=1))


def voc_class_matches(gts: Sequence[np.ndarray], dts: Sequence[Tuple[np.ndarray, np.ndarray]],
                      iou_threshold: float = 0.5) -> Tuple[np.ndarray, np.ndarray, int]:
    """VOC's greedy matching of one class over all images: ``(scores (D,) descending, true
    positive (D,) bool, ground-truth count)``. A detection is a true positive when its best-IoU
    ground truth in its image overlaps more than ``iou_threshold`` and is not taken by a
    higher-scored detection."""
    num_gt = sum(len(g) for g in gts)
    image_idx = np.concatenate([np.full(len(d[0]), i) for i, d in enumerate(dts)] + [np.zeros(0, int)])
    boxes = np.concatenate([d[0] for d in dts] + [np.zeros((0, 4))])
    scores = np.concatenate([d[1] for d in dts] + [np.zeros(0)])
    order = np.argsort(-scores, kind="mergesort")
    # Best-IoU ground truth of every detection, computed per image in one call.
    best_iou = np.zeros(len(scores))
    best_gt = np.zeros(len(scores), dtype=np.int64)
    for i, g in enumerate(gts):
        sel = np.nonzero(image_idx == i)[0]
        if len(sel) and len(g):
            ious = iou_xyxy(boxes[sel], g)
            best_gt[sel] = np.argmax(ious, axis=1)
            best_iou[sel] = ious[np.arange(len(sel)), best_gt[sel]]
    taken = [np.zeros(len(g), dtype=bool) for g in gts]
    tp = np.zeros(len(scores), dtype=bool)
    for rank, d in enumerate(order):
        if best_iou[d] > iou_threshold:
            flags = taken[image_idx[d]]
            if not flags[best_gt[d]]:
                flags[best_gt[d]] = True
                tp[rank] = True
    return scores[order], tp, num_gt


def voc_class_curve(gts: Sequence[np.ndarray], dts: Sequence[Tuple[np.ndarray, np.ndarray]],
                    iou_threshold: float = 0.5) -> Optional[Tuple[np.ndarray, np.ndarray]]:
    """VOC recall and precision ``(D,)`` of one class over all images; None without ground truth."""
    _, tp, num_gt = voc_class_matches(gts, dts, iou_threshold)
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


def evaluate_detections(gt: GroundTruth, dets: DetectionSet, num_classes: int,
                        class_names: Optional[Sequence[str]] = None, max_dets: int = 100,
                        with_curves: bool = False, by_size: bool = True) -> Dict[str, Any]:
    """COCO and VOC figures per class and overall.

    gt: image id -> ``(N, 5)`` ``(x1, y1, x2, y2, class)``; include images without boxes as ``(0, 5)``.
    dets: image id -> ``(boxes (M, 4) x1, y1, x2, y2, scores (M,), classes (M,))``; images missing
    from ``dets`` have no detections, detections on images missing from ``gt`` are all false positives.
    Returns the dict described in the module docstring; ``with_curves=True`` adds ``pr_curves``: per
    class ``{"recall", "precision", "ap"}`` (VOC, IoU 0.5) or None. ``by_size=False`` leaves out
    the AP by box size (each size matches every detection again: about 3.5x the time).
    """
    if class_names is None:
        class_names = [str(k) for k in range(num_classes)]
    if len(class_names) != num_classes:
        raise ValueError(f"{len(class_names)} class names for {num_classes} classes")
    ids = ordered_ids(gt, dets)
    gts, dts = split_by_class(gt, dets, ids, num_classes)
    t50 = int(np.argmin(np.abs(IOU_THRESHOLDS - 0.5)))
    t75 = int(np.argmin(np.abs(IOU_THRESHOLDS - 0.75)))
    per_class, curves = [], []
    for k in range(num_classes):
        prec = coco_class_precision(gts[k], dts[k], max_dets)
        curve = voc_class_curve(gts[k], dts[k], 0.5)
        entry: Dict[str, Any] = {
            "class_id": k, "name": class_names[k],
            "num_gt": int(sum(len(g) for g in gts[k])),
            "num_det": int(sum(len(d[0]) for d in dts[k])),
            "AP50": None, "AP75": None, "AP50_95": None, "AP50_voc": None, "AP50_voc07": None,
        }
        if prec is not None:
            entry.update(AP50=float(prec[t50].mean()), AP75=float(prec[t75].mean()),
                         AP50_95=float(prec.mean()))
        for size, area_range in (AREA_RANGES.items() if by_size else ()):
            sized = coco_class_precision(gts[k], dts[k], max_dets, area_range)
            entry[f"AP_{size}"] = None if sized is None else float(sized.mean())
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
        "num_images": len(ids),
        "num_classes_with_gt": sum(c["num_gt"] > 0 for c in per_class),
        "per_class": per_class,
    }
    if with_curves:
        result["pr_curves"] = curves
    return result


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
    try:
        with open(path, encoding="utf-8-sig") as f:
            data = json.load(f)
    except OSError as e:
        raise FileFormatError(path, f"cannot read detections: {e.strerror or e}")
    except ValueError as e:
        raise FileFormatError(path, f"not valid JSON: {e}")
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
