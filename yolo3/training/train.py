"""Training: a short loop over named steps, each in the module of its role.

:func:`train` takes a :class:`TrainConfig` (the CLI ``yolo3 train`` / ``train_multi_gpu.py`` is a
thin parser over it) and runs, checking everything before it writes anything:

1. :func:`~yolo3.training.data_step.prepare_data` (classes, anchors, records, validation split);
2. :func:`~yolo3.training.run_folder.check_run_folder` (the ownership rule, resume state);
3. :func:`~yolo3.training.placement.pick_strategy` (devices, replicas, global batch);
4. :func:`~yolo3.training.data_step.check_images_up_front` (a full decode of every image);
5. :func:`~yolo3.training.models.build_models` (body, training template, initial weights);

then writes: :func:`~yolo3.training.run_folder.prepare_output` (folders, side files),
:func:`~yolo3.training.run_folder.restore_state` (resume),
:func:`~yolo3.training.datasets.make_datasets`, :func:`~yolo3.training.stages.run_stage` per stage
(:mod:`yolo3.training.stages`: the backbone frozen, then all layers; ``epochs`` counts both) and
:func:`~yolo3.training.run_folder.finish`. Outputs go to ``config.output.output_dir`` (see
:class:`TrainResult`).

The recipe (optimiser, weight decay, EMA, precision, XLA, evaluation interval) is decided in
:mod:`yolo3.training.recipe`. With evaluation on (``eval_every``), the validation set's COCO mAP is
computed after each evaluated epoch by the chief, with the averaged (EMA) weights, and ``best.*``
is the checkpoint of the best mAP@0.5:0.95; without it, of the lowest validation loss.
"""
from __future__ import annotations

import json
import logging
import math
import shutil
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import keras
import numpy as np

from yolo3.config.choices import AUTO_BATCH
from yolo3.config.train_config import Caution, ConfigError, TrainConfig, check
from yolo3.core.errors import CommandFailed, SettingError
from yolo3.core.fileio import read_json
from yolo3.core.log import NOTICE
from yolo3.evaluation.report import REPORT, run_report
from yolo3.training.batch_size import (
    TrainingOutOfMemory,
    choose_batch_size,
    is_out_of_memory,
    out_of_memory_message,
)
from yolo3.training.bn_statistics import BatchNormStatistics
from yolo3.training.callbacks import (
    EarlyStopOnPlateau,
    MapEvaluation,
    PreciseBatchNorm,
    StopOnNaN,
    TemplateCheckpoint,
)
from yolo3.training.data_step import (
    ImageDecodeFailed,
    TrainData,
    check_args,
    check_images_up_front,
    name_undecodable,
    prepare_data,
)
from yolo3.training.datasets import (
    batch_norm_images,
    first_batches,
    datasets_from,
    make_datasets,
    device_feed,
    check_image_cache,
    kept_layout,
    pick_pipeline,
)
from yolo3.training.history import completed_epochs
from yolo3.training.jax_cluster import ProcessGroup, check_same_settings, lost_process
from yolo3.training.models import build_models
from yolo3.training.pictures import RunPictures, draw_start, plots_wanted, run_summary
from yolo3.training.placement import (
    Placement,
    join_processes,
    pick_strategy,
    sharing,
    training_precision,
)
from yolo3.training.recipe import (
    dtype_policy,
)
from yolo3.training.run_folder import (
    RunFolder,
    check_run_folder,
    finish,
    prepare_output,
    restore_state,
)
from yolo3.training.stages import eval_interval, run_stage, stage_callbacks, stages
from yolo3.training.trackers import (
    TRACKER_FILE,
    Tracker,
    TrackerCallback,
    flat_parameters,
    make_tracker,
    run_artifacts,
)
from yolo3.training.user_callbacks import ForTemplate, check_callbacks, for_template

logger = logging.getLogger(__name__)

__all__ = ["TrainConfig", "TrainResult", "train", "validate_config", "ConfigError"]


@dataclass
class TrainResult:
    """Paths written and the loss history (``{'loss': [...], 'val_loss': [...]}`` per epoch run)."""

    output: str
    final_model: str
    final_weights: str
    history: Dict[str, List[float]] = field(default_factory=dict)
    epochs_completed: int = 0
    stopped_on_nan: bool = False
    message: str = ""
    skipped_layers: List[Tuple[str, str]] = field(default_factory=list)


