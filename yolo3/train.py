"""Training: two stages (heads only, then all layers), optimiser and schedule, checkpoints, logging.

:func:`train` takes a :class:`TrainConfig` (the CLI ``yolo3 train`` / ``train_multi_gpu.py`` is a
thin parser over it) and runs a short sequence of named steps, each testable alone:
:func:`prepare_data` (classes, anchors, records, validation split), :func:`check_run_folder`
(output kind, resume state), :func:`pick_strategy` (devices, replicas, global batch), a full
decode of every image, :func:`build_models` (body, training template, initial weights): all
checks, nothing written yet; then :func:`prepare_output` (folders, side files),
:func:`restore_state` (resume), :func:`make_datasets`, :func:`run_stage` per stage and
:func:`finish`.

Layers are frozen by name: stage 1 trains every layer whose name does not start with
``backbone_``; stage 2 trains all. ``epochs`` is the total epoch count (stage 2 runs epochs
``freeze_epochs .. epochs``). Outputs go to ``config.output`` (see :class:`TrainResult`).

The recipe (optimiser, weight decay, EMA, precision, XLA, evaluation interval) is decided in
:mod:`yolo3.recipe`. With evaluation on (``eval_every``), the validation set's COCO mAP is
computed after each evaluated epoch by the chief, with the averaged (EMA) weights, and ``best.*``
is the checkpoint of the best mAP@0.5:0.95; without it, of the lowest validation loss.
"""
from __future__ import annotations

import json
import logging
import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

import keras
import numpy as np
import tensorflow as tf

from yolo3.anchors import read_anchors, read_classes, write_anchors, write_classes
from yolo3.architectures import BACKBONE_PREFIX
from yolo3.bn_statistics import BatchNormStatistics
from yolo3.bodies import build_spec_body, output_layer_names
from yolo3.callbacks import (EarlyStopOnPlateau, EmaAfterBackupRestore, EpochClock, MapEvaluation,
                             PreciseBatchNorm, StopOnNaN, TemplateCheckpoint, float32_body,
                             load_resume_state, restore_resume_state)
from yolo3.data.annotations import scan_annotations
from yolo3.data.augment import AugmentConfig
from yolo3.data.pipeline import MultiScale, make_dataset
from yolo3.data.verify import verify_images
from yolo3.distribute import (ClusterTask, broadcast_from_chief, cluster_task, make_strategy,
                              prepare_fit, replica_devices)
from yolo3.errors import ArgumentError, CommandFailed, Yolo3Error
from yolo3.fileio import remove_stale_temporaries
from yolo3.history import completed_epochs, truncate_history
from yolo3.keras_compat import ExactSwapEMAWeights
from yolo3.log import NOTICE
from yolo3.loss import BOX_LOSSES, identity_loss, yolo_training_model
from yolo3.metadata import ModelInfo
from yolo3.parallel import multi_gpu_model
from yolo3.paths import check_output_dir
from yolo3.precision import TRAINING_PRECISIONS, resolve_training_precision
from yolo3.recipe import (JIT_CHOICES, OPTIMIZERS, auto_ema_momentum, auto_eval_every, dtype_policy,
                          learning_rate, make_optimizer, multi_scale_sizes, output_bias_priors,
                          use_jit)
from yolo3.saving import atomic_save_model, atomic_save_weights
from yolo3.schedules import WarmupCosine
from yolo3.specs import ModelSpec, get_spec
from yolo3.train_config import TrainConfig
from yolo3.weights import load_weights_by_name

logger = logging.getLogger(__name__)

__all__ = ["TrainConfig", "TrainResult", "WarmupCosine", "train", "set_stage_trainable",
           "validate_config", "ConfigError", "shard_by_data", "prepare_data", "prepare_output",
           "pick_strategy", "build_models", "check_run_folder", "restore_state", "make_datasets", "run_stage",
           "stages", "TrainData", "Placement", "RunFolder", "Stage", "eval_interval",
           "training_precision"]


class ConfigError(ArgumentError):
    """A training argument that cannot work (missing file, bad size, class ids beyond the list)."""


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


# ----------------------------------------------------------------------------------- the steps

