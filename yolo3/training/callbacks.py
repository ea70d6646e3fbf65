"""Training callbacks: checkpoints of the template body (never a parallel wrapper), written
atomically with the resume state of :mod:`yolo3.training.resume`; mAP evaluation, precise batch
norm, early stopping, NaN stops, epoch timing.

Files in the run's output folder (a :class:`yolo3.core.output_folder.OutputFolder`, through which
every one is written):

- ``best.weights.h5`` / ``best.keras``: the body with the best monitored value so far;
- ``last.weights.h5`` / ``last.keras``: the body after the last completed epoch;
- ``resume.json`` plus ``resume-<epoch>/`` (template weights, optimiser variables): the state
  ``--resume`` restores;
- ``history.csv``: one row per epoch (:class:`HistoryLog`).

``.keras`` checkpoints carry the model's :class:`~yolo3.checkpoint.metadata.ModelInfo` (variant,
anchors, masks, classes, input size). Every file is written atomically and recorded in the
folder's manifest; what a killed writer left behind is swept by the next run.
"""
from __future__ import annotations

import json
import logging
import math
import os
import shutil
import time
from pathlib import Path
from typing import Callable, List, Optional, Sequence, Union

import keras
import numpy as np

from yolo3.checkpoint.metadata import ModelInfo
from yolo3.checkpoint.saving import model_writer, weights_writer
from yolo3.core.errors import PathLike
from yolo3.core.extras import installed
from yolo3.core.fileio import write_text_atomic
from yolo3.core.output_folder import OutputFolder, as_output_folder
from yolo3.data.images import load_image
from yolo3.evaluation.full_evaluation import evaluate_fully, picture_paths
from yolo3.evaluation.metrics import evaluate_detections, ground_truth
from yolo3.evaluation.visualize import draw_on_array
from yolo3.inference.detector import YOLO
from yolo3.inference.tiled import TiledDetector
from yolo3.modeling.graph_surgery import float32_body
from yolo3.modeling.keras_compat import swap_ema_weights, uses_ema
from yolo3.ops.tiles import Slicing
from yolo3.training.event_log import EventWriter
from yolo3.training.history import append_epoch
from yolo3.training.jax_cluster import SINGLE, ProcessGroup
from yolo3.training.resume import save_resume_state

logger = logging.getLogger(__name__)

__all__ = ["TemplateCheckpoint", "HistoryLog", "StopOnNaN", "MapEvaluation", "PreciseBatchNorm",
           "EarlyStopOnPlateau", "EmaAfterBackupRestore", "EpochClock"]


def _after_progress_bar(callback: keras.callbacks.Callback) -> str:
    """A line break when Keras's live progress bar (``fit(verbose=1)``) has left its line open on
    stdout: a message of ``on_epoch_end`` would otherwise continue that line (Keras's own callbacks
    start theirs with a line break too); nothing without the bar (``--quiet``, ``verbose=0``)."""
    return "\n" if (callback.params or {}).get("verbose") == 1 else ""



