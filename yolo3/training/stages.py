"""The stages of training: frozen backbone, then all layers; each stage's optimiser, callbacks
and fit."""
from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Optional, Tuple

import keras

from yolo3.config.train_config import TrainConfig
from yolo3.core.extras import installed
from yolo3.core.log import NOTICE
from yolo3.modeling.keras_compat import ExactSwapEMAWeights
from yolo3.modeling.loss import identity_loss
from yolo3.modeling.schedules import WarmupCosine
from yolo3.training.callbacks import (
    EmaAfterBackupRestore,
    EpochClock,
    HistoryLog,
    StopOnNaN,
    TemplateCheckpoint,
)
from yolo3.training.data_step import ImageDecodeFailed, TrainData
from yolo3.training.distribute import (
    prepare_fit,
)
from yolo3.training.event_log import ScalarLog
from yolo3.training.models import set_stage_trainable
from yolo3.training.parallel import multi_gpu_model
from yolo3.training.placement import Placement, use_xla
from yolo3.training.recipe import (
    auto_ema_momentum,
    auto_eval_every,
    learning_rate,
    make_optimizer,
)
from yolo3.training.resume import restore_resume_state
from yolo3.training.run_folder import RunFolder

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Stage:
    """Epochs ``first .. last - 1`` (absolute), with the backbone frozen or not."""

    first: int
    last: int
    frozen: bool


def stages(config: TrainConfig, start_epoch: int) -> List[Stage]:
    """The stages still to run after ``start_epoch`` completed epochs."""
    frozen, epochs = config.schedule.freeze_epochs, config.schedule.epochs
    planned = [Stage(0, frozen, True), Stage(frozen, epochs, False)]
    return [s for s in planned if s.last > s.first and s.last > start_epoch]


def stage_optimizer(config: TrainConfig, steps: int, stage_epochs: int) -> keras.optimizers.Optimizer:
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


def stage_callbacks(config: TrainConfig, run: RunFolder, checkpoint: TemplateCheckpoint,
               nan_stop: StopOnNaN, evaluation: Optional[keras.callbacks.Callback] = None,
               early_stop: Optional[keras.callbacks.Callback] = None,
               bn_statistics: Optional[keras.callbacks.Callback] = None,
               pictures: Optional[keras.callbacks.Callback] = None) -> list:
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
    callbacks += [HistoryLog(run.folder), checkpoint]
    if pictures is not None:  # after the history row (results.png) and the checkpoint (best)
        callbacks.append(pictures)
    if early_stop is not None:
        callbacks.append(early_stop)
    if has_tensorboard() and installed("tensorflow"):
        callbacks.append(keras.callbacks.TensorBoard(str(run.write_dir / "logs")))
    elif has_tensorboard():  # Keras's callback writes through tf.summary
        callbacks.append(ScalarLog(str(run.write_dir / "logs")))
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
              placement: Placement, datasets: Tuple[Any, Any],
              callbacks: list, start_epoch: int = 0, state=None,
              feed: Optional[Callable[[keras.Model], keras.Model]] = None
              ) -> Dict[str, List[float]]:
    """Compile and fit one stage (the wrapper over ``placement.devices``, a strategy, or the
    template itself); restores the optimiser of ``state`` when resuming inside this stage.
    ``feed``: the batches are not float32 images (uint8 with colour plans, or plans into the
    images kept on the device), and ``feed(template)`` is the model ``fit`` runs on them
    (:func:`yolo3.training.datasets.device_feed`: the template's variables).
    Returns the stage's Keras history."""
    train_ds, val_ds = datasets
    with placement.scope():
        frozen_count = set_stage_trainable(body, stage.frozen, config.model.freeze_bn)
        fed = feed(template) if feed is not None else template
        model = (multi_gpu_model(fed, devices=placement.devices,
                                 replica_batch_norm=config.hardware.replica_batch_norm)
                 if placement.uses_wrapper else fed)
        optimizer = stage_optimizer(config, placement.steps, stage.last - stage.first)
        model.compile(optimizer=optimizer, loss=identity_loss,
                      jit_compile=use_xla(config, placement))
    prepare_fit(model, train_ds, placement.strategy)
    name = (f"1 (heads only, {frozen_count} layers frozen)" if stage.frozen else "2 (all layers)")
    logger.log(NOTICE, "stage %s: epochs %d..%d, %d replica(s), global batch %d, %d steps/epoch, "
               "%s lr %g (%s), %s, %s%s", name, max(stage.first, start_epoch) + 1, stage.last,
               placement.replicas, placement.global_batch, placement.steps, config.recipe.optimizer,
               learning_rate(config.recipe.optimizer, config.recipe.lr), config.schedule.schedule,
               placement.describe(config.hardware.strategy)
               + (", each replica's own batch statistics"
                  if getattr(model, "replica_batch_norm", False) else ""),
               keras.config.dtype_policy().name,
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
                            shuffle=False,  # either pipeline shuffles (seeded) itself
                            verbose=config.output.verbose)
    except Exception as e:
        # tf.data's decode failures (the NumPy pipeline names the file itself: AnnotationError)
        if (type(e).__name__ != "InvalidArgumentError"
                or not any(word in str(e) for word in ("image", "JPEG", "PNG", "decode", "Decode"))):
            raise
        reason = next((line for line in str(e).splitlines() if "image" in line or "JPEG" in line
                       or "PNG" in line), str(e).splitlines()[0])
        raise ImageDecodeFailed(reason.strip()) from None
    return {k: [float(x) for x in v] for k, v in history.history.items()}


def has_tensorboard() -> bool:
    import importlib.util
    return importlib.util.find_spec("tensorboard") is not None