@dataclass
class TrainData:
    """What the data step decides: the variant, classes, anchors, masks and the two record sets."""

    spec: ModelSpec
    class_names: List[str]
    anchors: np.ndarray
    masks: List[List[int]]
    records: list
    val_records: list

    @property
    def num_classes(self) -> int:
        return len(self.class_names)

    def info(self, input_size: int) -> ModelInfo:
        """The facts every saved body of this run carries."""
        return ModelInfo(anchors=self.anchors, masks=self.masks, num_classes=self.num_classes,
                         class_names=self.class_names, variant=self.spec.name,
                         input_size=(input_size, input_size))


@dataclass
class RunFolder:
    """Where this process writes: the output folder (chief) or its worker folder."""

    output: Path
    write_dir: Path
    chief: bool


@dataclass
class Placement:
    """Devices and strategy: ``devices`` for the replica wrapper, or a tf.distribute strategy."""

    strategy: Optional[tf.distribute.Strategy]
    devices: List[str]
    replicas: int
    global_batch: int
    steps: int
    task: ClusterTask

    def scope(self):
        """A fresh strategy scope (one cannot be entered twice), or a no-op without a strategy."""
        return self.strategy.scope() if self.strategy else _NullScope()

    @property
    def uses_wrapper(self) -> bool:
        return self.strategy is None and len(self.devices) >= 2


@dataclass(frozen=True)
class Stage:
    """Epochs ``first .. last - 1`` (absolute), with the backbone frozen or not."""

    first: int
    last: int
    frozen: bool


def _check_file(path: Optional[str], what: str) -> None:
    if path is not None and not os.path.exists(path):
        raise ConfigError(f"{what} not found: {path}")


def validate_config(config: TrainConfig) -> None:
    """Refuse arguments that cannot work, with a message naming the argument."""
    _check_file(config.annotations, "--annotations")
    _check_file(config.val_annotations, "--val-annotations")
    _check_file(config.classes, "--classes")
    _check_file(config.anchors, "--anchors")
    _check_file(config.weights, "--weights")
    try:
        spec = get_spec(config.model)
    except Yolo3Error as e:
        raise ConfigError(f"--model: {e}") from None
    try:
        spec.check_input_size(config.input_size)
    except Yolo3Error as e:
        raise ConfigError(f"--input-size: {e}") from None
    if config.max_boxes < 1:
        raise ConfigError(f"--max-boxes must be >= 1, got {config.max_boxes}")
    if config.batch_size < 1:
        raise ConfigError(f"--batch-size must be >= 1, got {config.batch_size}")
    if config.epochs < 1 or not 0 <= config.freeze_epochs <= config.epochs:
        raise ConfigError(f"need 0 <= --freeze-epochs ({config.freeze_epochs}) <= --epochs "
                          f"({config.epochs}) and --epochs >= 1")
    if not config.val_annotations and not 0 < config.val_split < 1:
        raise ConfigError(f"--val-split must be in (0, 1) without --val-annotations, got {config.val_split}")
    if config.lr is not None and config.lr <= 0:
        raise ConfigError(f"--lr must be positive, got {config.lr}")
    if config.schedule not in ("cosine", "plateau"):
        raise ConfigError(f"--schedule must be 'cosine' or 'plateau', got {config.schedule!r}")
    if config.gpus and config.cpu_replicas:
        raise ConfigError("give either --gpus or --cpu-replicas, not both")
    _validate_recipe(config, spec)


def _validate_recipe(config: TrainConfig, spec: ModelSpec) -> None:
    choices = [("--optimizer", config.optimizer, OPTIMIZERS), ("--box-loss", config.box_loss, BOX_LOSSES),
               ("--precision", config.precision, TRAINING_PRECISIONS), ("--jit", config.jit, JIT_CHOICES)]
    for flag, value, allowed in choices:
        if value not in allowed:
            raise ConfigError(f"{flag} must be one of {', '.join(allowed)}, got {value!r}")
    if config.weight_decay < 0:
        raise ConfigError(f"--weight-decay must be >= 0, got {config.weight_decay}")
    if config.bn_momentum is not None and not 0 <= config.bn_momentum < 1:
        raise ConfigError(f"--bn-momentum must be in [0, 1), got {config.bn_momentum}")
    if config.bn_stats_images < 0:
        raise ConfigError(f"--bn-stats-images must be >= 0, got {config.bn_stats_images}")
    if config.ema_momentum is not None and not 0 < config.ema_momentum < 1:
        raise ConfigError(f"--ema-momentum must be in (0, 1), got {config.ema_momentum}")
    if not 0 < config.assign_iou <= 1:
        raise ConfigError(f"--assign-iou must be in (0, 1], got {config.assign_iou}")
    if not 0 <= config.label_smoothing < 1:
        raise ConfigError(f"--label-smoothing must be in [0, 1), got {config.label_smoothing}")
    if not 0 <= config.mosaic <= 1:
        raise ConfigError(f"--mosaic must be a probability in [0, 1], got {config.mosaic}")
    if config.mosaic and config.augment == "none":
        raise ConfigError("--mosaic needs augmentation: it cannot go with --augment none")
    if config.multi_scale is not None:
        try:
            for size in multi_scale_sizes(*config.multi_scale):
                spec.check_input_size(size)
        except (ValueError, Yolo3Error) as e:
            raise ConfigError(f"--multi-scale: {e}") from None
        if config.multi_scale_every < 1:
            raise ConfigError(f"--multi-scale-every must be >= 1, got {config.multi_scale_every}")
    if config.eval_every is not None and config.eval_every < 0:
        raise ConfigError(f"--eval-every must be >= 0 (0: no evaluation), got {config.eval_every}")
    if config.patience < 0:
        raise ConfigError(f"--patience must be >= 0, got {config.patience}")
    if config.patience and config.eval_every == 0:
        raise ConfigError("--patience counts evaluations: it needs --eval-every above 0")