def validate_config(config: TrainConfig) -> List[Caution]:
    """Refuse settings that cannot work (:func:`yolo3.config.train_config.check`):
    :class:`ConfigError` naming them; returns the cautions of those that can."""
    try:
        return check(config)
    except SettingError as e:
        raise ConfigError(str(e), *e.settings) from None


def train(config: TrainConfig,
          callbacks: Optional[Sequence[keras.callbacks.Callback]] = None) -> TrainResult:
    """Train as configured; returns the written paths and the loss history. The Keras dtype
    policy of ``precision`` holds while training and is restored afterwards.

    ``callbacks``: your Keras callbacks, run after yolo3's own with the training template as
    their ``model`` (never the parallel wrapper; :mod:`yolo3.training.user_callbacks`)."""
    for caution in validate_config(config):
        logger.warning("%s", caution.message, extra={"settings": caution.settings})
    try:
        user_callbacks = check_callbacks(callbacks)
    except SettingError as e:
        raise ConfigError(str(e), *e.settings) from None
    group = join_processes(config)  # first: before JAX's first computation (or device query)
    with dtype_policy(training_precision(config)):
        return _train(config, user_callbacks, group)


def _train(config: TrainConfig, user_callbacks: List[keras.callbacks.Callback],
           group: ProcessGroup) -> TrainResult:
    keras.utils.set_random_seed(config.seed)
    with group.agreed():  # a process that refuses tells the others (no one waits for it)
        data = prepare_data(config)
        if group.chief or config.output.resume:  # process 0 writes the run folder
            check_run_folder(config, data)
    check_same_processes(group, config, data)
    if config.hardware.batch_size == AUTO_BATCH:  # measured before anything is written
        kept = kept_layout(config, data).nbytes if config.data.cache == "device" else 0
        choice = choose_batch_size(config, data, max(1, config.hardware.gpus,
                                                     config.hardware.cpu_replicas), kept)
        logger.log(NOTICE, "%s", choice.describe())
        config = config.replaced(batch_size=choice.batch)
    with group.agreed():
        placement = pick_strategy(config, len(data.records),
                                  num_val_records=len(data.val_records))
        pick_pipeline(config, placement)  # a pipeline that cannot feed this run: refused before writing
        check_image_cache(config, data, placement)  # its size printed; a RAM cache that cannot fit refused
        # after the strategy: decoding runs TensorFlow ops, and a multi-worker strategy must
        # configure its collectives before TensorFlow's runtime starts
        check_images_up_front([r.path for r in data.records + data.val_records],
                              progress=bool(config.output.verbose))
    body, template, skipped = build_models(config, data, placement)
    run = prepare_output(config, data, placement.task)  # everything checked: now write
    try:
        result = _in_run_folder(config, data, placement, body, template, skipped, run,
                                user_callbacks)
    finally:
        if run.private:  # this process's own temporary folder (process 0 wrote the run's)
            shutil.rmtree(run.write_dir, ignore_errors=True)
    if run.private:
        result.final_model = result.final_weights = ""
        result.message = (f"process {placement.group.index} of {placement.group.count}: done; "
                          f"process 0 wrote the run folder {run.output}")
    return result


def check_same_processes(group: ProcessGroup, config: TrainConfig, data: TrainData) -> None:
    """Refuse, before the first step, a run whose processes were started with other settings or
    other data (:func:`yolo3.training.jax_cluster.check_same_settings`): every setting but the
    per-process ones and the paths (each machine may mount the data elsewhere), and the classes,
    the image counts and the anchors."""
    if not group.several:
        return
    per_process = {"process_id", "verbose", "output_dir", "annotations", "val_annotations",
                   "classes", "data_file", "weights", "coordinator", "cluster_timeout"}
    settings = {k: v for k, v in config.settings().items() if k not in per_process}
    settings.update(classes=list(data.class_names), training_images=len(data.records),
                    validation_images=len(data.val_records),
                    anchors=None if data.anchors is None else np.round(
                        np.asarray(data.anchors, np.float64), 3).tolist())
    try:
        check_same_settings(group, settings)
    except SettingError as e:
        raise ConfigError(str(e), *e.settings) from None