class TemplateCheckpoint(keras.callbacks.Callback):
    """Save ``body`` (the template's body, not ``self.model``) as best and last, plus resume state.

    ``template`` is the single-device training model whose weights (and ``self.model``'s optimiser)
    the resume state holds. ``monitor`` is the value that picks ``best``: lower is better unless
    ``mode="max"``; with ``mode="min"`` and the value missing from an epoch's logs, ``loss`` stands
    in; with ``mode="max"`` (e.g. ``mAP50_95``) epochs without the value (NaN: not evaluated) keep the
    best as it is. ``last`` is written every epoch whose loss is finite. ``info`` is written into the
    ``.keras`` checkpoints, which always compute in float32 (a mixed-precision body is saved as a
    float32 copy with the same weights).
    """

    def __init__(self, body: keras.Model, folder: Union[OutputFolder, PathLike],
                 template: Optional[keras.Model] = None,
                 monitor: str = "val_loss", save_keras: bool = True, save_resume: bool = True,
                 best: Optional[float] = None, verbose: int = 1, info: Optional[ModelInfo] = None,
                 mode: str = "min", ema: bool = False):
        super().__init__()
        if mode not in ("min", "max"):
            raise ValueError(f"mode must be 'min' or 'max', got {mode!r}")
        self.body = body
        self.template = template
        self._owns_folder = not isinstance(folder, OutputFolder)  # made here: closed here
        self.folder = as_output_folder(folder)
        self.monitor = monitor
        self.mode = mode
        self.save_keras = save_keras
        self.save_resume = save_resume and template is not None
        worst = -math.inf if mode == "max" else math.inf
        self.best = worst if best is None else float(best)
        self.best_epoch: Optional[int] = None  # the epoch (from 1) whose weights are best, this run
        self.verbose = verbose
        self.info = info
        self.ema = ema  # SwapEMAWeights runs before: the body holds the EMA weights at epoch end

    @property
    def output_dir(self) -> Path:
        return self.folder.path

    def _names(self, stem: str) -> List[str]:
        return [f"{stem}.weights.h5"] + ([f"{stem}.keras"] if self.save_keras else [])

    def _save(self, stem: str) -> None:
        self.folder.write(f"{stem}.weights.h5", weights_writer(self.body), suffix=".weights.h5")
        if self.save_keras:
            self.folder.write(f"{stem}.keras", model_writer(float32_body(self.body), self.info),
                              suffix=".keras")

    def _copy(self, source: str, stem: str) -> None:
        """``stem.*`` as byte copies of the ``source.*`` files just written (no second
        serialisation of the same weights), each atomically."""
        for src, dst in zip(self._names(source), self._names(stem)):
            self.folder.write(dst, lambda tmp, src=src: shutil.copyfile(self.folder.path / src,
                                                                          tmp))

    def on_train_end(self, logs: Optional[dict] = None) -> None:
        if self._owns_folder:
            self.folder.close()

    def _improves(self, value: float) -> bool:
        return value > self.best if self.mode == "max" else value < self.best

    def on_epoch_end(self, epoch: int, logs: Optional[dict] = None) -> None:
        logs = logs or {}
        loss = logs.get("loss")
        if loss is not None and not math.isfinite(float(loss)):
            return  # never overwrite a good checkpoint with a NaN model
        value = logs.get(self.monitor, None if self.mode == "max" else loss)
        self._save("last")
        if value is not None and math.isfinite(float(value)) and self._improves(float(value)):
            if self.verbose:
                # the evaluation's line, when there is one, has ended the progress bar's
                start = "" if "mAP50" in logs else _after_progress_bar(self)
                logger.info("%sEpoch %d: %s improved from %.5g to %.5g, saving %s", start,
                            epoch + 1, self.monitor, self.best, float(value),
                            self.output_dir / "best.weights.h5")
            self.best, self.best_epoch = float(value), epoch + 1
            self._copy("last", "best")
        if self.save_resume:
            optimizer = getattr(self.model, "optimizer", None)
            save_resume_state(self.folder, epoch + 1, self.template, optimizer, self.best,
                              ema_in_model=self.ema and uses_ema(optimizer),
                              variant=self.info.variant if self.info is not None else None)


