"""What the missing AP is made of: the TIDE error breakdown, errors per class, the worst images.

TIDE (Bolya et al., "TIDE: A General Toolbox for Identifying Object Detection Errors", ECCV 2020)
matches each image's detections (the ``max_dets`` best, all classes together, by descending
score) to the unmatched ground-truth box of their class with the highest IoU >= ``pos`` (0.5),
and gives every false positive one cause, tested in this order:

- ``localisation`` (Loc): IoU with a box of its class in ``[bg, pos]`` (``bg`` = 0.1);
- ``classification`` (Cls): IoU >= ``pos`` with a box of another class;
- ``duplicate`` (Dupe): IoU >= ``pos`` with a box of its class already taken by a higher score;
- ``background`` (Bkg): IoU <= ``bg`` with every box;
- ``both`` (Both): anything else (the wrong class and a poor box);

and every unmatched box that no Loc or Cls error points at is ``missed`` (Miss). Each type's
``delta_ap`` is the AP@0.5 gained by fixing errors of that type alone: a Loc or Cls error becomes
a true positive (the highest-scored such error per box; the others are dropped), Dupe, Bkg and
Both errors are dropped, a Miss leaves the ground truth. The fixes overlap, so the deltas do
not add up to the AP that is missing. ``special``: ``false_positives`` (every false positive
scored 0) and ``false_negatives`` (every box no true positive took, out of the ground truth).

AP is TIDE's: per class, the monotone precision sampled at 101 recall points; the mean is over
the classes with ground truth (TIDE also averages in a class that has detections and no ground
truth, at AP 0; this module leaves it out, as COCO does). Figures are fractions (TIDE prints them
times 100). Checked against the reference package ``tidecv`` in ``tests/evaluation``.

Inputs are :mod:`yolo3.evaluation.metrics`'s: ground truth ``id -> (N, 5)`` ``x1, y1, x2, y2,
class`` and detections ``id -> (boxes (M, 4) x1, y1, x2, y2, scores (M,), classes (M,))``.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, Hashable, List, Optional, Sequence, Tuple

import numpy as np

from yolo3.evaluation.metrics import AREA_RANGES, DetectionSet, GroundTruth
from yolo3.ops.boxes import iou_xyxy

__all__ = ["ERROR_TYPES", "SHORT_NAMES", "ErrorBreakdown", "error_breakdown", "ImageErrors",
           "image_errors", "ClassErrors", "class_errors", "worst_images", "format_breakdown",
           "ErrorReport", "analyse_errors", "caption"]

ERROR_TYPES = ("classification", "localisation", "both", "duplicate", "background", "missed")
SHORT_NAMES = {"classification": "Cls", "localisation": "Loc", "both": "Both",
               "duplicate": "Dupe", "background": "Bkg", "missed": "Miss"}
FALSE_POSITIVE_TYPES = ERROR_TYPES[:-1]
POS_IOU = 0.5   # a true positive, and a Cls or Dupe error, from this IoU up
BG_IOU = 0.1    # background at or below this IoU with every box
_RECALLS = np.arange(101) / 100  # TIDE's bars (np.linspace differs in the last bit at some)
_TP, _FP = 1, 0


@dataclass
class _Image:
    """One image's matching: detections in score order, what each is, what each box became."""

    order: np.ndarray                 # (D,) indices into the image's detections, best first
    classes: np.ndarray               # (D,) detection classes, in that order
    scores: np.ndarray                # (D,)
    matched: np.ndarray               # (D,) ground-truth index of a true positive, else -1
    cause: List[Optional[str]]        # (D,) None for a true positive, else a FALSE_POSITIVE_TYPES
    target: np.ndarray                # (D,) the box a Loc / Cls error points at (-1: none)
    gt_used: np.ndarray               # (G,) matched by a true positive
    gt_missed: np.ndarray             # (G,) TIDE's Miss: unmatched, no Loc / Cls error points at it