def _in_run_folder(config: TrainConfig, data: TrainData, placement: Placement,
                   body: keras.Model, template: keras.Model, skipped: List[Tuple[str, str]],
                   run: RunFolder, user_callbacks: List[keras.callbacks.Callback]) -> TrainResult:
    with run.folder:  # the manifest settled however the run ends
        summary = run_summary(config, data)
        if run.chief:  # what the report shows of the run: its settings and data
            run.folder.write_text("run.json", json.dumps(summary, indent=1))
        tracker = start_tracker(config, run, summary)
        try:
            result = _run(config, data, placement, body, template, skipped, run,
                          for_template(user_callbacks, template), tracker)
        except BaseException as e:
            if tracker is not None:
                tracker.finish([], "killed" if isinstance(e, KeyboardInterrupt) else "failed")
            raise
        if tracker is not None:
            tracker.finish(run_artifacts(run.write_dir, result.final_model or None),
                           "failed" if result.stopped_on_nan else "finished")
        return result


def start_tracker(config: TrainConfig, run: RunFolder, summary: dict) -> Optional[Tracker]:
    """The run's experiment tracker (the chief's; None without one), started: the same tracker
    run as before when resuming (``tracker.json``), a new one with the settings otherwise."""
    if not run.chief:
        return None
    tracker = make_tracker(config.output.tracker, run.output.name, run.output)
    if tracker is None:
        return None
    previous = None
    if config.output.resume and (run.write_dir / TRACKER_FILE).is_file():
        kept = read_json(run.write_dir / TRACKER_FILE, "tracker")
        if isinstance(kept, dict) and kept.get("tracker") == tracker.kind:
            previous = kept.get("run_id")
    tracker.start(flat_parameters(summary), resume_id=previous)
    if tracker.run_id is not None and tracker.run_id != previous:
        run.folder.write_text(TRACKER_FILE, json.dumps(
            {"tracker": tracker.kind, "run_id": tracker.run_id, "where": tracker.where}))
    return tracker


def _run(config: TrainConfig, data: TrainData, placement: Placement, body: keras.Model,
         template: keras.Model, skipped: List[Tuple[str, str]], run: RunFolder,
         user_callbacks: List[ForTemplate], tracker: Optional[Tracker]) -> TrainResult:
    state, start_epoch, best = restore_state(config, run, template)
    datasets = make_datasets(config, data, placement, start_epoch)
    feed = device_feed(config, placement, datasets, progress=bool(config.output.verbose))
    bn_images = batch_norm_images(config, data, placement.group)
    info = data.info()
    nan_stop = StopOnNaN()
    every = eval_interval(config, data)
    evaluation = early_stop = None
    if every:
        evaluation = MapEvaluation(body, info, data.val_records, every=every,
                                   batch_size=config.hardware.batch_size,
                                   verbose=config.output.verbose,
                                   logs_dir=run.write_dir / "logs" if run.chief else None,
                                   evaluate=run.chief or placement.group.several,
                                   share=sharing(placement), slicing=data.slicing,
                                   group=placement.group)
        if config.schedule.patience:
            early_stop = EarlyStopOnPlateau(config.schedule.patience, "mAP50_95", best=best,
                                            verbose=config.output.verbose)
    checkpoint = TemplateCheckpoint(body, run.folder, template=template, best=best,
                                    verbose=config.output.verbose, info=info,
                                    monitor="mAP50_95" if every else "val_loss",
                                    mode="max" if every else "min", ema=config.recipe.ema)
    pictures, drawing = None, 0.0
    if run.chief and config.output.pictures:
        plots = plots_wanted(True)
        if start_epoch == 0:  # a resumed run has them already
            drawing = draw_start(run.folder, data.records, data.class_names, data.input_hw,
                       first_batches(config, data, placement),
                       anchors=data.head.anchor_sizes(), strides=data.spec.strides,
                       plots=plots)
        if evaluation is not None:
            pictures = RunPictures(run.folder, evaluation, checkpoint, data.class_names, plots)
    try:
        history = _fit_stages(config, data, placement, body, template, run, datasets,
                              feed, user_callbacks, tracker, state, start_epoch,
                              checkpoint, nan_stop, evaluation, early_stop, bn_images, pictures)
    finally:  # the feed's threads end with the run
        for dataset in datasets:
            getattr(dataset, "close", lambda: None)()
    final_model, final_weights = finish(run, body, info, nan_stop)
    if final_model is None:
        nan_stop.stopped = True
        nan_stop.message = (f"{nan_stop.message or 'the weights are not finite numbers'}; no "
                            f"good checkpoint exists, so no final model was written in {run.output}")
    if evaluation is not None and checkpoint.best > -math.inf and config.output.verbose:
        logger.log(NOTICE, "best validation mAP@0.5:0.95 %.4f (%s)", checkpoint.best,
                   run.output / "best.keras")
    if evaluation is not None and run.chief and evaluation.last is not None:
        found: dict = {}
        run.folder.write_tree("diagnostics", lambda tmp: found.update(
            best=evaluation.write_diagnostics(tmp)))
        best_f1 = found.get("best")
        if best_f1 is not None:
            logger.log(NOTICE, "epoch %d on the validation set: best F1 %.4f at confidence %.3f "
                       "(precision %.4f, recall %.4f); confusion matrix and curves in %s",
                       best_f1["epoch"], best_f1["f1"], best_f1["confidence"],
                       best_f1["precision"], best_f1["recall"], run.output / "diagnostics")
    if run.chief:
        start = time.perf_counter()
        run.folder.write_text(REPORT, run_report(str(run.write_dir)))
        drawing += time.perf_counter() - start + (pictures.seconds if pictures else 0.0)
        logger.info("pictures and the report took %.1f s", drawing)
        logger.log(NOTICE, "report: %s", run.output / REPORT)
    return TrainResult(str(run.output), str(final_model or ""), str(final_weights or ""), history,
                       completed_epochs(run.write_dir / "history.csv"), nan_stop.stopped,
                       nan_stop.message, skipped)