class MapEvaluation(keras.callbacks.Callback):
    """Evaluate ``body`` on the validation records every ``every`` epochs (and at the last one):
    COCO mAP@0.5 and mAP@0.5:0.95 (:mod:`yolo3.evaluation.metrics`) go into the epoch's logs as
    ``mAP50`` and ``mAP50_95`` (NaN on epochs without evaluation), hence to ``history.csv``, the
    progress line and TensorBoard; ``draw`` validation images with their detections go to
    TensorBoard (``logs_dir``). Runs before the checkpoint callback, which then picks ``best`` by
    ``mAP50_95``.

    In a cluster only the chief evaluates (``evaluate=False`` elsewhere); ``share`` (a function
    ``[mAP50, mAP50_95] -> the chief's values``, called by every worker) gives all workers the
    chief's figures, so that they log and stop alike. ``slicing``: sliced validation as it says
    (:class:`yolo3.inference.tiled.TiledDetector`), so that best-by-mAP judges the detection that
    tiled training is for.
    """

    def __init__(self, body: keras.Model, info: ModelInfo, records: Sequence, every: int = 1,
                 batch_size: int = 8, logs_dir: Optional[PathLike] = None, draw: int = 4,
                 verbose: int = 1, evaluate: bool = True,
                 share: Optional[Callable[[Sequence[float]], Sequence[float]]] = None,
                 slicing: Optional[Slicing] = None, group: ProcessGroup = SINGLE):
        super().__init__()
        self.slicing = slicing
        self.group = group
        self._mine: dict = {}  # this process's share of the images, decoded (several processes)
        self.body, self.info, self.records = body, info, list(records)
        self.every, self.batch_size, self.draw, self.verbose = max(1, int(every)), batch_size, draw, verbose
        self.logs_dir = None if logs_dir is None else str(logs_dir)
        self.evaluates, self.share = evaluate, share
        self._images = None
        self._detector = None
        # the ground truth by record index, and its ignore regions and COCO areas
        self._gt, self._details = ground_truth(self.records, keys=range(len(self.records)))
        # (epoch, ground truth, detections) of the last evaluation
        self.last: Optional[tuple] = None

    def _due(self, epoch: int) -> bool:
        last = self.params.get("epochs") if self.params else None
        return (epoch + 1) % self.every == 0 or (last is not None and epoch + 1 == last)

    def images(self) -> list:
        """The validation images, ``(H, W, 3)`` uint8 RGB, decoded once."""
        if self._images is None:  # this process's share, where decoded already, is kept
            self._images = [self._mine.pop(k) if k in self._mine else load_image(r.path)
                            for k, r in enumerate(self.records)]
        return self._images

    def _image(self, k: int) -> np.ndarray:
        """Validation image ``k``: from :meth:`images` with one process; with several, each
        decodes only the images of its share."""
        if not self.group.several:
            return self.images()[k]
        if self._images is not None:
            return self._images[k]
        if k not in self._mine:
            self._mine[k] = load_image(self.records[k].path)
        return self._mine[k]

    def _local_detector(self) -> YOLO:
        """The detector of ``body`` as it is now, on this process's devices: with several
        processes a copy of the body (the run's variables span every process's devices)."""
        if self._detector is None:  # built once: its compiled function serves every evaluation
            source = self.body
            if self.group.several:
                source = keras.models.clone_model(self.body)
                source.set_weights(self.body.get_weights())
            self._detector = YOLO.from_body(float32_body(source), self.info, score=0.001,
                                            iou=0.45, precision="float32")
        else:
            if self._detector.body is not self.body:  # a copy: float32, or this process's
                self._detector.body.set_weights(self.body.get_weights())
            self._detector.sync_weights()
        return self._detector

    def evaluate(self) -> dict:
        """The figures of ``body`` as it is now (float32, score threshold 0.001, IoU 0.45). With
        several processes each detects in its share of the images and every process gathers
        them all (the same figures everywhere)."""
        mine = self.group.share(len(self.records))
        with self.group.local():
            detector = self._local_detector()
            if self.slicing is not None:
                s = self.slicing
                detector = TiledDetector(detector, s.tile, s.overlap, s.merge,
                                         whole_image=s.whole_image, whole_from=s.whole_from,
                                         batch_size=max(8, self.batch_size))
            dets = {}
            for start in range(0, len(mine), self.batch_size):
                keys = mine[start:start + self.batch_size]
                results = detector.detect_batch([self._image(k) for k in keys])
                dets.update(zip(keys, results))
        if self.group.several:
            dets = gather_detections(self.group, dets, len(self.records))
        gt = self._gt
        # AP by size is not logged (the end of the run computes everything once more)
        figures = evaluate_detections(gt, dets, self.info.num_classes, self.info.names(),
                                      by_size=False, details=self._details)
        figures["detections"], figures["ground_truth"] = dets, gt
        return figures

    def write_diagnostics(self, folder: PathLike) -> Optional[dict]:
        """Write the full evaluation of the last evaluated epoch into ``folder``:
        ``diagnostics.json`` (what ``yolo3 evaluate`` writes: the figures per class, precision,
        recall and F1 against confidence, the confusion matrix at the best F1's confidence, the
        error analysis) and the pictures (``pr.png``, ``confusion.png``, ``confidence.png``,
        ``errors.png`` with matplotlib; ``worst.png``, the gallery of the worst images).
        Returns the best F1 (``{"epoch", "confidence", "f1", "precision", "recall"}``); None when
        nothing was evaluated or the validation set has no box."""
        if self.last is None:
            return None
        epoch, gt, dets = self.last
        if not any(len(g) for g in gt.values()):
            return None
        full = evaluate_fully(gt, dets, self.info.names(), details=self._details)
        for worst in full.result["worst_images"]:  # the images by path, not by index
            worst["image"] = self.records[int(worst["image"])].path
        os.makedirs(folder, exist_ok=True)
        write_text_atomic(os.path.join(folder, "diagnostics.json"),
                          json.dumps(dict(epoch=epoch, **full.result), indent=1))
        images = self.images()
        full.draw(picture_paths(os.path.join(folder, "")), gt, dets, lambda k: images[k])
        return dict(full.diagnostics.curves.best(), epoch=epoch)

    def on_epoch_end(self, epoch: int, logs: Optional[dict] = None) -> None:
        if logs is None:
            return
        if not self._due(epoch):
            logs["mAP50"] = logs["mAP50_95"] = float("nan")
            return
        figures = self.evaluate() if self.evaluates else {"mAP50": 0.0, "mAP50_95": 0.0}
        if self.evaluates:
            self.last = (epoch + 1, figures["ground_truth"], figures["detections"])
        values = [float(figures["mAP50"] or 0.0), float(figures["mAP50_95"] or 0.0)]
        if self.share is not None:
            values = list(self.share(values))
        logs["mAP50"], logs["mAP50_95"] = values
        if self.verbose and self.evaluates:
            logger.info("%sEpoch %d: validation mAP@0.5 %.4f, mAP@0.5:0.95 %.4f (%d images)",
                        _after_progress_bar(self), epoch + 1, values[0], values[1],
                        len(self.records))
        if self.evaluates and self.logs_dir and self.draw:
            self._tensorboard_images(epoch, figures["detections"])

    def _tensorboard_images(self, epoch: int, dets: dict) -> None:
        if not installed("tensorflow"):
            self._event_images(epoch, dets)
            return
        import tensorflow as tf

        writer = tf.summary.create_file_writer(os.path.join(self.logs_dir, "validation_images"))
        drawn = [draw_on_array(self.images()[k], *dets[k], self.info.names())
                 for k in range(min(self.draw, len(self.records)))]
        size = min(min(d.shape[0] for d in drawn), 256)
        stack = np.stack([np.asarray(tf.image.resize(d, (size, size)), np.uint8) for d in drawn])
        with writer.as_default():
            tf.summary.image("detections", stack, step=epoch, max_outputs=len(stack))
        writer.flush()

    def _event_images(self, epoch: int, dets: dict) -> None:
        """:meth:`_tensorboard_images` without TensorFlow (the tensorboard package's writer)."""
        import importlib.util
        if importlib.util.find_spec("tensorboard") is None:
            return
        import cv2
        writer = EventWriter(os.path.join(self.logs_dir, "validation_images"))
        drawn = [draw_on_array(self.images()[k], *dets[k], self.info.names())
                 for k in range(min(self.draw, len(self.records)))]
        size = min(min(d.shape[0] for d in drawn), 256)
        for k, image in enumerate(drawn):
            small = cv2.resize(np.asarray(image, np.uint8), (size, size),
                               interpolation=cv2.INTER_LINEAR)
            writer.image(f"detections/image/{k}", small, epoch)
        writer.close()