def _match_image(g: np.ndarray, boxes: np.ndarray, scores: np.ndarray, classes: np.ndarray,
                 pos: float, bg: float, max_dets: int) -> _Image:
    """TIDE's matching and causes for one image (``g``: ``(G, 5)``; detections unordered)."""
    order = np.argsort(-scores, kind="stable")[:max_dets]
    d, dc, ds = boxes[order], classes[order], scores[order]
    gc = g[:, 4].astype(np.int64)
    n, m = len(order), len(g)
    iou = iou_xyxy(d, g[:, :4]) if n and m else np.zeros((n, m))
    same = dc[:, None] == gc[None, :]
    cls_iou = iou * same
    matched = np.full(n, -1, np.int64)
    gt_used = np.zeros(m, bool)
    if m:
        free = cls_iou.copy()
        for i in range(n):
            j = int(np.argmax(free[i]))
            if free[i, j] >= pos:
                matched[i], gt_used[j] = j, True
                free[:, j] = 0.0
    cause: List[Optional[str]] = [None] * n
    target = np.full(n, -1, np.int64)
    pointed = np.zeros(m, bool)  # TIDE's "usable": a Loc / Cls error could still claim it
    other_iou, used_iou = iou * ~same, cls_iou * gt_used[None, :]
    for i in np.nonzero(matched < 0)[0]:
        if not m:
            cause[i] = "background"
            continue
        j = int(np.argmax(cls_iou[i]))
        if bg <= cls_iou[i, j] <= pos:
            cause[i], target[i] = "localisation", j
        elif other_iou[i].max() >= pos:
            j = int(np.argmax(other_iou[i]))
            cause[i], target[i] = "classification", j
        elif used_iou[i].max() >= pos:
            cause[i] = "duplicate"
        elif iou[i].max() <= bg:
            cause[i] = "background"
        else:
            cause[i] = "both"
        if target[i] >= 0 and not gt_used[target[i]]:
            pointed[target[i]] = True
        else:
            target[i] = -1
    return _Image(order, dc, ds, matched, cause, target, gt_used, ~gt_used & ~pointed)


def _as_arrays(gt: GroundTruth, dets: DetectionSet, image_id: Hashable):
    g = np.asarray(gt.get(image_id, np.zeros((0, 5))), np.float64).reshape(-1, 5)
    b, s, c = dets.get(image_id, (np.zeros((0, 4)), np.zeros(0), np.zeros(0)))
    return (g, np.asarray(b, np.float64).reshape(-1, 4), np.asarray(s, np.float64).reshape(-1),
            np.asarray(c).reshape(-1).astype(np.int64))


def _ap(scores: Sequence[float], correct: Sequence[int], num_gt: int) -> float:
    """TIDE's AP of one class: ``scores`` and ``correct`` in the order pushed (ties keep it)."""
    if num_gt <= 0:
        return 0.0
    if not len(scores):
        return 0.0
    order = np.argsort(-np.asarray(scores, np.float64), kind="stable")
    hit = np.asarray(correct, bool)[order]
    tp = np.cumsum(hit)
    precision = tp / np.arange(1, len(hit) + 1)
    recall = tp / num_gt
    precision = np.maximum.accumulate(precision[::-1])[::-1]
    idx = np.searchsorted(recall, _RECALLS, side="left")
    return float(np.where(idx < len(hit), precision[np.minimum(idx, len(hit) - 1)], 0.0).mean())


@dataclass
class _Points:
    """Per class, the AP's data points in the order they are pushed, and the ground-truth count."""

    scores: Dict[int, List[float]] = field(default_factory=dict)
    correct: Dict[int, List[int]] = field(default_factory=dict)
    num_gt: Dict[int, int] = field(default_factory=dict)

    def push(self, k: int, score: float, correct: int) -> None:
        self.scores.setdefault(k, []).append(score)
        self.correct.setdefault(k, []).append(correct)

    def mean_ap(self, classes: Sequence[int]) -> float:
        """Mean over ``classes`` that still have a data point or ground truth (TIDE's rule)."""
        aps = [_ap(self.scores.get(k, ()), self.correct.get(k, ()), self.num_gt.get(k, 0))
               for k in classes if self.scores.get(k) or self.num_gt.get(k, 0) > 0]
        return float(np.mean(aps)) if aps else 0.0


