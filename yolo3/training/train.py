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
``freeze_epochs .. epochs``). Outputs go to ``config.output.output_dir`` (see :class:`TrainResult`).

The recipe (optimiser, weight decay, EMA, precision, XLA, evaluation interval) is decided in
:mod:`yolo3.training.recipe`. With evaluation on (``eval_every``), the validation set's COCO mAP is
computed after each evaluated epoch by the chief, with the averaged (EMA) weights, and ``best.*``
is the checkpoint of the best mAP@0.5:0.95; without it, of the lowest validation loss.
"""
from __future__ import annotations

import json
import logging
import math
import os
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Dict, List, Optional, Tuple

import keras
import numpy as np
import tensorflow as tf

from yolo3.checkpoint.metadata import ModelInfo
from yolo3.checkpoint.saving import atomic_save_model, atomic_save_weights
from yolo3.checkpoint.weights import load_weights_by_name
from yolo3.config.architectures import BACKBONE_PREFIX
from yolo3.config.choices import AUTO_ANCHORS
from yolo3.config.precision import resolve_training_precision
from yolo3.config.specs import ModelSpec, get_spec
from yolo3.config.train_config import Caution, DataSettings, TrainConfig, check
from yolo3.core.errors import CommandFailed, SettingError
from yolo3.core.fileio import remove_stale_temporaries
from yolo3.core.log import NOTICE
from yolo3.core.ownership import check_output_folder, claim
from yolo3.core.paths import check_output_dir
from yolo3.data.annotations import Sources, box_sizes, load_training_records, source_name
from yolo3.data.augment import AugmentConfig
from yolo3.data.class_names import fits_classes_file, read_classes, write_classes
from yolo3.data.pipeline import DatasetConfig, MultiScale, TargetEncoding, make_dataset
from yolo3.data.verify import check_decodable, listed, unchecked, verify_images
from yolo3.data.yolo_layout import read_data_file
from yolo3.modeling.anchor_free_loss import anchor_free_training_model
from yolo3.modeling.bodies import build_spec_body, output_layer_names, prediction_layer_names
from yolo3.modeling.keras_compat import ExactSwapEMAWeights
from yolo3.modeling.loss import identity_loss, yolo_training_model
from yolo3.modeling.schedules import WarmupCosine
from yolo3.ops.anchors import (
    BPR_THRESHOLD,
    anchor_fit,
    format_anchors,
    kmeans_anchors,
    read_anchors,
    write_anchors,
)
from yolo3.training.bn_statistics import BatchNormStatistics
from yolo3.training.callbacks import (
    EarlyStopOnPlateau,
    EmaAfterBackupRestore,
    EpochClock,
    MapEvaluation,
    PreciseBatchNorm,
    StopOnNaN,
    TemplateCheckpoint,
    float32_body,
)
from yolo3.training.distribute import (
    ClusterTask,
    broadcast_from_chief,
    cluster_task,
    make_strategy,
    prepare_fit,
    replica_devices,
)
from yolo3.training.history import completed_epochs, truncate_history
from yolo3.training.parallel import multi_gpu_model
from yolo3.training.recipe import (
    anchor_free_bias_priors,
    auto_ema_momentum,
    auto_eval_every,
    dtype_policy,
    learning_rate,
    make_optimizer,
    output_bias_priors,
    use_jit,
)
from yolo3.training.resume import check_resume_files, load_resume_state, restore_resume_state

logger = logging.getLogger(__name__)

# what a run folder holds (fnmatch patterns): claimed as yolo3's (yolo3.core.ownership) before the
# first write, and recognised in the run folders of yolo3 0.3 and earlier, which had no marker
RUN_FOLDER_ENTRIES = ("anchors.txt", "classes.txt", "history.csv", "logs", "resume.json",
                      "resume-[0-9]*", "final.keras", "final.weights.h5", "best.keras",
                      "best.weights.h5", "last.keras", "last.weights.h5", "backup", ".worker-*",
                      "diagnostics")

__all__ = ["RUN_FOLDER_ENTRIES", "TrainConfig", "TrainResult", "WarmupCosine", "train", "set_stage_trainable",
           "validate_config", "ConfigError", "shard_by_data", "prepare_data", "prepare_output",
           "pick_strategy", "build_models", "check_run_folder", "restore_state", "make_datasets", "run_stage",
           "stages", "TrainData", "Placement", "RunFolder", "Stage", "eval_interval", "data_sources",
           "training_precision"]


class ConfigError(SettingError):
    """A training setting that cannot work: a missing file, a bad size, class ids beyond the list,
    a run folder that does not match ``resume`` (``settings`` names the settings concerned)."""


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
    hw: Tuple[int, int]

    @property
    def num_classes(self) -> int:
        return len(self.class_names)

    def info(self) -> ModelInfo:
        """The facts every saved body of this run carries."""
        return ModelInfo(anchors=self.anchors, masks=self.masks, num_classes=self.num_classes,
                         class_names=self.class_names, variant=self.spec.name, input_size=self.hw,
                         head=self.spec.head)


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

    def describe(self, strategy: str) -> str:
        """How the replicas run, for the stage line: ``strategy`` (the setting) where it is in
        use, ``one device`` where nothing splits the batch."""
        return strategy if self.strategy is not None or self.uses_wrapper else "one device"


@dataclass(frozen=True)
class Stage:
    """Epochs ``first .. last - 1`` (absolute), with the backbone frozen or not."""

    first: int
    last: int
    frozen: bool


def validate_config(config: TrainConfig) -> List[Caution]:
    """Refuse settings that cannot work (:func:`yolo3.config.train_config.check`):
    :class:`ConfigError` naming them; returns the cautions of those that can."""
    try:
        return check(config)
    except SettingError as e:
        raise ConfigError(str(e), *e.settings) from None


def data_sources(settings: DataSettings) -> Tuple[List[str], Sources, Optional[Sources]]:
    """``(class names, training sources, validation sources or None)``: from ``data_file`` (its
    names unless ``classes`` is given, which must have as many), else from ``classes``,
    ``annotations`` and ``val_annotations``."""
    if not settings.data_file:
        return (read_classes(settings.classes), settings.annotations,
                settings.val_annotations or None)
    dataset = read_data_file(settings.data_file)
    names = dataset.names
    if settings.classes:
        names = read_classes(settings.classes)
        if len(names) != len(dataset.names):
            raise ConfigError(f"{settings.classes}: {len(names)} classes, but {dataset.path} "
                              f"names {len(dataset.names)}", "classes", "data_file")
    return names, dataset.sources("train"), dataset.sources("val")


def prepare_data(config: TrainConfig) -> TrainData:
    """Classes, records, anchors (the variant's defaults without ``anchors``) and masks; the
    validation records are ``val_annotations`` (or the data file's val split), else a seeded
    ``val_split`` of the annotations. An anchor-free variant has no anchors or masks (an
    ``anchors`` setting is not used: :func:`yolo3.config.train_config.cautions` says so)."""
    settings = config.data
    class_names, train_source, val_source = data_sources(settings)
    spec = get_spec(config.model.variant)
    auto = settings.anchors == AUTO_ANCHORS and not spec.anchor_free
    given = settings.anchors and not auto and not spec.anchor_free
    anchors = read_anchors(settings.anchors) if given else spec.default_anchors()
    try:  # before the records: reading them probes every image
        masks = [] if spec.anchor_free else spec.default_masks(len(anchors))
    except ValueError as e:
        raise ConfigError(f"anchors {settings.anchors}: {e}", "anchors") from None
    records = load_training_records(train_source, class_names, settings.strict)
    if val_source:
        val_records = load_training_records(val_source, class_names, settings.strict)
    else:
        order = np.random.default_rng(config.seed).permutation(len(records))
        n_val = max(1, int(round(len(records) * settings.val_split)))
        if n_val >= len(records):
            raise ConfigError(f"{source_name(train_source)}: {len(records)} images are too few for "
                              f"val_split {settings.val_split}", "val_split")
        val_records = [records[i] for i in order[:n_val]]
        records = [records[i] for i in order[n_val:]]
    counts = [len(np.asarray(r.boxes).reshape(-1, 5)) for r in records + val_records]
    crowded = [(r, n) for r, n in zip(records + val_records, counts) if n > settings.max_boxes]
    if crowded:
        logger.warning("%d images have more than max_boxes=%d boxes (first: %s, %d); training "
                       "uses the first %d of each", len(crowded), settings.max_boxes,
                       crowded[0][0].path, crowded[0][1], settings.max_boxes,
                       extra={"settings": ("max_boxes",)})
    hw = spec.check_input_size(config.model.input_size)
    if not spec.anchor_free:
        anchors = _anchors_for(records, anchors, auto, hw, config.seed)
    return TrainData(spec, class_names, anchors, masks, records, val_records, hw)


ANCHOR_SAMPLE = 20000  # training images whose boxes measure (and k-means fits) the anchors


def _anchors_for(records: list, anchors: np.ndarray, auto: bool, hw: Tuple[int, int], seed: int
                 ) -> np.ndarray:
    """The run's anchors: ``anchors``, or with ``auto`` as many computed by k-means on the training
    boxes letterboxed into the input ``hw`` (of at most ``ANCHOR_SAMPLE`` images, a seeded
    sample); logs how they fit those boxes (and warns when badly)."""
    if len(records) > ANCHOR_SAMPLE:  # a seeded sample measures as well, in a fraction of the time
        pick = np.random.default_rng(seed).choice(len(records), ANCHOR_SAMPLE, replace=False)
        records = [records[i] for i in np.sort(pick)]
    box_wh = box_sizes(records, hw)
    size = _size_text(hw)
    if auto:
        try:
            anchors, _ = kmeans_anchors(box_wh, len(anchors), seed=seed)
        except ValueError as e:
            raise ConfigError(f"anchors auto: {e}", "anchors") from None
        logger.log(NOTICE, "anchors (k-means on %d training boxes at %s): %s", len(box_wh),
                   size, format_anchors(anchors).strip())
    if not len(box_wh):
        return anchors
    fit = anchor_fit(box_wh, anchors)
    logger.log(NOTICE, "anchors fit the training boxes at %s: %s", size, fit)
    if not fit.fits:
        logger.warning("the anchors fit the training boxes badly (best possible recall %.3f < "
                       "%.2f): anchors auto computes anchors for them (or yolo3 kmeans, with "
                       "--input-size %d %d --clusters %d)", fit.best_possible_recall,
                       BPR_THRESHOLD, hw[0], hw[1], len(anchors))
    return anchors


def check_run_folder(config: TrainConfig, data: TrainData) -> None:
    """Refuse, before anything is written, an ``output_dir`` that is not a folder, one that holds
    files yolo3 did not write (unless ``exist_ok``, and never one of a run's names:
    :data:`RUN_FOLDER_ENTRIES`), and a ``resume`` whose run does not match (its ``resume.json``
    unreadable, its classes, anchors or variant different). A folder with saved state, resumed,
    is the user's word that it is a run folder. Without saved state, ``resume`` says that it
    starts from the beginning."""
    out = Path(check_output_dir(config.output.output_dir, "output_dir"))
    if not (config.output.resume and (out / "resume.json").exists()):
        check_output_folder(out, "output_dir", config.output.exist_ok, RUN_FOLDER_ENTRIES,
                            own_patterns=RUN_FOLDER_ENTRIES)
    if not config.output.resume:
        return
    try:
        state = load_resume_state(out)
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise ConfigError(f"{out / 'resume.json'}: cannot resume: {e}", "resume") from None
    if state is not None:
        check_resume_files(state)
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
            raise ConfigError(f"{out / name}: resume: the run was trained with a different "
                              f"{what} ({len(theirs)} entries) than the one given now "
                              f"({len(ours)} entries)", "resume")
    variant = state.get("variant")
    if variant is not None and variant != data.spec.name:
        raise ConfigError(f"{out / 'resume.json'}: resume: the run trains {variant!r}, not "
                          f"variant {data.spec.name!r}", "resume", "variant")


def prepare_output(config: TrainConfig, data: TrainData, task: ClusterTask) -> RunFolder:
    """Make the output folder; non-chief workers of a cluster write to ``.worker-<i>/`` (same code
    path, nothing clobbered). Removes what a killed run half-wrote; the chief writes
    ``anchors.txt`` and ``classes.txt``."""
    out = Path(config.output.output_dir)
    write_dir = out if task.is_chief else out / f".worker-{task.index}"
    if task.is_chief:
        claim(out, patterns=RUN_FOLDER_ENTRIES)
    write_dir.mkdir(parents=True, exist_ok=True)
    remove_stale_temporaries(write_dir, legacy=True)
    if task.is_chief:
        if not data.spec.anchor_free:
            write_anchors(out / "anchors.txt", data.anchors)
        if fits_classes_file(data.class_names):
            write_classes(out / "classes.txt", data.class_names)
        else:
            logger.warning("%s not written: a class name begins or ends with spaces, which a "
                           "classes file cannot keep (the model files carry the names as they "
                           "are)", out / "classes.txt")
    return RunFolder(out, write_dir, task.is_chief)


def pick_strategy(config: TrainConfig, num_records: int, task: Optional[ClusterTask] = None
                  ) -> Placement:
    """Replica devices and strategy; the global batch (per-replica batch x replicas) and the steps
    per epoch. With ``cpu_replicas`` the logical CPU devices must already exist (the CLI makes them
    first thing: :func:`yolo3.training.distribute.configure_logical_cpus`)."""
    devices = replica_devices(config.hardware.gpus or None, config.hardware.cpu_replicas or None)
    strategy = make_strategy(config.hardware.strategy,
                             devices if config.hardware.strategy == "mirrored" else None)
    replicas = strategy.num_replicas_in_sync if strategy else max(1, len(devices))
    global_batch = config.hardware.batch_size * replicas
    if num_records < global_batch:
        raise ConfigError(f"batch_size {config.hardware.batch_size}: the {num_records} training "
                          f"images of {_training_source(config)} are fewer than one global batch "
                          f"({config.hardware.batch_size} x {replicas} replicas)", "batch_size")
    steps = config.schedule.steps_per_epoch or num_records // global_batch
    if config.hardware.strategy != "wrapper":
        devices = []
    return Placement(strategy, devices, replicas, global_batch, steps, task or cluster_task())


def build_models(config: TrainConfig, data: TrainData, placement: Placement
                 ) -> Tuple[keras.Model, keras.Model, List[Tuple[str, str]]]:
    """``(body, template, skipped layers)``: the body and its training model (output: the loss,
    ground truth padded to ``max_boxes`` so every shape is static), in the strategy's scope and the
    current Keras dtype policy, with ``weights`` loaded by name (skipped layers listed). With
    ``multi_scale`` the body takes any input size."""
    shape = (None, None) if config.data.multi_scale else data.hw
    with placement.scope():
        body = build_spec_body(data.spec, data.num_classes,
                               len(data.masks[0]) if data.masks else None, shape,
                               fused_batch_norm=True)
        template = _training_model(config, data, body)
    skipped: List[Tuple[str, str]] = []
    loaded = set()
    if config.model.weights:
        transfer = config.model.head_transfer and not data.spec.anchor_free
        report = load_weights_by_name(
            body, config.model.weights, variant=data.spec.name,
            head_anchors=len(data.masks[0]) if transfer else None)
        skipped, loaded = report.skipped, set(report.loaded)
    if config.model.prior_bias:
        _initialise_output_priors(body, data, data.hw, keep=loaded)
    if config.model.bn_momentum is not None:
        for layer in body.layers:
            if isinstance(layer, keras.layers.BatchNormalization):
                layer.momentum = float(config.model.bn_momentum)
    return body, template, skipped


def _training_model(config: TrainConfig, data: TrainData, body: keras.Model) -> keras.Model:
    """The training model of ``body``: its loss is its output; ground truth padded to
    ``max_boxes``."""
    recipe = config.recipe
    if data.spec.anchor_free:
        return anchor_free_training_model(body, data.spec.head, data.num_classes,
                                          config.data.max_boxes, box_gain=recipe.box_gain,
                                          class_gain=recipe.class_gain)
    return yolo_training_model(body, data.anchors, data.num_classes,
                               ignore_thresh=recipe.ignore_iou, anchor_mask=data.masks,
                               box_loss=recipe.box_loss, label_smoothing=recipe.label_smoothing,
                               max_boxes=config.data.max_boxes, objectness=recipe.objectness,
                               box_gain=recipe.box_gain, class_gain=recipe.class_gain)


def _initialise_output_priors(body: keras.Model, data: TrainData, hw: Tuple[int, int],
                              keep=()) -> None:
    """Set the bias of every output convolution not in ``keep`` (loaded from weights) to the
    priors of :func:`yolo3.training.recipe.output_bias_priors` (objects per image from the training
    set); an anchor-free head's predictions to
    :func:`yolo3.training.recipe.anchor_free_bias_priors`."""
    per_image = float(np.mean([len(np.asarray(r.boxes).reshape(-1, 5)) for r in data.records]))
    if data.spec.anchor_free:
        _initialise_anchor_free_priors(body, data, hw, per_image, keep)
        return
    for name, stride, mask in zip(output_layer_names(body), data.spec.strides, data.masks):
        if name in keep:
            continue
        layer = body.get_layer(name)
        kernel, _ = layer.get_weights()
        bias = output_bias_priors(len(mask), data.num_classes, (hw[0] // stride) * (hw[1] // stride),
                                  len(data.masks), per_image)
        layer.set_weights([kernel, bias])


def _initialise_anchor_free_priors(body: keras.Model, data: TrainData, hw: Tuple[int, int],
                                   per_image: float, keep=()) -> None:
    head = data.spec.head
    for stride in head.strides:
        cells = (hw[0] // stride) * (hw[1] // stride)
        biases = anchor_free_bias_priors(head.reg_max, data.num_classes, cells, per_image)
        for name, bias in zip(prediction_layer_names(stride), biases):
            if name in keep:
                continue
            layer = body.get_layer(name)
            layer.set_weights([layer.get_weights()[0], bias])


def restore_state(config: TrainConfig, run: RunFolder, template: keras.Model):
    """``(state, start epoch, best)``: with ``resume`` the chief's last complete state (one epoch
    for all workers), its weights loaded into ``template``; history rows of epochs that will be
    trained again are dropped (multi-worker runs: from the BackupAndRestore epoch)."""
    state = load_resume_state(run.output) if config.output.resume else None
    start_epoch = int(state["epoch"]) if state else 0
    best = state.get("best") if state else None
    if state:
        logger.log(NOTICE, "resuming from %s after epoch %d", state["path"], start_epoch)
        template.load_weights(os.path.join(state["path"], "model.weights.h5"))
    if config.output.resume:
        truncate_history(run.write_dir / "history.csv", start_epoch)
    elif config.hardware.strategy == "multiworker" and (run.write_dir / "backup").exists():
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
    settings = config.data
    hw = data.hw
    shapes = (data.spec.multi_scale_shapes(*settings.multi_scale, hw) if settings.multi_scale
              else None)
    augment = AugmentConfig.preset(settings.augment)
    if augment is not None and settings.mosaic:
        augment = replace(augment, mosaic=settings.mosaic)
    targets = TargetEncoding(None if data.spec.anchor_free else data.anchors, data.num_classes,
                             data.masks or None, config.recipe.assign_iou, true_boxes=True)
    validation = DatasetConfig(hw, placement.global_batch,
                               training=False, targets=targets, max_boxes=settings.max_boxes,
                               seed=config.seed, augment=None)
    training = replace(validation, training=True, augment=augment, multi_scale=(
        MultiScale(shapes, settings.multi_scale_every) if shapes else None))
    train_ds = make_dataset(data.records, training)
    val_ds = make_dataset(data.val_records, validation)
    if config.schedule.steps_per_epoch:
        train_ds = train_ds.repeat()
    if placement.strategy is not None:
        train_ds, val_ds = shard_by_data(train_ds), shard_by_data(val_ds)
    return train_ds, val_ds


def batch_norm_images(config: TrainConfig, data: TrainData) -> Optional[tf.data.Dataset]:
    """The training images (``bn_stats_images`` of them, a seeded choice, letterboxed at the input
    size, no augmentation, decoded once and cached) over which the batch-norm statistics are
    recomputed; None when ``bn_stats_images`` is 0."""
    count = min(int(config.recipe.bn_stats_images), len(data.records))
    if count <= 0:
        return None
    order = np.random.default_rng(config.seed).permutation(len(data.records))[:count]
    records = [data.records[i] for i in sorted(order)]
    return make_dataset(records, DatasetConfig(
        data.hw, min(16, count), training=False,
        max_boxes=config.data.max_boxes, seed=config.seed, augment=None, cache=True))


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
    frozen, epochs = config.schedule.freeze_epochs, config.schedule.epochs
    planned = [Stage(0, frozen, True), Stage(frozen, epochs, False)]
    return [s for s in planned if s.last > s.first and s.last > start_epoch]


def _optimizer(config: TrainConfig, steps: int, stage_epochs: int) -> keras.optimizers.Optimizer:
    """The stage's optimiser: its schedule over the stage, weight decay and EMA (momentum from the
    whole run's length unless given)."""
    lr = learning_rate(config.recipe.optimizer, config.recipe.lr)
    if config.schedule.schedule == "cosine":
        total = max(1, steps * stage_epochs)
        warm = int(round(config.schedule.warmup_epochs * steps))
        lr = WarmupCosine(lr, total, min(warm, total - 1))
    momentum = config.recipe.ema_momentum or auto_ema_momentum(steps * config.schedule.epochs)
    return make_optimizer(config.recipe.optimizer, lr, config.recipe.weight_decay,
                          config.recipe.ema, momentum)


def eval_interval(config: TrainConfig, data: TrainData) -> int:
    """Epochs between two mAP evaluations (0: none): ``eval_every``, or the automatic interval."""
    if config.schedule.eval_every is not None:
        return int(config.schedule.eval_every)
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
    if config.recipe.ema:
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
    elif config.output.verbose:
        logger.warning("TensorBoard is not installed (pip install tensorboard): no logs/ written")
    if config.schedule.schedule == "plateau":
        callbacks.append(keras.callbacks.ReduceLROnPlateau(patience=2,
                                                           verbose=config.output.verbose))
    if config.hardware.strategy == "multiworker":
        # one folder per worker: Keras 3 writes the backup on every worker (HDF5 locks clash)
        callbacks.append(keras.callbacks.BackupAndRestore(str(run.write_dir / "backup")))
        if config.recipe.ema:
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
        frozen_count = set_stage_trainable(body, stage.frozen, config.model.freeze_bn)
        model = (multi_gpu_model(template, devices=placement.devices) if placement.uses_wrapper
                 else template)
        optimizer = _optimizer(config, placement.steps, stage.last - stage.first)
        model.compile(optimizer=optimizer, loss=identity_loss,
                      jit_compile=_jit(config, placement))
    prepare_fit(model, train_ds, placement.strategy)
    name = (f"1 (heads only, {frozen_count} layers frozen)" if stage.frozen else "2 (all layers)")
    logger.log(NOTICE, "stage %s: epochs %d..%d, %d replica(s), global batch %d, %d steps/epoch, "
               "%s lr %g (%s), %s, %s%s", name, max(stage.first, start_epoch) + 1, stage.last,
               placement.replicas, placement.global_batch, placement.steps, config.recipe.optimizer,
               learning_rate(config.recipe.optimizer, config.recipe.lr), config.schedule.schedule,
               placement.describe(config.hardware.strategy), keras.config.dtype_policy().name,
               ", XLA" if model.jit_compile else "")
    if state and start_epoch > stage.first:
        with placement.scope():
            restore_resume_state(state, template, optimizer, model.trainable_variables)
    try:
        history = model.fit(train_ds, validation_data=val_ds, epochs=stage.last,
                            initial_epoch=max(stage.first, start_epoch),
                            steps_per_epoch=(placement.steps if config.schedule.steps_per_epoch
                                             else None),
                            validation_steps=config.schedule.validation_steps, callbacks=callbacks,
                            shuffle=False,  # the tf.data pipeline shuffles (seeded) itself
                            verbose=config.output.verbose)
    except tf.errors.InvalidArgumentError as e:
        if not any(word in str(e) for word in ("image", "JPEG", "PNG", "decode", "Decode")):
            raise
        reason = next((line for line in str(e).splitlines() if "image" in line or "JPEG" in line
                       or "PNG" in line), str(e).splitlines()[0])
        raise ImageDecodeFailed(reason.strip()) from None
    return {k: [float(x) for x in v] for k, v in history.history.items()}


class ImageDecodeFailed(Exception):
    """The pipeline met an image it cannot decode (its TensorFlow message; not the file)."""


UPFRONT_DECODE_LIMIT = 5000  # images decoded before training; beyond, named when met


def check_images_up_front(paths: List[str], progress: bool = True) -> None:
    """Decode, before training, the images not known to decode from an earlier run
    (:func:`yolo3.data.verify.check_decodable`), when they are at most
    ``UPFRONT_DECODE_LIMIT``; more (a first run over a COCO-sized set) would delay the first step
    by minutes for a check the first epoch makes anyway, so a file the pipeline cannot decode is
    then named when training meets it (:func:`name_undecodable`)."""
    todo = unchecked(paths)
    if not todo:  # all known to decode: nothing to do (not even reading the cache again)
        return
    if len(todo) <= UPFRONT_DECODE_LIMIT:
        check_decodable(todo, progress=progress)
        return
    logger.log(NOTICE, "%d images are not yet known to decode (more than %d): training starts "
               "without decoding them first, and names a file the pipeline cannot decode when it "
               "meets one ('yolo3 check' decodes them all)", len(todo), UPFRONT_DECODE_LIMIT)


def name_undecodable(paths: List[str], reason: str, check_args: str, progress: bool) -> str:
    """The message for a decode failure met while training: the files that fail (found by
    decoding those not known to decode), or TensorFlow's reason when none does now."""
    failures = verify_images(paths, progress=progress)
    if failures:
        return (f"training met an image it cannot decode; {len(failures)} images cannot be used "
                f"(remove them, then --resume):{listed(failures)}")
    return (f"an image could not be decoded during training although every image decodes now "
            f"(did a file change?); 'yolo3 check {check_args}' names it. TensorFlow: {reason}")


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
    for caution in validate_config(config):
        logger.warning("%s", caution.message, extra={"settings": caution.settings})
    with dtype_policy(training_precision(config)):
        return _train(config)


def training_precision(config: TrainConfig) -> str:
    """The dtype policy ``config.recipe.precision`` means on this machine (see
    :func:`yolo3.config.precision.resolve_training_precision`): GPUs count when ``gpus`` asks for
    them."""
    return resolve_training_precision(config.recipe.precision, gpu=_on_gpu(config))


def _on_gpu(config: TrainConfig) -> bool:
    if config.hardware.cpu_replicas:
        return False
    return bool(tf.config.list_physical_devices("GPU"))


def _jit(config: TrainConfig, placement: Placement) -> bool:
    """XLA for the step: never for the replica wrapper (it keeps its per-device placement)."""
    return use_jit(config.recipe.jit, _on_gpu(config)) and not placement.uses_wrapper


def _train(config: TrainConfig) -> TrainResult:
    keras.utils.set_random_seed(config.seed)
    data = prepare_data(config)
    check_run_folder(config, data)
    placement = pick_strategy(config, len(data.records))
    # after the strategy: decoding runs TensorFlow ops, and a multi-worker strategy must configure
    # its collectives before TensorFlow's runtime starts
    check_images_up_front([r.path for r in data.records + data.val_records],
                          progress=bool(config.output.verbose))
    body, template, skipped = build_models(config, data, placement)
    run = prepare_output(config, data, placement.task)  # everything checked: now write
    state, start_epoch, best = restore_state(config, run, template)
    datasets = make_datasets(config, data, placement)
    bn_images = batch_norm_images(config, data)
    info = data.info()
    nan_stop = StopOnNaN()
    every = eval_interval(config, data)
    evaluation = early_stop = None
    if every:
        evaluation = MapEvaluation(body, info, data.val_records, every=every,
                                   batch_size=config.hardware.batch_size,
                                   verbose=config.output.verbose,
                                   logs_dir=run.write_dir / "logs" if run.chief else None,
                                   evaluate=run.chief, share=_sharing(placement))
        if config.schedule.patience:
            early_stop = EarlyStopOnPlateau(config.schedule.patience, "mAP50_95", best=best,
                                            verbose=config.output.verbose)
    checkpoint = TemplateCheckpoint(body, run.write_dir, template=template, best=best,
                                    verbose=config.output.verbose, info=info,
                                    monitor="mAP50_95" if every else "val_loss",
                                    mode="max" if every else "min", ema=config.recipe.ema)
    history: Dict[str, List[float]] = {}
    for stage in stages(config, start_epoch):
        # fresh per-stage callbacks (each stage has its own optimiser); the stateful ones shared
        statistics = (PreciseBatchNorm(BatchNormStatistics(body, bn_images))
                      if bn_images is not None else None)  # per stage: frozen layers differ
        callbacks = _callbacks(config, run, checkpoint, nan_stop, evaluation, early_stop,
                               statistics)
        try:
            stage_history = run_stage(stage, config, body, template, placement, datasets,
                                      callbacks, start_epoch, state)
        except ImageDecodeFailed as e:
            raise CommandFailed(name_undecodable(
                [r.path for r in data.records + data.val_records], str(e), _check_flag(config),
                bool(config.output.verbose))) from None
        for k, v in stage_history.items():
            history.setdefault(k, []).extend(v)
        if nan_stop.stopped or (early_stop is not None and early_stop.stopped_epoch is not None):
            break
    final_model, final_weights = finish(run, body, info, nan_stop)
    if final_model is None:
        nan_stop.stopped = True
        nan_stop.message = (f"{nan_stop.message or 'the weights are not finite numbers'}; no "
                            f"good checkpoint exists, so no final model was written in {run.output}")
    if evaluation is not None and checkpoint.best > -math.inf and config.output.verbose:
        logger.log(NOTICE, "best validation mAP@0.5:0.95 %.4f (%s)", checkpoint.best,
                   run.output / "best.keras")
    if evaluation is not None and run.chief:
        best_f1 = evaluation.write_diagnostics(run.output / "diagnostics")
        if best_f1 is not None:
            logger.log(NOTICE, "epoch %d on the validation set: best F1 %.4f at confidence %.3f "
                       "(precision %.4f, recall %.4f); confusion matrix and curves in %s",
                       best_f1["epoch"], best_f1["f1"], best_f1["confidence"],
                       best_f1["precision"], best_f1["recall"], run.output / "diagnostics")
    return TrainResult(str(run.output), str(final_model or ""), str(final_weights or ""), history,
                       completed_epochs(run.write_dir / "history.csv"), nan_stop.stopped,
                       nan_stop.message, skipped)


def _sharing(placement: Placement):
    """How non-chief workers learn the chief's figures: an all-reduce over the multi-worker
    strategy (so early stopping decides alike everywhere); None in a single process."""
    if placement.strategy is None or placement.task.num_workers <= 1:
        return None
    return lambda values: broadcast_from_chief(placement.strategy, values, placement.task.is_chief)


def _size_text(hw: Tuple[int, int]) -> str:
    return f"{hw[0]}x{hw[1]}" if hw[0] == hw[1] else f"{hw[0]}x{hw[1]} (height x width)"


def _training_source(config: TrainConfig) -> str:
    return config.data.data_file or config.data.annotations


def _check_flag(config: TrainConfig) -> str:
    """The ``yolo3 check`` arguments that read this run's data."""
    if config.data.data_file:
        return f"--data {config.data.data_file}"
    return f"--annotations {config.data.annotations}"


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