def gather_detections(group: ProcessGroup, dets: dict, count: int) -> dict:
    """Every process's ``{image index: (boxes (n, 4), scores (n,), classes (n,))}`` joined into
    the detections of all ``count`` images, on every process (:meth:`ProcessGroup.gather_rows`)."""
    rows = [np.column_stack([np.full(len(scores), k, np.float64), boxes, scores, classes])
            for k, (boxes, scores, classes) in dets.items() if len(scores)]
    table = group.gather_rows(np.concatenate(rows) if rows else np.zeros((0, 7), np.float64))
    out = {k: (np.zeros((0, 4), np.float32), np.zeros(0, np.float32), np.zeros(0, np.int32))
           for k in range(count)}
    for k in np.unique(table[:, 0]).astype(int):
        picked = table[table[:, 0] == k]
        out[int(k)] = (picked[:, 1:5].astype(np.float32), picked[:, 5].astype(np.float32),
                       picked[:, 6].astype(np.int32))
    return out


class EmaAfterBackupRestore(keras.callbacks.Callback):
    """Put ``keras.callbacks.BackupAndRestore`` (multi-worker) and EMA together. The backup is
    written at an epoch's end, when ``SwapEMAWeights`` has put the averaged weights into the model
    and the trained ones into the optimiser's averages; after a restore from ``backup_dir`` this
    swaps them back before training goes on. Place it right after ``BackupAndRestore``."""

    def __init__(self, backup_dir: PathLike):
        super().__init__()
        self.backup_dir = Path(backup_dir)

    def on_train_begin(self, logs: Optional[dict] = None) -> None:
        optimizer = getattr(self.model, "optimizer", None)
        restored = (self.backup_dir / "latest.weights.h5").exists()
        if restored and uses_ema(optimizer) and optimizer.built:
            swap_ema_weights(optimizer)