@dataclass(frozen=True)
class _Error:
    kind: str
    cls: int                    # the class its data point is in (a Miss: the box's class)
    score: float
    fixed: Optional[Tuple[int, float]]  # Loc / Cls: the true positive it becomes, else None


@dataclass(frozen=True)
class ErrorBreakdown:
    """TIDE's figures (see the module): ``ap50`` and, per type, the AP@0.5 that fixing it gains."""

    ap50: float
    delta_ap: Dict[str, float]
    special: Dict[str, float]
    counts: Dict[str, int]      # errors of each type over every detection scored

    def as_dict(self) -> Dict[str, Any]:
        return {"ap50": self.ap50, "pos_iou": POS_IOU, "background_iou": BG_IOU,
                "delta_ap": dict(self.delta_ap), "special": dict(self.special),
                "counts": dict(self.counts),
                "note": "each type fixed on its own: the deltas overlap and do not add up to "
                        "the missing AP"}


def error_breakdown(gt: GroundTruth, dets: DetectionSet, pos: float = POS_IOU,
                    bg: float = BG_IOU, max_dets: int = 100) -> ErrorBreakdown:
    """The TIDE breakdown of ``dets`` against ``gt`` (images: those of ``gt``, as TIDE)."""
    base = _Points()
    errors: List[_Error] = []
    true_positives: List[Tuple[int, float]] = []
    best: Dict[Tuple[int, int], Tuple[float, int]] = {}  # (image, box) -> (score, error index)
    classes_with_gt = set()
    unmatched: Dict[int, int] = {}  # per class, the boxes no true positive took
    for n, image_id in enumerate(gt.keys()):
        g, b, s, c = _as_arrays(gt, dets, image_id)
        gc = g[:, 4].astype(np.int64)
        for k in gc:
            base.num_gt[int(k)] = base.num_gt.get(int(k), 0) + 1
            classes_with_gt.add(int(k))
        im = _match_image(g, b, s, c, pos, bg, max_dets)
        for k in gc[~im.gt_used]:
            unmatched[int(k)] = unmatched.get(int(k), 0) + 1
        for i in range(len(im.order)):
            k, score = int(im.classes[i]), float(im.scores[i])
            if im.cause[i] is None:
                base.push(k, score, _TP)
                true_positives.append((k, score))
                continue
            base.push(k, score, _FP)
            j = int(im.target[i])
            fixed = None
            if j >= 0:
                fixed = (int(gc[j]) if im.cause[i] == "classification" else k, score)
                if (n, j) not in best or best[(n, j)][0] < score:
                    best[(n, j)] = (score, len(errors))
            errors.append(_Error(im.cause[i], k, score, fixed))
        for j in np.nonzero(im.gt_missed)[0]:
            errors.append(_Error("missed", int(gc[j]), 0.0, None))
    fixers = {index for _, index in best.values()}
    classes = sorted(classes_with_gt)
    ap50 = base.mean_ap(classes)

    def fixed_ap(kind: Optional[str], scored_false: bool = False,
                 without_unmatched: bool = False) -> float:
        points = _Points(num_gt=dict(base.num_gt))
        if without_unmatched:
            for k, count in unmatched.items():
                points.num_gt[k] -= count
        for index, e in enumerate(errors):
            if e.kind == kind:
                if e.kind == "missed":
                    points.num_gt[e.cls] -= 1
                elif e.fixed is not None and index in fixers:
                    points.push(e.fixed[0], e.fixed[1], _TP)
            elif e.kind != "missed":
                points.push(e.cls, 0.0 if scored_false else e.score, _FP)
        for k, score in true_positives:
            points.push(k, 1.0 if scored_false else score, _TP)
        return points.mean_ap(classes)

    delta = {kind: max(fixed_ap(kind) - ap50, 0.0) for kind in ERROR_TYPES}
    special = {"false_positives": fixed_ap(None, scored_false=True) - ap50,
               "false_negatives": fixed_ap(None, without_unmatched=True) - ap50}
    counts = {kind: sum(e.kind == kind for e in errors) for kind in ERROR_TYPES}
    return ErrorBreakdown(ap50, delta, special, counts)