def _load_records(path: str, class_names: Sequence[str], strict: bool = False):
    """Records of an annotation file. Invalid boxes (no area, outside the image) are dropped with
    one warning each naming FILE:LINE and a summary line, unless ``strict`` (then they are errors)."""
    result = scan_annotations(path, class_names, strict=True, drop_invalid_boxes=not strict)
    for problem in result.dropped_boxes:
        logger.warning("%s (box dropped)", problem)
    if result.dropped_boxes:
        logger.warning("%s: %d invalid boxes dropped (strict refuses them instead)", path,
                       len(result.dropped_boxes))
    if result.clipped_boxes:
        logger.warning("%s: %d boxes extend past their image and were clipped", path,
                       result.clipped_boxes)
    records = result.records
    if not records:
        raise ConfigError(f"{path}: no annotated images")
    for r in records:
        boxes = np.asarray(r.boxes).reshape(-1, 5)
        if len(boxes) and (boxes[:, 4].max() >= len(class_names) or boxes[:, 4].min() < 0):
            raise ConfigError(f"{path}: {r.path} has class id {int(boxes[:, 4].max())} beyond the "
                              f"{len(class_names)} classes of the class list")
    return records


def prepare_data(config: TrainConfig) -> TrainData:
    """Classes, anchors (the variant's defaults without ``--anchors``), masks, and the training and
    validation records (``--val-annotations``, else a seeded ``--val-split`` of the annotations)."""
    spec = get_spec(config.model)
    class_names = read_classes(config.classes)
    anchors = read_anchors(config.anchors) if config.anchors else spec.default_anchors()
    try:
        masks = spec.default_masks(len(anchors))
    except ValueError as e:
        raise ConfigError(f"--anchors {config.anchors}: {e}") from None
    records = _load_records(config.annotations, class_names, config.strict)
    if config.val_annotations:
        val_records = _load_records(config.val_annotations, class_names, config.strict)
    else:
        order = np.random.default_rng(config.seed).permutation(len(records))
        n_val = max(1, int(round(len(records) * config.val_split)))
        if n_val >= len(records):
            raise ConfigError(f"{config.annotations}: {len(records)} images are too few for "
                              f"--val-split {config.val_split}")
        val_records = [records[i] for i in order[:n_val]]
        records = [records[i] for i in order[n_val:]]
    crowded = [r for r in records + val_records
               if len(np.asarray(r.boxes).reshape(-1, 5)) > config.max_boxes]
    if crowded:
        logger.warning("%d images have more than max_boxes=%d boxes (first: %s, %d); training "
                       "uses the first %d of each", len(crowded), config.max_boxes, crowded[0].path,
                       len(np.asarray(crowded[0].boxes).reshape(-1, 5)), config.max_boxes)
    return TrainData(spec, class_names, anchors, masks, records, val_records)


def _verify_decodable(records: list, verbose: int) -> None:
    """Every image decoded once by the pipeline's decoder before training (cached between runs):
    a bad file is named now, not met as a TensorFlow error mid-epoch."""
    failures = verify_images([r.path for r in records], progress=bool(verbose))
    if failures:
        shown = "\n  ".join(str(f) for f in failures[:10])
        more = f"\n  ... and {len(failures) - 10} more" if len(failures) > 10 else ""
        raise ConfigError(f"{len(failures)} images cannot be used for training (yolo3 check "
                          f"lists them all):\n  {shown}{more}")


