"""Training: two stages (heads only, then all layers), optimiser and schedule, checkpoints, logging.

:func:`train` takes a :class:`TrainConfig` (the CLI ``yolo3-train`` / ``train_multi_gpu.py`` is a
thin parser over it). Layers are frozen by name: stage 1 trains every layer whose name does not start
with ``backbone_``; stage 2 trains all. ``epochs`` is the total epoch count (stage 2 runs epochs
``freeze_epochs .. epochs``). Outputs go to ``config.output`` (see :class:`TrainResult`).
"""
from __future__ import annotations

import csv
import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

import keras
import numpy as np
import tensorflow as tf

from yolo3.anchors import default_anchors, read_anchors, read_classes, write_anchors, write_classes
from yolo3.callbacks import (StopOnNaN, TemplateCheckpoint, atomic_save_model, atomic_save_weights,
                             load_resume_state, remove_stale_temporaries, restore_resume_state,
                             truncate_history)
from yolo3.distribute import is_chief, make_strategy, prepare_fit, replica_devices
from yolo3.errors import Yolo3Error
from yolo3.model import BACKBONE_PREFIX, build_body

__all__ = ["TrainConfig", "TrainResult", "WarmupCosine", "train", "set_stage_trainable",
           "validate_config", "ConfigError", "shard_by_data"]


class ConfigError(Yolo3Error, ValueError):
    """A training argument that cannot work (missing file, bad size, class ids beyond the list)."""


@dataclass
class TrainConfig:
    """Everything :func:`train` needs; the CLI flags map one to one (``--freeze-epochs`` ...)."""

    annotations: str
    classes: str
    output: str
    val_annotations: Optional[str] = None
    val_split: float = 0.1
    anchors: Optional[str] = None
    model: str = "yolov3"
    input_size: int = 416
    weights: Optional[str] = None
    freeze_epochs: int = 0
    epochs: int = 10
    batch_size: int = 8
    gpus: int = 0
    cpu_replicas: int = 0
    strategy: str = "wrapper"
    lr: float = 1e-3
    schedule: str = "cosine"
    warmup_epochs: float = 1.0
    resume: bool = False
    seed: int = 0
    steps_per_epoch: Optional[int] = None
    validation_steps: Optional[int] = None
    max_boxes: int = 100
    augment: str = "full"  # AugmentConfig preset: full, light or none
    freeze_bn: bool = False
    verbose: int = 1


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


@keras.saving.register_keras_serializable(package="yolo3")
class WarmupCosine(keras.optimizers.schedules.LearningRateSchedule):
    """Linear warm-up from 0 to ``lr`` over ``warmup_steps``, then cosine decay to ``lr * final``."""

    def __init__(self, lr: float, total_steps: int, warmup_steps: int = 0, final: float = 0.01):
        self.lr, self.total_steps = float(lr), max(1, int(total_steps))
        self.warmup_steps, self.final = max(0, int(warmup_steps)), float(final)

    def __call__(self, step):
        step = tf.cast(step, tf.float32)
        warm = self.lr * (step + 1.0) / max(1, self.warmup_steps)
        span = float(max(1, self.total_steps - self.warmup_steps))
        t = tf.clip_by_value((step - self.warmup_steps) / span, 0.0, 1.0)
        cos = self.lr * (self.final + (1 - self.final) * 0.5 * (1 + tf.cos(math.pi * t)))
        return tf.where(step < self.warmup_steps, warm, cos)

    def get_config(self) -> dict:
        return {"lr": self.lr, "total_steps": self.total_steps, "warmup_steps": self.warmup_steps,
                "final": self.final}


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


def shard_by_data(dataset: tf.data.Dataset) -> tf.data.Dataset:
    """Let a tf.distribute strategy split each global batch between workers and replicas.

    Every worker reads the same (seeded) stream; the DATA policy hands worker ``i`` its slice of
    each global batch, so N workers x B/N images see exactly the batches of one process x B.
    """
    options = tf.data.Options()
    options.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.DATA
    return dataset.with_options(options)


def _task_index() -> int:
    import json
    return int(json.loads(os.environ.get("TF_CONFIG", "{}") or "{}").get("task", {}).get("index", 0))


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
    if config.model not in ("yolov3", "tiny"):
        raise ConfigError(f"--model must be 'yolov3' or 'tiny', got {config.model!r}")
    if config.input_size <= 0 or config.input_size % 32:
        raise ConfigError(f"--input-size must be a positive multiple of 32, got {config.input_size}")
    if config.batch_size < 1:
        raise ConfigError(f"--batch-size must be >= 1, got {config.batch_size}")
    if config.epochs < 1 or not 0 <= config.freeze_epochs <= config.epochs:
        raise ConfigError(f"need 0 <= --freeze-epochs ({config.freeze_epochs}) <= --epochs "
                          f"({config.epochs}) and --epochs >= 1")
    if not config.val_annotations and not 0 < config.val_split < 1:
        raise ConfigError(f"--val-split must be in (0, 1) without --val-annotations, got {config.val_split}")
    if config.lr <= 0:
        raise ConfigError(f"--lr must be positive, got {config.lr}")
    if config.schedule not in ("cosine", "plateau"):
        raise ConfigError(f"--schedule must be 'cosine' or 'plateau', got {config.schedule!r}")
    if config.gpus and config.cpu_replicas:
        raise ConfigError("give either --gpus or --cpu-replicas, not both")