class PreciseBatchNorm(keras.callbacks.Callback):
    """Give the batch norms statistics of the weights that are evaluated and saved
    (:class:`yolo3.training.bn_statistics.BatchNormStatistics` over a fixed set of training images),
    at the start of each epoch's validation and, where an epoch has none, at its end. Place it right
    after ``SwapEMAWeights`` (whose averaged weights are then in the model) and before evaluation
    and checkpoints, which then see matching statistics."""

    def __init__(self, statistics):
        super().__init__()
        self.statistics = statistics
        self._fitting = False
        self._done = False

    def _recompute(self) -> None:
        count = self.statistics.recompute()
        self._done = True
        if count:
            logger.debug("batch-norm statistics recomputed over %d images", count)

    def on_train_begin(self, logs: Optional[dict] = None) -> None:
        self._fitting = True

    def on_train_end(self, logs: Optional[dict] = None) -> None:
        self._fitting = False

    def on_epoch_begin(self, epoch: int, logs: Optional[dict] = None) -> None:
        self._done = False

    def on_test_begin(self, logs: Optional[dict] = None) -> None:
        if self._fitting:  # fit's validation: the loss is then computed with matching statistics
            self._recompute()

    def on_epoch_end(self, epoch: int, logs: Optional[dict] = None) -> None:
        if not self._done:
            self._recompute()


class EarlyStopOnPlateau(keras.callbacks.Callback):
    """Stop training when ``monitor`` (higher is better) has not improved for ``patience``
    evaluations; epochs where it is NaN (not evaluated) do not count. ``best`` resumes a run."""

    def __init__(self, patience: int, monitor: str = "mAP50_95", best: Optional[float] = None,
                 verbose: int = 1):
        super().__init__()
        self.patience, self.monitor, self.verbose = int(patience), monitor, verbose
        self.best = -math.inf if best is None else float(best)
        self.wait = 0
        self.stopped_epoch: Optional[int] = None

    def on_epoch_end(self, epoch: int, logs: Optional[dict] = None) -> None:
        value = (logs or {}).get(self.monitor)
        if value is None or not math.isfinite(float(value)):
            return
        if float(value) > self.best:
            self.best, self.wait = float(value), 0
            return
        self.wait += 1
        if self.wait >= self.patience:
            self.stopped_epoch = epoch
            self.model.stop_training = True
            if self.verbose:
                logger.info("Epoch %d: %s has not improved on %.4f for %d evaluations: stopping "
                            "early", epoch + 1, self.monitor, self.best, self.wait)


class EpochClock(keras.callbacks.Callback):
    """Put the epoch's duration in seconds (its training steps and validation loss, not what later
    callbacks do: mAP evaluation, checkpoints) into the logs as ``seconds``, hence ``history.csv``:
    accuracy against training time. Place it first."""

    def on_epoch_begin(self, epoch: int, logs: Optional[dict] = None) -> None:
        self._start = time.perf_counter()

    def on_epoch_end(self, epoch: int, logs: Optional[dict] = None) -> None:
        if logs is not None and hasattr(self, "_start"):
            logs["seconds"] = time.perf_counter() - self._start


class HistoryLog(keras.callbacks.Callback):
    """One ``history.csv`` row per epoch (``epoch`` from 0, then each logged value), the file
    rewritten whole through the run's output ``folder`` (:func:`yolo3.training.history.append_epoch`):
    never a half row, and never into a history file that is not yolo3's."""

    def __init__(self, folder: Union[OutputFolder, PathLike]):
        super().__init__()
        self.folder = as_output_folder(folder)

    def on_epoch_end(self, epoch: int, logs: Optional[dict] = None) -> None:
        values = {k: float(v) if np.ndim(v) == 0 else v for k, v in (logs or {}).items()}
        append_epoch(self.folder, epoch, values)


class StopOnNaN(keras.callbacks.Callback):
    """Stop training on the first non-finite batch loss, with a message; sets ``self.stopped``."""

    def __init__(self):
        super().__init__()
        self.stopped = False
        self.message = ""

    def on_train_batch_end(self, batch: int, logs: Optional[dict] = None) -> None:
        loss = (logs or {}).get("loss")
        if loss is not None and not math.isfinite(float(loss)):
            self.stopped = True
            self.message = (f"non-finite loss ({loss}) at batch {batch}: training stopped "
                            "(the result is the last good checkpoint, if there is one)")
            logger.warning("%s", self.message)
            self.model.stop_training = True