def check_run_folder(config: TrainConfig, data: TrainData) -> None:
    """Refuse, before anything is written, an ``--output`` that is not a folder, and a ``--resume``
    whose run does not match (its ``resume.json`` unreadable, its classes, anchors or variant
    different). Without saved state, ``--resume`` says that it starts from the beginning."""
    out = Path(check_output_dir(config.output, "--output"))
    if not config.resume:
        return
    try:
        state = load_resume_state(out)
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise ConfigError(f"{out / 'resume.json'}: cannot resume: {e}") from None
    if state is None:
        logger.warning("resume: %s has no saved state (resume.json): training starts at epoch 1",
                       out)
        return
    expected = {"classes.txt": (read_classes, data.class_names, "class list"),
                "anchors.txt": (read_anchors, data.anchors, "anchors")}
    for name, (reader, ours, what) in expected.items():
        if not (out / name).exists():
            continue
        theirs = reader(out / name)
        same = (list(theirs) == list(ours) if name == "classes.txt" else
                np.shape(theirs) == np.shape(ours) and np.allclose(theirs, ours, atol=1e-2))
        if not same:
            raise ConfigError(f"{out / name}: --resume: the run was trained with a different "
                              f"{what} ({len(theirs)} entries) than the one given now "
                              f"({len(ours)} entries)")
    variant = state.get("variant")
    if variant is not None and variant != data.spec.name:
        raise ConfigError(f"{out / 'resume.json'}: --resume: the run trains {variant!r}, not "
                          f"--model {data.spec.name!r}")


def prepare_output(config: TrainConfig, data: TrainData, task: ClusterTask) -> RunFolder:
    """Make the output folder; non-chief workers of a cluster write to ``.worker-<i>/`` (same code
    path, nothing clobbered). Removes what a killed run half-wrote; the chief writes
    ``anchors.txt`` and ``classes.txt``."""
    out = Path(config.output)
    write_dir = out if task.is_chief else out / f".worker-{task.index}"
    write_dir.mkdir(parents=True, exist_ok=True)
    remove_stale_temporaries(write_dir)
    if task.is_chief:
        write_anchors(out / "anchors.txt", data.anchors)
        write_classes(out / "classes.txt", data.class_names)
    return RunFolder(out, write_dir, task.is_chief)


def pick_strategy(config: TrainConfig, num_records: int, task: Optional[ClusterTask] = None
                  ) -> Placement:
    """Replica devices and strategy; the global batch (per-replica batch x replicas) and the steps
    per epoch. With ``cpu_replicas`` the logical CPU devices must already exist (the CLI makes them
    first thing: :func:`yolo3.distribute.configure_logical_cpus`)."""
    devices = replica_devices(config.gpus or None, config.cpu_replicas or None)
    strategy = make_strategy(config.strategy, devices if config.strategy == "mirrored" else None)
    replicas = strategy.num_replicas_in_sync if strategy else max(1, len(devices))
    global_batch = config.batch_size * replicas
    if num_records < global_batch:
        raise ConfigError(f"--batch-size {config.batch_size}: the {num_records} training images "
                          f"of {config.annotations} are fewer than one global batch "
                          f"({config.batch_size} x {replicas} replicas)")
    steps = config.steps_per_epoch or num_records // global_batch
    if config.strategy != "wrapper":
        devices = []
    return Placement(strategy, devices, replicas, global_batch, steps, task or cluster_task())


def build_models(config: TrainConfig, data: TrainData, placement: Placement
                 ) -> Tuple[keras.Model, keras.Model, List[Tuple[str, str]]]:
    """``(body, template, skipped layers)``: the body and its training model (output: the loss,
    ground truth padded to ``max_boxes`` so every shape is static), in the strategy's scope and the
    current Keras dtype policy, with ``--weights`` loaded by name (skipped layers listed). With
    ``multi_scale`` the body takes any input size."""
    side = None if config.multi_scale else config.input_size
    with placement.scope():
        body = build_spec_body(data.spec, data.num_classes, len(data.masks[0]), (side, side))
        template = yolo_training_model(body, data.anchors, data.num_classes,
                                       anchor_mask=data.masks, box_loss=config.box_loss,
                                       label_smoothing=config.label_smoothing,
                                       max_boxes=config.max_boxes)
    skipped: List[Tuple[str, str]] = []
    loaded = set()
    if config.weights:
        report = load_weights_by_name(body, config.weights, model_type=data.spec.name)
        skipped, loaded = report.skipped, set(report.loaded)
    if config.prior_bias:
        _initialise_output_priors(body, data, config.input_size, keep=loaded)
    if config.bn_momentum is not None:
        for layer in body.layers:
            if isinstance(layer, keras.layers.BatchNormalization):
                layer.momentum = float(config.bn_momentum)
    return body, template, skipped


