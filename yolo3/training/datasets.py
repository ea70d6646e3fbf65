"""The input step of training: the tf.data training and validation batches of a run (augmented,
mosaic, multi-scale, split by a tf.distribute strategy) and the images of the batch-norm
statistics. TensorFlow-only: tf.data is the pipeline Keras feeds every backend from."""
from __future__ import annotations

import logging
from dataclasses import replace
from typing import Optional, Tuple

import keras
import numpy as np
import tensorflow as tf

from yolo3.config.train_config import TrainConfig
from yolo3.data.augment import AugmentConfig
from yolo3.data.pipeline import DatasetConfig, MultiScale, TargetEncoding, make_dataset
from yolo3.data.tiling import TileSampling
from yolo3.training.data_step import TrainData
from yolo3.training.placement import Placement

logger = logging.getLogger(__name__)


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
    """Training (augmented, shuffled, mosaic, multi-scale and tiled as configured) and validation
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
    # JAX splits every batch evenly over the wrapper's devices: validation's last partial batch
    # is left out of val_loss there (the mAP evaluation sees every image)
    # (too few for one batch is refused earlier: yolo3.training.placement.pick_strategy)
    whole_batches = placement.uses_wrapper and keras.backend.backend() == "jax"
    validation = DatasetConfig(hw, placement.global_batch,
                               training=False, targets=targets, max_boxes=settings.max_boxes,
                               seed=config.seed, augment=None,
                               drop_remainder=True if whole_batches else None)
    tiles = (TileSampling(data.tile, settings.tile_whole, settings.tile_background)
             if data.tile else None)
    training = replace(validation, training=True, augment=augment, multi_scale=(
        MultiScale(shapes, settings.multi_scale_every) if shapes else None), tiles=tiles)
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
