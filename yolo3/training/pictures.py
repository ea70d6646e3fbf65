"""The pictures of a training run, in its folder: what the model is given and how it is doing.

- ``labels.png`` (once, at the start): class counts, box centres, box sizes at the input size
  against the strides and anchors (:func:`yolo3.evaluation.visualize.plot_labels`);
- ``train_batch0.jpg`` ... (once, at the start): the first training batches as the pipeline
  delivers them (augmented, mosaic, tiles, at the input size), boxes and class names drawn;
- ``results.png`` (at every evaluation): every series of ``history.csv`` by epoch;
- ``val_gallery.png`` (each time the best model changes): a fixed set of validation images, labels
  beside the detections scored at least the confidence of best F1.

Only the chief of a run draws; the plots need matplotlib (without it: one warning, and the
pictures that need none are still drawn). Each file goes through the run's
:class:`~yolo3.core.output_folder.OutputFolder`.
"""
from __future__ import annotations

import logging
import time
from typing import Optional, Sequence

import keras
import numpy as np
from PIL import Image

from yolo3.core.extras import install_hint, installed
from yolo3.core.output_folder import OutputFolder
from yolo3.evaluation.diagnostics import confidence_curves
from yolo3.evaluation.visualize import (
    draw_batch,
    labels_beside_predictions,
    plot_labels,
    plot_results,
    save_png,
    stack_rows,
)
from yolo3.training.history import read_history

logger = logging.getLogger(__name__)

__all__ = ["LABELS", "RESULTS", "GALLERY", "TRAIN_BATCHES", "PICTURES", "draw_start",
           "RunPictures", "run_summary", "plots_wanted"]

LABELS = "labels.png"
RESULTS = "results.png"
GALLERY = "val_gallery.png"
TRAIN_BATCHES = 3           # train_batch0.jpg ... train_batch2.jpg
BATCH_IMAGES = 16           # images drawn per training batch at most
GALLERY_IMAGES = 6          # validation images in the gallery
PICTURES = (LABELS, RESULTS, GALLERY, "train_batch[0-9]*.jpg")  # the run folder's patterns


def _plots_available() -> bool:
    if installed("matplotlib"):
        return True
    logger.warning("matplotlib is not installed (%s): no labels.png or results.png in the run "
                   "folder; the batches and the gallery are still drawn",
                   install_hint("matplotlib"))
    return False


def draw_start(folder: OutputFolder, records: Sequence, names: Sequence[str],
               input_hw: Sequence[int], batches, anchors: Optional[np.ndarray] = None,
               strides: Sequence[int] = (32, 16, 8), plots: bool = True) -> float:
    """``labels.png`` (when ``plots``) and ``train_batch*.jpg``: ``batches`` indexes to
    ``(images (B, H, W, 3) in [0, 1], boxes (B, M, 5))`` (the run's first training batches,
    :class:`yolo3.data.numpy_pipeline.NumpyBatches` without target encoding). Returns the
    seconds it took."""
    start = time.perf_counter()
    if plots:
        with folder.writing(LABELS, suffix=".png") as tmp:
            plot_labels(records, names, input_hw, tmp, anchors=anchors, strides=strides)
    for k in range(TRAIN_BATCHES):
        images, boxes = batches[k]
        picture = Image.fromarray(draw_batch(images[:BATCH_IMAGES], boxes[:BATCH_IMAGES], names))
        with folder.writing(f"train_batch{k}.jpg", suffix=".jpg") as tmp:
            picture.save(tmp, format="JPEG", quality=85)
    return time.perf_counter() - start


class RunPictures(keras.callbacks.Callback):
    """At each evaluation, ``results.png``; when the checkpoint's best changed at that epoch,
    ``val_gallery.png``. Goes after the evaluation (:class:`~yolo3.training.callbacks.MapEvaluation`,
    whose ``last`` holds the epoch's detections) and the checkpoint (its ``best_epoch``)."""

    def __init__(self, folder: OutputFolder, evaluation, checkpoint, names: Sequence[str],
                 plots: bool = True):
        super().__init__()
        self.folder, self.evaluation, self.checkpoint = folder, evaluation, checkpoint
        self.names = list(names)
        self.plots = plots
        self.seconds = 0.0  # spent drawing, this run

    def on_epoch_end(self, epoch: int, logs: Optional[dict] = None) -> None:
        start = time.perf_counter()
        self._draw(epoch)
        self.seconds += time.perf_counter() - start

    def _draw(self, epoch: int) -> None:
        last = self.evaluation.last
        if last is None or last[0] != epoch + 1:
            return
        if self.plots:
            columns = read_history(self.folder.path / "history.csv")
            with self.folder.writing(RESULTS, suffix=".png") as tmp:
                plot_results(columns, tmp)
        if self.checkpoint.best_epoch == epoch + 1:
            self._gallery(last[1], last[2], epoch + 1)

    def _gallery(self, gt: dict, dets: dict, epoch: int) -> None:
        images = self.evaluation.images()
        shown = list(range(min(GALLERY_IMAGES, len(images))))
        if not shown:
            return
        score = confidence_curves(gt, dets, len(self.names)).best()["confidence"]
        rows = []
        for k in shown:
            rows.append(labels_beside_predictions(
                Image.fromarray(images[k]), gt[k], dets[k], self.names,
                f"epoch {epoch} (best so far), scores >= {score:.2f}", height=240, score=score))
        with self.folder.writing(GALLERY, suffix=".png") as tmp:
            save_png(stack_rows(rows), tmp)


def run_summary(config, data) -> dict:
    """``run.json``: the run's settings (:meth:`TrainConfig.settings`) and its data in figures
    (images, classes, boxes per class of the training set), for the report."""
    counts = np.zeros(len(data.class_names), np.int64)
    for r in data.records:
        classes = np.asarray(r.boxes, np.float64).reshape(-1, 5)[:, 4].astype(np.int64)
        counts += np.bincount(classes[(classes >= 0) & (classes < len(counts))],
                              minlength=len(counts))
    settings = {k: list(v) if isinstance(v, tuple) else v for k, v in config.settings().items()}
    return {"settings": settings,
            "dataset": {"training_images": len(data.records),
                        "validation_images": len(data.val_records),
                        "classes": len(data.class_names), "variant": data.spec.name,
                        "input_size": "x".join(str(v) for v in data.input_hw[::-1]),
                        "boxes_per_class": dict(zip(data.class_names, counts.tolist()))}}


def plots_wanted(enabled: bool) -> bool:
    """Whether to draw the matplotlib plots: asked for and matplotlib installed (a warning if not)."""
    return bool(enabled) and _plots_available()