def _load_records(path: str, class_names: Sequence[str]):
    from yolo3.data.annotations import load_annotations
    records = load_annotations(path, class_names)
    if not records:
        raise ConfigError(f"{path}: no annotated images")
    for r in records:
        boxes = np.asarray(r.boxes).reshape(-1, 5)
        if len(boxes) and (boxes[:, 4].max() >= len(class_names) or boxes[:, 4].min() < 0):
            raise ConfigError(f"{path}: {r.path} has class id {int(boxes[:, 4].max())} beyond the "
                              f"{len(class_names)} classes of the class list")
    return records


def _make_dataset(records, config: TrainConfig, anchors, num_classes: int, batch: int, training: bool):
    from yolo3.data.augment import AugmentConfig
    from yolo3.data.pipeline import make_dataset
    size = (config.input_size, config.input_size)
    return make_dataset(records, size, anchors, num_classes, batch, training=training,
                        max_boxes=config.max_boxes, seed=config.seed,
                        augment=AugmentConfig.preset(config.augment) if training else None)


def _optimizer(config: TrainConfig, steps: int, stage_epochs: int) -> keras.optimizers.Optimizer:
    if config.schedule == "plateau":
        return keras.optimizers.Adam(config.lr)
    total = max(1, steps * stage_epochs)
    warm = int(round(config.warmup_epochs * steps))
    return keras.optimizers.Adam(WarmupCosine(config.lr, total, min(warm, total - 1)))


def _read_csv_history(path: Path) -> Dict[str, List[float]]:
    if not path.exists():
        return {}
    out: Dict[str, List[float]] = {}
    with open(path, newline="", encoding="utf-8") as f:
        for row in csv.DictReader(f):
            for k, v in row.items():
                if k != "epoch":
                    try:
                        out.setdefault(k, []).append(float(v))
                    except (TypeError, ValueError):
                        pass
    return out