def _fit_stages(config: TrainConfig, data: TrainData, placement: Placement, body: keras.Model,
                template: keras.Model, run: RunFolder, datasets: Tuple[Any, Any],
                feed: Optional[Callable[[keras.Model], keras.Model]],
                user_callbacks: List[ForTemplate],
                tracker: Optional[Tracker], state, start_epoch: int, checkpoint, nan_stop,
                evaluation, early_stop, bn_images, pictures) -> Dict[str, List[float]]:
    """Each stage fitted in turn (its callbacks fresh); the history of them all."""
    history: Dict[str, List[float]] = {}
    for i, stage in enumerate(stages(config, start_epoch)):
        if i:  # made for the first stage's first epoch: each epoch is planned by its own number
            datasets = datasets_from(config, data, placement, datasets, stage.first)
        # fresh per-stage callbacks (each stage has its own optimiser); the stateful ones shared
        statistics = (PreciseBatchNorm(BatchNormStatistics(body, bn_images, placement.group))
                      if bn_images is not None else None)  # per stage: frozen layers differ
        callbacks = stage_callbacks(config, run, checkpoint, nan_stop, evaluation, early_stop,
                                    statistics, pictures)
        callbacks += [TrackerCallback(tracker)] if tracker is not None else []
        callbacks += user_callbacks  # last: they see what yolo3's own have done
        try:
            stage_history = run_stage(stage, config, body, template, placement, datasets,
                                      callbacks, start_epoch, state, feed)
        except ImageDecodeFailed as e:
            raise CommandFailed(name_undecodable(
                [r.path for r in data.records + data.val_records], str(e), check_args(config),
                bool(config.output.verbose))) from None
        except Exception as e:
            lost = lost_process(e, placement.group)
            if lost is not None:
                raise lost from None
            if not is_out_of_memory(e):
                raise
            kept = completed_epochs(run.write_dir / "history.csv")
            last = run.output / "last.keras"
            raise TrainingOutOfMemory(out_of_memory_message(
                int(config.hardware.batch_size), placement.replicas, kept + 1,
                str(last) if kept and last.is_file() else None, kept)) from None
        for k, v in stage_history.items():
            history.setdefault(k, []).extend(v)
        if (nan_stop.stopped or (early_stop is not None and early_stop.stopped_epoch is not None)
                or any(c.stopped for c in user_callbacks)):
            break
    return history
