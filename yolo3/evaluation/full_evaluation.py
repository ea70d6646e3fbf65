"""Everything one evaluation yields, computed once and drawn once: for ``yolo3 evaluate`` and for
the end of a training run (its ``diagnostics/``), so that both write the same figures.

- the COCO and VOC figures per class and overall (:mod:`yolo3.evaluation.metrics`);
- precision / recall / F1 against confidence and the confusion matrix at the confidence of best
  F1 (:mod:`yolo3.evaluation.diagnostics`);
- the error analysis at that confidence (:mod:`yolo3.evaluation.error_analysis`);
- the pictures: ``pr``, ``confusion``, ``confidence``, ``errors`` (matplotlib) and ``worst`` (the
  gallery of the worst images, no matplotlib).

Inputs are :mod:`yolo3.evaluation.metrics`'s: ground truth ``id -> (N, 5)`` ``x1, y1, x2, y2,
class`` and detections ``id -> (boxes (M, 4), scores (M,), classes (M,))``.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence

import numpy as np

from yolo3.core.extras import install_hint, installed
from yolo3.evaluation.diagnostics import Diagnostics, diagnose
from yolo3.evaluation.error_analysis import ErrorReport, analyse_errors
from yolo3.evaluation.metrics import (
    DetectionSet,
    GroundTruth,
    TruthDetails,
    evaluate_detections,
    without_ignored,
)
from yolo3.evaluation.visualize import (
    draw_worst_images,
    plot_confidence_curves,
    plot_confusion_matrix,
    plot_error_breakdown,
    plot_pr_curves,
    save_png,
)

logger = logging.getLogger(__name__)

__all__ = ["PICTURES", "picture_paths", "FullEvaluation", "evaluate_fully"]

PICTURES = ("pr", "confusion", "confidence", "errors", "worst")  # the kinds :meth:`draw` writes
WORST_PER_REASON = 3  # the gallery: this many images for each reason


def picture_paths(prefix: str) -> Dict[str, str]:
    """The pictures' files, ``<prefix><kind>.png`` for each kind of :data:`PICTURES`
    (``evaluate``: ``<out stem>_``; a run: ``diagnostics/``)."""
    return {kind: f"{prefix}{kind}.png" for kind in PICTURES}


@dataclass
class FullEvaluation:
    """``result``: the JSON-ready figures (metrics, ``confidence_curves``, ``confusion_matrix``,
    ``errors``, ``errors_per_class``, ``worst_images``)."""

    result: Dict[str, Any]
    pr_curves: List[Optional[dict]]
    diagnostics: Diagnostics
    errors: ErrorReport
    class_names: List[str]
    analysed: Optional[DetectionSet] = None  # the detections the analyses saw (less ignored ones)

    def draw(self, paths: Mapping[str, str], gt: GroundTruth, dets: DetectionSet,
             image_of: Callable[[Any], Optional[np.ndarray]]) -> List[str]:
        """Write the pictures of ``paths`` (kind -> PNG path; kinds of :data:`PICTURES`);
        ``image_of(image_id)`` gives the gallery's images (None: that row left out). Returns the
        paths written: without matplotlib only the gallery, with one warning."""
        written = []
        if "worst" in paths:
            shown = dets if self.analysed is None else self.analysed
            gallery = draw_worst_images(self.errors, image_of, gt, shown, self.class_names)
            if gallery is not None:
                written.append(save_png(gallery, paths["worst"]))
        plots = {"pr": lambda p: plot_pr_curves(self.pr_curves, self.class_names, p),
                 "confusion": lambda p: plot_confusion_matrix(self.diagnostics.matrix,
                                                              self.class_names, p),
                 "confidence": lambda p: plot_confidence_curves(self.diagnostics.curves,
                                                                self.class_names, p),
                 "errors": lambda p: plot_error_breakdown(self.errors.breakdown, p)}
        wanted = [kind for kind in plots if kind in paths]
        if wanted and not installed("matplotlib"):
            logger.warning("matplotlib is not installed (%s): no plots", install_hint("matplotlib"))
            return written
        for kind in wanted:
            written.append(plots[kind](paths[kind]))
        return written


def evaluate_fully(gt: GroundTruth, dets: DetectionSet, class_names: Sequence[str],
                   max_dets: int = 100, confusion_score: Optional[float] = None,
                   worst_per_reason: int = WORST_PER_REASON,
                   details: Optional[TruthDetails] = None) -> FullEvaluation:
    """Every figure of one evaluation (the module); ``confusion_score``: the confusion matrix's
    and the error counts' score (default: the confidence of best F1); ``details``: the ignore
    regions and COCO areas of real files. The analyses after the mAP see the detections less
    those on ignore regions (:func:`~yolo3.evaluation.metrics.without_ignored`)."""
    names = list(class_names)
    result = evaluate_detections(gt, dets, len(names), names, max_dets=max_dets, with_curves=True,
                                 details=details)
    curves = result.pop("pr_curves")
    dets = without_ignored(gt, dets, details)
    diagnostics = diagnose(gt, dets, len(names), score=confusion_score)
    result.update(diagnostics.as_dict(names))
    errors = analyse_errors(gt, dets, len(names), diagnostics.score, worst_per_reason)
    result.update(errors.as_dict(names))
    return FullEvaluation(result, curves, diagnostics, errors, names, dets)