@dataclass
class ImageErrors:
    """One image's errors among the detections scored at least a threshold.

    ``false_positives``: ``(index into the image's detections, cause)``; ``missed``: indices of
    the boxes no detection matched (TIDE's Miss, and the boxes only a Loc / Cls error touched).
    """

    image: Hashable
    false_positives: List[Tuple[int, str]]
    missed: List[int]
    missed_area: float          # pixels squared, the missed boxes together
    false_positive_score: float  # the false positives' scores together
    wrong_class: int            # Cls errors

    @property
    def is_clean(self) -> bool:
        return not self.false_positives and not self.missed

    def causes(self) -> Dict[str, int]:
        """How many false positives of each cause, by cause name."""
        counts: Dict[str, int] = {}
        for _, cause in self.false_positives:
            counts[cause] = counts.get(cause, 0) + 1
        return counts


def image_errors(gt: GroundTruth, dets: DetectionSet, score: float, pos: float = POS_IOU,
                 bg: float = BG_IOU, max_dets: int = 100) -> List[ImageErrors]:
    """Per image of ``gt``, the errors of its detections scored ``>= score`` (TIDE's causes)."""
    result = []
    for image_id in gt.keys():
        g, b, s, c = _as_arrays(gt, dets, image_id)
        keep = np.nonzero(s >= score)[0]
        im = _match_image(g, b[keep], s[keep], c[keep], pos, bg, max_dets)
        fps = [(int(keep[im.order[i]]), im.cause[i]) for i in range(len(im.order))
               if im.cause[i] is not None]
        missed = [int(j) for j in np.nonzero(~im.gt_used)[0]]
        wh = np.clip(g[missed, 2:4] - g[missed, :2], 0, None)
        result.append(ImageErrors(
            image_id, fps, missed, float(np.prod(wh, axis=1).sum()),
            float(sum(s[i] for i, _ in fps)), sum(cause == "classification" for _, cause in fps)))
    return result


@dataclass(frozen=True)
class ClassErrors:
    """Per class at one score: false positives by cause, and missed boxes by COCO size."""

    score: float
    false_positives: Dict[str, List[int]]   # cause -> count per class (the detection's class)
    missed: Dict[str, List[int]]            # small / medium / large -> count per class
    boxes: Dict[str, List[int]]             # small / medium / large -> ground truth per class

    def as_dict(self, names: Sequence[str]) -> Dict[str, Any]:
        rows = []
        for k, name in enumerate(names):
            rows.append({"class_id": k, "name": name,
                         "false_positives": {t: v[k] for t, v in self.false_positives.items()},
                         "missed": {size: v[k] for size, v in self.missed.items()},
                         "boxes": {size: v[k] for size, v in self.boxes.items()}})
        return {"score": self.score, "per_class": rows}


def _size_of(box: np.ndarray) -> str:
    area = float(np.prod(np.clip(box[2:4] - box[:2], 0, None)))
    for size, (low, high) in AREA_RANGES.items():
        if low <= area < high:
            return size
    return "large"


