"""The input step of training: the training and validation batches of a run (augmented, mosaic,
multi-scale, tiled, split by a tf.distribute strategy) and the images of the batch-norm
statistics, from either pipeline: tf.data (:mod:`yolo3.data.pipeline`) or the NumPy/OpenCV one
(:mod:`yolo3.data.numpy_pipeline`), both applying the same plans (:mod:`yolo3.data.draws`).
:func:`pick_pipeline` chooses; TensorFlow is imported only for tf.data."""
from __future__ import annotations

import logging
from dataclasses import replace
from typing import Any, Optional, Sequence, Tuple

import keras
import numpy as np

from yolo3.config.train_config import ConfigError, TrainConfig
from yolo3.core.extras import installed
from yolo3.data.dataset_config import DatasetConfig, TargetEncoding
from yolo3.data.draws import AugmentConfig, MultiScale, TileSampling
from yolo3.data.numpy_pipeline import NumpyBatches
from yolo3.training.data_step import TrainData
from yolo3.training.placement import Placement

logger = logging.getLogger(__name__)

__all__ = ["pick_pipeline", "dataset_configs", "first_batches", "make_datasets",
           "batch_norm_images", "shard_by_data"]


def pick_pipeline(config: TrainConfig, placement: Optional[Placement] = None) -> str:
    """``tf`` or ``numpy``: the run's ``pipeline`` setting, ``auto`` meaning tf.data where
    TensorFlow imports and the NumPy pipeline where it does not. ``tf`` without TensorFlow,
    ``numpy`` under a tf.distribute strategy, and ``numpy`` with multi-scale on the TensorFlow
    backend are refused (ConfigError naming the settings). Training asks before it writes."""
    choice = config.data.pipeline
    has_tf = installed("tensorflow")
    if choice == "auto":
        choice = "tf" if has_tf else "numpy"
    if choice == "tf" and not has_tf:
        raise ConfigError("pipeline tf: TensorFlow is not installed here; use --pipeline numpy "
                          "(or auto), or install tensorflow", "pipeline")
    if choice == "numpy" and placement is not None and placement.strategy is not None:
        raise ConfigError(f"pipeline numpy: the {config.hardware.strategy} strategy splits "
                          "tf.data batches between its replicas; use --pipeline tf with it",
                          "pipeline", "strategy")
    if (choice == "numpy" and config.data.multi_scale
            and keras.backend.backend() == "tensorflow"):
        raise ConfigError("pipeline numpy with multi_scale on the TensorFlow backend: Keras fixes "
                          "the batch shape from the first batches it reads, so a later input "
                          "size fails; use --pipeline tf (or auto) with TensorFlow",
                          "pipeline", "multi_scale")
    return choice


def shard_by_data(dataset):
    """Let a tf.distribute strategy split each global batch between workers and replicas.

    Every worker reads the same (seeded) stream; the DATA policy hands worker ``i`` its slice of
    each global batch, so N workers x B/N images see exactly the batches of one process x B.
    """
    import tensorflow as tf
    options = tf.data.Options()
    options.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.DATA
    return dataset.with_options(options)


def _batches(records: Sequence, config: DatasetConfig, pipeline: str, workers: int,
             repeat: bool = False) -> Any:
    """``records`` batched as ``config`` says by ``pipeline``."""
    if pipeline == "tf":
        from yolo3.data.pipeline import make_dataset  # imports TensorFlow: tf.data only
        dataset = make_dataset(records, config)
        return dataset.repeat() if repeat else dataset
    return NumpyBatches(records, config, workers=workers or None, repeat=repeat)


def dataset_configs(config: TrainConfig, data: TrainData, placement: Placement
                    ) -> Tuple[DatasetConfig, DatasetConfig]:
    """The training and validation :class:`~yolo3.data.dataset_config.DatasetConfig` of a run."""
    settings = config.data
    input_size = data.input_size
    shapes = (data.spec.multi_scale_shapes(*settings.multi_scale, input_size)
              if settings.multi_scale else None)
    augment = AugmentConfig.preset(settings.augment)
    if augment is not None and settings.mosaic:
        augment = replace(augment, mosaic=settings.mosaic)
    targets = TargetEncoding.for_head(data.head, data.num_classes, config.recipe.assign_iou)
    # JAX splits every batch evenly over the wrapper's devices: validation's last partial batch
    # is left out of val_loss there (the mAP evaluation sees every image)
    # (too few for one batch is refused earlier: yolo3.training.placement.pick_strategy)
    whole_batches = placement.uses_wrapper and keras.backend.backend() == "jax"
    validation = DatasetConfig(input_size, placement.global_batch,
                               training=False, targets=targets, max_boxes=settings.max_boxes,
                               seed=config.seed, augment=None,
                               drop_remainder=True if whole_batches else None)
    tiles = (TileSampling(data.tile, settings.tile_whole, settings.tile_background,
                          whole_from=settings.tile_whole_from) if data.tile else None)
    training = replace(validation, training=True, augment=augment, multi_scale=(
        MultiScale(shapes, settings.multi_scale_every) if shapes else None), tiles=tiles)
    return training, validation


def first_batches(config: TrainConfig, data: TrainData, placement: Placement) -> NumpyBatches:
    """The run's training batches as images and boxes, without target encoding: the NumPy
    pipeline's (equal to tf.data's for the same seed), for drawing what the model is given."""
    training, _ = dataset_configs(config, data, placement)
    return NumpyBatches(data.records, replace(training, targets=None), workers=1, repeat=True)


def make_datasets(config: TrainConfig, data: TrainData, placement: Placement
                  ) -> Tuple[Any, Any]:
    """Training (augmented, shuffled, mosaic, multi-scale and tiled as configured) and validation
    (letterboxed at ``input_size``) batches of the global batch, with the padded boxes last:
    tf.data datasets or :class:`~yolo3.data.numpy_pipeline.NumpyBatches`
    (:func:`pick_pipeline`)."""
    pipeline = pick_pipeline(config, placement)
    training, validation = dataset_configs(config, data, placement)
    settings = config.data
    workers = settings.data_workers
    train_ds = _batches(data.records, training, pipeline, workers,
                        repeat=bool(config.schedule.steps_per_epoch))
    val_ds = _batches(data.val_records, validation, pipeline, workers)
    logger.info("input pipeline: %s", "tf.data" if pipeline == "tf" else
                f"NumPy/OpenCV, {train_ds.workers} worker thread(s)")
    if placement.strategy is not None:
        train_ds, val_ds = shard_by_data(train_ds), shard_by_data(val_ds)
    return train_ds, val_ds


def batch_norm_images(config: TrainConfig, data: TrainData) -> Optional[Any]:
    """The training images (``bn_stats_images`` of them, a seeded choice, letterboxed at the input
    size, no augmentation, decoded once and cached) over which the batch-norm statistics are
    recomputed, from the run's pipeline; None when ``bn_stats_images`` is 0."""
    count = min(int(config.recipe.bn_stats_images), len(data.records))
    if count <= 0:
        return None
    order = np.random.default_rng(config.seed).permutation(len(data.records))[:count]
    records = [data.records[i] for i in sorted(order)]
    return _batches(records, DatasetConfig(
        data.input_size, min(16, count), training=False, max_boxes=config.data.max_boxes,
        seed=config.seed, augment=None, cache=True), pick_pipeline(config),
        config.data.data_workers)