def _initialise_output_priors(body: keras.Model, data: TrainData, input_size: int, keep=()) -> None:
    """Set the bias of every output convolution not in ``keep`` (loaded from weights) to the
    priors of :func:`yolo3.recipe.output_bias_priors` (objects per image from the training set)."""
    per_image = float(np.mean([len(np.asarray(r.boxes).reshape(-1, 5)) for r in data.records]))
    for name, stride, mask in zip(output_layer_names(body), data.spec.strides, data.masks):
        if name in keep:
            continue
        layer = body.get_layer(name)
        kernel, _ = layer.get_weights()
        bias = output_bias_priors(len(mask), data.num_classes, (input_size // stride) ** 2,
                                  len(data.masks), per_image)
        layer.set_weights([kernel, bias])


def restore_state(config: TrainConfig, run: RunFolder, template: keras.Model):
    """``(state, start epoch, best)``: with ``--resume`` the chief's last complete state (one epoch
    for all workers), its weights loaded into ``template``; history rows of epochs that will be
    trained again are dropped (multi-worker runs: from the BackupAndRestore epoch)."""
    state = load_resume_state(run.output) if config.resume else None
    start_epoch = int(state["epoch"]) if state else 0
    best = state.get("best") if state else None
    if state:
        logger.log(NOTICE, "resuming from %s after epoch %d", state["path"], start_epoch)
        template.load_weights(os.path.join(state["path"], "model.weights.h5"))
    if config.resume:
        truncate_history(run.write_dir / "history.csv", start_epoch)
    elif config.strategy == "multiworker" and (run.write_dir / "backup").exists():
        truncate_history(run.write_dir / "history.csv", _backup_epoch(run.write_dir / "backup"))
    return state, start_epoch, best


def shard_by_data(dataset: tf.data.Dataset) -> tf.data.Dataset:
    """Let a tf.distribute strategy split each global batch between workers and replicas.

    Every worker reads the same (seeded) stream; the DATA policy hands worker ``i`` its slice of
    each global batch, so N workers x B/N images see exactly the batches of one process x B.
    """
    options = tf.data.Options()
    options.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.DATA
    return dataset.with_options(options)


def make_datasets(config: TrainConfig, data: TrainData, placement: Placement
                  ) -> Tuple[tf.data.Dataset, tf.data.Dataset]:
    """Training (augmented, shuffled, mosaic and multi-scale as configured) and validation
    (letterboxed at ``input_size``) batches of the global batch, with the padded boxes last."""
    import dataclasses

    size = (config.input_size, config.input_size)
    augment = AugmentConfig.preset(config.augment)
    if augment is not None and config.mosaic:
        augment = dataclasses.replace(augment, mosaic=config.mosaic)
    multi_scale = None
    if config.multi_scale:
        multi_scale = MultiScale(tuple((s, s) for s in multi_scale_sizes(*config.multi_scale)),
                                 config.multi_scale_every)

    def dataset(records, training: bool) -> tf.data.Dataset:
        return make_dataset(records, size, data.anchors, data.num_classes, placement.global_batch,
                            training=training, anchor_mask=data.masks, max_boxes=config.max_boxes,
                            seed=config.seed, augment=augment if training else None,
                            multi_scale=multi_scale if training else None, true_boxes=True,
                            assign_iou=config.assign_iou)

    train_ds, val_ds = dataset(data.records, True), dataset(data.val_records, False)
    if config.steps_per_epoch:
        train_ds = train_ds.repeat()
    if placement.strategy is not None:
        train_ds, val_ds = shard_by_data(train_ds), shard_by_data(val_ds)
    return train_ds, val_ds


def batch_norm_images(config: TrainConfig, data: TrainData) -> Optional[tf.data.Dataset]:
    """The training images (``bn_stats_images`` of them, a seeded choice, letterboxed at the input
    size, no augmentation, decoded once and cached) over which the batch-norm statistics are
    recomputed; None when ``bn_stats_images`` is 0."""
    count = min(int(config.bn_stats_images), len(data.records))
    if count <= 0:
        return None
    order = np.random.default_rng(config.seed).permutation(len(data.records))[:count]
    records = [data.records[i] for i in sorted(order)]
    size = (config.input_size, config.input_size)
    return make_dataset(records, size, data.anchors, data.num_classes, min(16, count),
                        training=False, anchor_mask=data.masks, max_boxes=config.max_boxes,
                        seed=config.seed, augment=None, targets=False, cache=True)


def set_stage_trainable(body: keras.Model, freeze_backbone: bool, freeze_bn: bool = False) -> int:
    """Freeze (or unfreeze) the ``backbone_*`` layers by name; returns the number frozen.

    ``freeze_bn`` also freezes every BatchNormalization layer, which Keras then runs in inference
    mode (moving statistics, no update): small per-replica batches no longer give noisy statistics,
    and N replicas x B/N images take exactly the step of one device x B images.
    """
    frozen = 0
    for layer in body.layers:
        freeze = (freeze_backbone and layer.name.startswith(BACKBONE_PREFIX)) or (
            freeze_bn and isinstance(layer, keras.layers.BatchNormalization))
        layer.trainable = not freeze
        frozen += int(freeze and bool(layer.weights))
    return frozen


def stages(config: TrainConfig, start_epoch: int) -> List[Stage]:
    """The stages still to run after ``start_epoch`` completed epochs."""
    planned = [Stage(0, config.freeze_epochs, True), Stage(config.freeze_epochs, config.epochs, False)]
    return [s for s in planned if s.last > s.first and s.last > start_epoch]


def _optimizer(config: TrainConfig, steps: int, stage_epochs: int) -> keras.optimizers.Optimizer:
    """The stage's optimiser: its schedule over the stage, weight decay and EMA (momentum from the
    whole run's length unless given)."""
    lr = learning_rate(config.optimizer, config.lr)
    if config.schedule == "cosine":
        total = max(1, steps * stage_epochs)
        warm = int(round(config.warmup_epochs * steps))
        lr = WarmupCosine(lr, total, min(warm, total - 1))
    momentum = config.ema_momentum or auto_ema_momentum(steps * config.epochs)
    return make_optimizer(config.optimizer, lr, config.weight_decay, config.ema, momentum)


def eval_interval(config: TrainConfig, data: TrainData) -> int:
    """Epochs between two mAP evaluations (0: none): ``eval_every``, or the automatic interval."""
    if config.eval_every is not None:
        return int(config.eval_every)
    return auto_eval_every(len(data.val_records), len(data.records))


def _callbacks(config: TrainConfig, run: RunFolder, checkpoint: TemplateCheckpoint,
               nan_stop: StopOnNaN, evaluation: Optional[keras.callbacks.Callback] = None,
               early_stop: Optional[keras.callbacks.Callback] = None,
               bn_statistics: Optional[keras.callbacks.Callback] = None) -> list:
    # Order matters. SwapEMAWeights first: at an epoch's end the model then holds the averaged
    # weights, which evaluation, the history row and the checkpoints see. PreciseBatchNorm next:
    # the batch norms get statistics of those weights (also for fit's validation loss). The history row before
    # the checkpoint: a crash between them repeats the epoch (its row is dropped on resume)
    # instead of leaving a gap in history.csv.
    callbacks: list = [EpochClock(), nan_stop]
    if config.ema:
        callbacks.append(ExactSwapEMAWeights(swap_on_epoch=True))
    if bn_statistics is not None:
        callbacks.append(bn_statistics)
    if evaluation is not None:
        callbacks.append(evaluation)
    callbacks += [keras.callbacks.CSVLogger(str(run.write_dir / "history.csv"), append=True),
                  checkpoint]
    if early_stop is not None:
        callbacks.append(early_stop)
    if _has_tensorboard():
        callbacks.append(keras.callbacks.TensorBoard(str(run.write_dir / "logs")))
    elif config.verbose:
        logger.warning("TensorBoard is not installed (pip install tensorboard): no logs/ written")
    if config.schedule == "plateau":
        callbacks.append(keras.callbacks.ReduceLROnPlateau(patience=2, verbose=config.verbose))
    if config.strategy == "multiworker":
        # one folder per worker: Keras 3 writes the backup on every worker (HDF5 locks clash)
        callbacks.append(keras.callbacks.BackupAndRestore(str(run.write_dir / "backup")))
        if config.ema:
            callbacks.append(EmaAfterBackupRestore(run.write_dir / "backup"))
    return callbacks


def run_stage(stage: Stage, config: TrainConfig, body: keras.Model, template: keras.Model,
              placement: Placement, datasets: Tuple[tf.data.Dataset, tf.data.Dataset],
              callbacks: list, start_epoch: int = 0, state=None) -> Dict[str, List[float]]:
    """Compile and fit one stage (the wrapper over ``placement.devices``, a strategy, or the
    template itself); restores the optimiser of ``state`` when resuming inside this stage.
    Returns the stage's Keras history."""
    train_ds, val_ds = datasets
    with placement.scope():
        frozen_count = set_stage_trainable(body, stage.frozen, config.freeze_bn)
        model = (multi_gpu_model(template, devices=placement.devices) if placement.uses_wrapper
                 else template)
        optimizer = _optimizer(config, placement.steps, stage.last - stage.first)
        model.compile(optimizer=optimizer, loss=identity_loss,
                      jit_compile=_jit(config, placement))
    prepare_fit(model, train_ds, placement.strategy)
    name = (f"1 (heads only, {frozen_count} layers frozen)" if stage.frozen else "2 (all layers)")
    logger.log(NOTICE, "stage %s: epochs %d..%d, %d replica(s), global batch %d, %d steps/epoch, "
               "%s lr %g (%s), %s, %s%s", name, max(stage.first, start_epoch) + 1, stage.last,
               placement.replicas, placement.global_batch, placement.steps, config.optimizer,
               learning_rate(config.optimizer, config.lr), config.schedule, config.strategy,
               keras.config.dtype_policy().name, ", XLA" if model.jit_compile else "")
    if state and start_epoch > stage.first:
        with placement.scope():
            restore_resume_state(state, template, optimizer, model.trainable_variables)
    try:
        history = model.fit(train_ds, validation_data=val_ds, epochs=stage.last,
                            initial_epoch=max(stage.first, start_epoch),
                            steps_per_epoch=placement.steps if config.steps_per_epoch else None,
                            validation_steps=config.validation_steps, callbacks=callbacks,
                            shuffle=False,  # the tf.data pipeline shuffles (seeded) itself
                            verbose=config.verbose)
    except tf.errors.InvalidArgumentError as e:
        if not any(word in str(e) for word in ("image", "JPEG", "PNG", "decode", "Decode")):
            raise
        reason = next((line for line in str(e).splitlines() if "image" in line or "JPEG" in line
                       or "PNG" in line), str(e).splitlines()[0])
        raise CommandFailed(f"an image could not be decoded during training although every image "
                            f"decoded when it started (did a file change?); 'yolo3 check "
                            f"--annotations {config.annotations}' names it. TensorFlow: "
                            f"{reason.strip()}") from None
    return {k: [float(x) for x in v] for k, v in history.history.items()}


def finish(run: RunFolder, body: keras.Model, info: ModelInfo, nan_stop: StopOnNaN
           ) -> Tuple[Optional[Path], Optional[Path]]:
    """Save the final body: ``final.weights.h5`` in the write folder (non-chief workers: their own
    copy, to compare) and ``final.keras`` (chief). After a NaN stop the last good checkpoint is the
    result; with none, or whenever the weights are not finite, nothing is written: ``(None, None)``."""
    last_ok = run.write_dir / "last.weights.h5"
    if nan_stop.stopped and last_ok.exists():
        body.load_weights(str(last_ok))
    if (nan_stop.stopped and not last_ok.exists()) or not weights_finite(body):
        return None, None
    final_model, final_weights = run.output / "final.keras", run.output / "final.weights.h5"
    atomic_save_weights(body, run.write_dir / "final.weights.h5")
    if run.chief:
        atomic_save_model(float32_body(body), final_model, info)
    return final_model, final_weights


def weights_finite(model: keras.Model) -> bool:
    """True when every weight of ``model`` is a finite number."""
    return all(np.isfinite(w).all() for w in model.get_weights())


def train(config: TrainConfig) -> TrainResult:
    """Train as configured; returns the written paths and the loss history. The Keras dtype
    policy of ``precision`` holds while training and is restored afterwards."""
    validate_config(config)
    with dtype_policy(training_precision(config)):
        return _train(config)


def training_precision(config: TrainConfig) -> str:
    """The dtype policy ``config.precision`` means on this machine (see
    :func:`yolo3.precision.resolve_training_precision`): GPUs count when ``gpus`` asks for them."""
    return resolve_training_precision(config.precision, gpu=_on_gpu(config))


def _on_gpu(config: TrainConfig) -> bool:
    if config.cpu_replicas:
        return False
    return bool(tf.config.list_physical_devices("GPU"))


def _jit(config: TrainConfig, placement: Placement) -> bool:
    """XLA for the step: never for the replica wrapper (it keeps its per-device placement)."""
    return use_jit(config.jit, _on_gpu(config)) and not placement.uses_wrapper


def _train(config: TrainConfig) -> TrainResult:
    keras.utils.set_random_seed(config.seed)
    data = prepare_data(config)
    check_run_folder(config, data)
    placement = pick_strategy(config, len(data.records))
    # after the strategy: decoding runs TensorFlow ops, and a multi-worker strategy must configure
    # its collectives before TensorFlow's runtime starts
    _verify_decodable(data.records + data.val_records, config.verbose)
    body, template, skipped = build_models(config, data, placement)
    run = prepare_output(config, data, placement.task)  # everything checked: now write
    state, start_epoch, best = restore_state(config, run, template)
    datasets = make_datasets(config, data, placement)
    bn_images = batch_norm_images(config, data)
    info = data.info(config.input_size)
    nan_stop = StopOnNaN()
    every = eval_interval(config, data)
    evaluation = early_stop = None
    if every:
        evaluation = MapEvaluation(body, info, data.val_records, every=every,
                                   batch_size=config.batch_size, verbose=config.verbose,
                                   logs_dir=run.write_dir / "logs" if run.chief else None,
                                   evaluate=run.chief, share=_sharing(placement))
        if config.patience:
            early_stop = EarlyStopOnPlateau(config.patience, "mAP50_95", best=best,
                                            verbose=config.verbose)
    checkpoint = TemplateCheckpoint(body, run.write_dir, template=template, best=best,
                                    verbose=config.verbose, info=info,
                                    monitor="mAP50_95" if every else "val_loss",
                                    mode="max" if every else "min", ema=config.ema)
    history: Dict[str, List[float]] = {}
    for stage in stages(config, start_epoch):
        # fresh per-stage callbacks (each stage has its own optimiser); the stateful ones shared
        statistics = (PreciseBatchNorm(BatchNormStatistics(body, bn_images))
                      if bn_images is not None else None)  # per stage: frozen layers differ
        callbacks = _callbacks(config, run, checkpoint, nan_stop, evaluation, early_stop,
                               statistics)
        for k, v in run_stage(stage, config, body, template, placement, datasets, callbacks,
                              start_epoch, state).items():
            history.setdefault(k, []).extend(v)
        if nan_stop.stopped or (early_stop is not None and early_stop.stopped_epoch is not None):
            break
    final_model, final_weights = finish(run, body, info, nan_stop)
    if final_model is None:
        nan_stop.stopped = True
        nan_stop.message = (f"{nan_stop.message or 'the weights are not finite numbers'}; no "
                            f"good checkpoint exists, so no final model was written in {run.output}")
    if evaluation is not None and checkpoint.best > -math.inf and config.verbose:
        logger.log(NOTICE, "best validation mAP@0.5:0.95 %.4f (%s)", checkpoint.best,
                   run.output / "best.keras")
    return TrainResult(str(run.output), str(final_model or ""), str(final_weights or ""), history,
                       completed_epochs(run.write_dir / "history.csv"), nan_stop.stopped,
                       nan_stop.message, skipped)


def _sharing(placement: Placement):
    """How non-chief workers learn the chief's figures: an all-reduce over the multi-worker
    strategy (so early stopping decides alike everywhere); None in a single process."""
    if placement.strategy is None or placement.task.num_workers <= 1:
        return None
    return lambda values: broadcast_from_chief(placement.strategy, values, placement.task.is_chief)


def _backup_epoch(backup_dir: Path) -> int:
    """Epochs completed according to a Keras BackupAndRestore folder (0 when it has none)."""
    try:
        return int(json.loads((backup_dir / "training_metadata.json").read_text())["epoch"])
    except (OSError, ValueError, KeyError):
        return 0


class _NullScope:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def _has_tensorboard() -> bool:
    import importlib.util
    return importlib.util.find_spec("tensorboard") is not None