def class_errors(gt: GroundTruth, dets: DetectionSet, num_classes: int, score: float,
                 per_image: Optional[Sequence[ImageErrors]] = None) -> ClassErrors:
    """Counts per class at ``score`` (from ``per_image``, :func:`image_errors`, when given)."""
    per_image = image_errors(gt, dets, score) if per_image is None else per_image
    fps = {t: [0] * num_classes for t in FALSE_POSITIVE_TYPES}
    missed = {size: [0] * num_classes for size in AREA_RANGES}
    boxes = {size: [0] * num_classes for size in AREA_RANGES}
    for im in per_image:
        g, _, _, c = _as_arrays(gt, dets, im.image)
        for box in g:
            if 0 <= int(box[4]) < num_classes:
                boxes[_size_of(box)][int(box[4])] += 1
        for i, cause in im.false_positives:
            if 0 <= int(c[i]) < num_classes:
                fps[cause][int(c[i])] += 1
        for j in im.missed:
            if 0 <= int(g[j, 4]) < num_classes:
                missed[_size_of(g[j])][int(g[j, 4])] += 1
    return ClassErrors(float(score), fps, missed, boxes)


WORST_REASONS = {"missed_area": "most missed area", "false_positive_score":
                 "most confident false positives", "wrong_class": "most wrong classes"}


def worst_images(per_image: Sequence[ImageErrors], count: int = 3) -> List[Tuple[ImageErrors, str]]:
    """Up to ``count`` images per reason (:data:`WORST_REASONS`), each image once, worst first;
    images without that error are never listed for it."""
    chosen: List[Tuple[ImageErrors, str]] = []
    seen = set()
    for key, reason in WORST_REASONS.items():
        ranked = sorted((im for im in per_image if getattr(im, key) > 0),
                        key=lambda im: -getattr(im, key))
        taken = 0
        for im in ranked:
            if taken == count:
                break
            if im.image in seen:
                continue
            seen.add(im.image)
            chosen.append((im, reason))
            taken += 1
    return chosen


def format_breakdown(breakdown: ErrorBreakdown) -> str:
    """Two lines: AP@0.5 and each type's delta, then the special errors (AP points, as TIDE)."""
    main = "  ".join(f"{SHORT_NAMES[t]} {100 * breakdown.delta_ap[t]:.2f}" for t in ERROR_TYPES)
    special = breakdown.special
    return (f"errors (TIDE, AP@0.5 {100 * breakdown.ap50:.2f} points; AP points each type costs, "
            f"fixed on its own, overlapping): {main}\n"
            f"  all false positives {100 * special['false_positives']:.2f}, all missed boxes "
            f"{100 * special['false_negatives']:.2f}")


@dataclass(frozen=True)
class ErrorReport:
    """The error analysis of one evaluation: the TIDE breakdown over every detection, and at
    ``score`` the errors per class and the worst images (with their reasons)."""

    breakdown: ErrorBreakdown
    per_class: ClassErrors
    worst: List[Tuple[ImageErrors, str]]

    def as_dict(self, names: Sequence[str]) -> Dict[str, Any]:
        """JSON-ready: ``errors``, ``errors_per_class`` and ``worst_images``."""
        listed = []
        for im, reason in self.worst:
            listed.append({"image": str(im.image), "reason": reason, "missed": len(im.missed),
                           "missed_area": im.missed_area, "false_positives": im.causes(),
                           "false_positive_score": im.false_positive_score,
                           "wrong_class": im.wrong_class})
        return {"errors": self.breakdown.as_dict(),
                "errors_per_class": self.per_class.as_dict(names), "worst_images": listed}


def analyse_errors(gt: GroundTruth, dets: DetectionSet, num_classes: int, score: float,
                   worst_per_reason: int = 3) -> ErrorReport:
    """:func:`error_breakdown`, and :func:`class_errors` and :func:`worst_images` at ``score``."""
    per_image = image_errors(gt, dets, score)
    return ErrorReport(error_breakdown(gt, dets), class_errors(gt, dets, num_classes, score,
                                                               per_image),
                       worst_images(per_image, worst_per_reason))


def caption(im: ImageErrors, reason: str, name: str) -> str:
    """``"most missed area: 0007.jpg - 3 missed, 1 background"``: a gallery row's title."""
    parts = [f"{len(im.missed)} missed"] + [f"{n} {cause}" for cause, n in
                                            sorted(im.causes().items())]
    return f"{reason}: {name} - " + ", ".join(parts)