def train(config: TrainConfig) -> TrainResult:
    """Train as configured; returns the written paths and the loss history.

    With ``cpu_replicas`` the logical CPU devices must already exist (the CLI makes them first thing;
    :func:`yolo3.distribute.configure_logical_cpus`).
    """
    validate_config(config)
    from yolo3.loss import identity_loss, yolo_training_model
    from yolo3.parallel import multi_gpu_model
    from yolo3.weights import load_weights_by_name

    keras.utils.set_random_seed(config.seed)
    class_names = read_classes(config.classes)
    anchors = read_anchors(config.anchors) if config.anchors else default_anchors(config.model)
    num_classes = len(class_names)
    records = _load_records(config.annotations, class_names)
    if config.val_annotations:
        val_records = _load_records(config.val_annotations, class_names)
    else:
        order = np.random.default_rng(config.seed).permutation(len(records))
        n_val = max(1, int(round(len(records) * config.val_split)))
        if n_val >= len(records):
            raise ConfigError(f"{config.annotations}: {len(records)} images are too few for "
                              f"--val-split {config.val_split}")
        val_records = [records[i] for i in order[:n_val]]
        records = [records[i] for i in order[n_val:]]

    out = Path(config.output)
    chief = is_chief()
    # non-chief workers of a cluster write to their own folder (same code path, nothing clobbered)
    write_dir = out if chief else out / f".worker-{_task_index()}"
    write_dir.mkdir(parents=True, exist_ok=True)
    remove_stale_temporaries(write_dir)  # half-written files of a killed run
    if chief:
        write_anchors(out / "anchors.txt", anchors)
        write_classes(out / "classes.txt", class_names)

    devices = replica_devices(config.gpus or None, config.cpu_replicas or None)
    strategy = make_strategy(config.strategy, devices if config.strategy == "mirrored" else None)
    replicas = strategy.num_replicas_in_sync if strategy else max(1, len(devices))
    global_batch = config.batch_size * replicas
    if len(records) < global_batch:
        raise ConfigError(f"{len(records)} training images are fewer than one global batch "
                          f"({config.batch_size} x {replicas} replicas)")
    steps = config.steps_per_epoch or len(records) // global_batch

    def scope():  # a strategy scope object cannot be entered twice: a fresh one each time
        return strategy.scope() if strategy else _null_scope()
    with scope():
        body = build_body(config.model, num_classes, len(anchors) // len(_masks_for(config.model)),
                          (config.input_size, config.input_size))
        template = yolo_training_model(body, anchors, num_classes)
    skipped: List[Tuple[str, str]] = []
    if config.weights:
        skipped = load_weights_by_name(body, config.weights, model_type=config.model).skipped

    state = load_resume_state(out) if config.resume else None  # the chief's: one epoch for all
    start_epoch = int(state["epoch"]) if state else 0
    best = state.get("best") if state else None
    if state:
        print(f"resuming from {state['path']} after epoch {start_epoch}")
        template.load_weights(os.path.join(state["path"], "model.weights.h5"))
    if config.resume:  # epochs after the state are trained again: drop their rows
        truncate_history(write_dir / "history.csv", start_epoch)
    elif config.strategy == "multiworker" and (write_dir / "backup").exists():
        truncate_history(write_dir / "history.csv", _backup_epoch(write_dir / "backup"))

    train_ds = _make_dataset(records, config, anchors, num_classes, global_batch, True)
    val_ds = _make_dataset(val_records, config, anchors, num_classes, global_batch, False)
    if config.steps_per_epoch:
        train_ds = train_ds.repeat()
    if strategy is not None:
        train_ds, val_ds = shard_by_data(train_ds), shard_by_data(val_ds)

    stages = [(0, config.freeze_epochs, True), (config.freeze_epochs, config.epochs, False)]
    history: Dict[str, List[float]] = {}
    nan_stop = StopOnNaN()
    ckpt = TemplateCheckpoint(body, write_dir, template=template,
                              best=math.inf if best is None else best, verbose=config.verbose)
    for first, last, frozen in stages:
        if last <= first or last <= start_epoch:
            continue
        with scope():
            frozen_count = set_stage_trainable(body, frozen, config.freeze_bn)
            model = multi_gpu_model(template, devices=devices) if (
                config.strategy == "wrapper" and len(devices) >= 2) else template
            optimizer = _optimizer(config, steps, last - first)
            model.compile(optimizer=optimizer, loss=identity_loss, jit_compile=False)
        prepare_fit(model, train_ds, strategy)
        # one line per stage, also with --quiet
        print(f"stage {'1 (heads only, ' + str(frozen_count) + ' layers frozen)' if frozen else '2 (all layers)'}"
              f": epochs {max(first, start_epoch) + 1}..{last}, {replicas} replica(s), "
              f"global batch {global_batch}, {config.strategy}")
        if state and start_epoch > first:
            with scope():
                restore_resume_state(state, template, optimizer, model.trainable_variables)
        # the history row before the checkpoint: a crash between them repeats the epoch (its row
        # is dropped on resume) instead of leaving a gap in history.csv
        callbacks = [nan_stop, keras.callbacks.CSVLogger(str(write_dir / "history.csv"), append=True),
                     ckpt]
        if _has_tensorboard():
            callbacks.append(keras.callbacks.TensorBoard(str(write_dir / "logs")))
        elif config.verbose:
            print("TensorBoard is not installed (pip install tensorboard): no logs/ written")
        if config.schedule == "plateau":
            callbacks.append(keras.callbacks.ReduceLROnPlateau(patience=2, verbose=config.verbose))
        if config.strategy == "multiworker":
            # one folder per worker: Keras 3 writes the backup on every worker (HDF5 locks clash)
            callbacks.append(keras.callbacks.BackupAndRestore(str(write_dir / "backup")))
        h = model.fit(train_ds, validation_data=val_ds, epochs=last, initial_epoch=max(first, start_epoch),
                      steps_per_epoch=steps if config.steps_per_epoch else None,
                      validation_steps=config.validation_steps, callbacks=callbacks,
                      shuffle=False,  # the tf.data pipeline shuffles (seeded) itself
                      verbose=config.verbose)
        for k, v in h.history.items():
            history.setdefault(k, []).extend(float(x) for x in v)
        if nan_stop.stopped:
            break

    last_ok = write_dir / "last.weights.h5"
    if nan_stop.stopped and last_ok.exists():
        body.load_weights(str(last_ok))
    final_model, final_weights = out / "final.keras", out / "final.weights.h5"
    atomic_save_weights(body, write_dir / "final.weights.h5")  # non-chief: its own copy, to compare
    if chief:
        atomic_save_model(body, final_model)
    done = len(_read_csv_history(write_dir / "history.csv").get("loss", []))
    return TrainResult(str(out), str(final_model), str(final_weights), history, done,
                       nan_stop.stopped, nan_stop.message, skipped)


def _backup_epoch(backup_dir: Path) -> int:
    """Epochs completed according to a Keras BackupAndRestore folder (0 when it has none)."""
    import json
    try:
        return int(json.loads((backup_dir / "training_metadata.json").read_text())["epoch"])
    except (OSError, ValueError, KeyError):
        return 0


def _masks_for(model: str) -> List[List[int]]:
    from yolo3.anchors import default_masks
    return default_masks(9 if model == "yolov3" else 6)


class _null_scope:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def _has_tensorboard() -> bool:
    import importlib.util
    return importlib.util.find_spec("tensorboard") is not None
