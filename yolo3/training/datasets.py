"""The input step of training: the training and validation batches of a run (augmented, mosaic,
multi-scale, tiled, split by a tf.distribute strategy) and the images of the batch-norm
statistics, from either pipeline: tf.data (:mod:`yolo3.data.pipeline`) or the NumPy/OpenCV one
(:mod:`yolo3.data.numpy_pipeline`), both applying the same plans (:mod:`yolo3.data.planner`).
:func:`pick_pipeline` chooses; TensorFlow is imported only for tf.data."""
from __future__ import annotations

import logging
import time
from dataclasses import replace
from typing import Any, Callable, Optional, Sequence, Tuple

import keras
import numpy as np

from yolo3.config.choices import PROCESS_FEED_FROM
from yolo3.config.train_config import ConfigError, TrainConfig
from yolo3.core.extras import installed
from yolo3.core.log import NOTICE
from yolo3.core.memory import gigabytes
from yolo3.data.dataset_config import (
    DatasetConfig,
    cache_longest_side,
    epoch_batches,
    record_geometry,
)
from yolo3.data.planner import AugmentConfig, MultiScale, TileSampling
from yolo3.data.device_cache import MAX_PIXELS, DeviceLayout
from yolo3.data.image_cache import cached_hw, check_ram
from yolo3.data.numpy_pipeline import NumpyBatches, default_workers
from yolo3.core.errors import NotEnoughMemory
from yolo3.training.batch_size import accelerator_memory
from yolo3.modeling.device_images import DeviceImages, with_device_images
from yolo3.modeling.pixel_input import with_planned_pixels
from yolo3.training.data_step import TrainData
from yolo3.training.jax_cluster import SINGLE, ProcessGroup
from yolo3.training.placement import Placement, on_gpu

logger = logging.getLogger(__name__)

DEVICE_SHARE = 0.3  # of an accelerator's memory, at most, for the images kept there

__all__ = ["pick_pipeline", "pick_augment_site", "pick_feed", "dataset_configs", "first_batches",
           "make_datasets", "datasets_from", "stream_position", "batch_norm_images", "shard_by_data",
           "check_image_cache", "check_device_cache", "check_device_room", "device_feed",
           "kept_layout", "DEVICE_SHARE"]


def pick_pipeline(config: TrainConfig, placement: Optional[Placement] = None) -> str:
    """``tf`` or ``numpy``: the run's ``pipeline`` setting, ``auto`` meaning tf.data where
    TensorFlow imports and the NumPy pipeline where it does not. ``tf`` without TensorFlow,
    ``numpy`` under a tf.distribute strategy, and ``numpy`` with multi-scale on the TensorFlow
    backend are refused (ConfigError naming the settings). Training asks before it writes."""
    choice = config.data.pipeline
    has_tf = installed("tensorflow")
    several = placement is not None and placement.group.several
    if choice == "tf" and several:
        raise ConfigError("pipeline tf with coordinator: each process makes its share of every "
                          "global batch with the numpy pipeline; use --pipeline numpy (or auto)",
                          "pipeline", "coordinator")
    if choice == "auto":  # the cache and the device's colours are the numpy pipeline's
        numpy_only = (config.data.cache != "none" or config.data.augment_on == "device"
                      or several)
        choice = "tf" if has_tf and not numpy_only else "numpy"
    if choice == "tf" and config.data.cache != "none":
        raise ConfigError(f"cache {config.data.cache} with pipeline tf: the decoded-image cache "
                          "is the numpy pipeline's; use --pipeline numpy (or auto)",
                          "cache", "pipeline")
    if choice == "tf" and config.data.augment_on == "device":
        raise ConfigError("augment_on device with pipeline tf: the uint8 batches the device "
                          "colours come from the numpy pipeline; use --pipeline numpy (or auto)",
                          "augment_on", "pipeline")
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


def pick_augment_site(config: TrainConfig, placement: Optional[Placement] = None) -> str:
    """``host`` or ``device``: where the colour distortion and the scaling to ``[0, 1]`` run.
    ``auto``: the device where there is a GPU and the numpy pipeline feeds it (the host's float
    colour conversion is its costliest step per image; on a CPU the step's own cores would do
    it); ``device`` with tf.data is refused (:func:`pick_pipeline`). ``cache device``: the
    device (its images are there; ``host`` is refused)."""
    choice = config.data.augment_on
    pipeline = pick_pipeline(config, placement)
    if config.data.cache == "device":
        if choice == "host":
            raise ConfigError("cache device with augment_on host: the images kept on the device "
                              "are placed and coloured there; use --augment-on device (or "
                              "auto), or --cache ram", "cache", "augment_on")
        return "device"
    if choice == "auto":
        choice = "device" if pipeline == "numpy" and on_gpu(config) else "host"
    return choice


def check_image_cache(config: TrainConfig, data: TrainData, placement: Placement) -> int:
    """The bytes the run's decoded-image cache will hold (0 without one), logged; ``ram``
    refused (NotEnoughMemory, exit 2) when it would take more than half the memory available,
    ``device`` as :func:`check_device_cache` says."""
    kind = config.data.cache
    if kind == "none":
        return 0
    training, validation = dataset_configs(config, data, placement)  # refuses what cannot feed
    if kind == "device":
        check_device_cache(config, data, placement)
    longest = cache_longest_side(training)
    if kind == "device":
        n_bytes, count = training.device_layout.nbytes, len(training.device_layout)
    else:
        n_bytes, count = 0, 0
        for records, dataset in ((data.records, training), (data.val_records, validation)):
            if records:
                side = cache_longest_side(dataset)
                hws, _ = record_geometry(records)
                n_bytes += sum(h * w * 3 for h, w in (cached_hw(hw, side) for hw in hws))
                count += len(hws)
    logger.log(NOTICE, "decoded-image cache (%s): %d images, %s%s", kind, count,
               gigabytes(n_bytes), f", longer side at most {longest} px" if longest
               else ", full resolution (tiles)")
    if kind == "ram":
        check_ram(n_bytes, count)
    if kind == "device":
        check_device_room(training.device_layout)
    return n_bytes


def check_device_cache(config: TrainConfig, data: TrainData, placement: Placement) -> None:
    """Refuse (ConfigError naming the settings) what ``cache device`` cannot do yet: tiles (a
    tile's window is cut at the image's own resolution), several replicas or processes (the
    buffer lives on one device). tf.data and ``augment_on host`` are refused where the site is
    chosen (:func:`pick_pipeline`, :func:`pick_augment_site`)."""
    if data.tile:
        raise ConfigError("cache device with tile: tiles are cut at the images' own "
                          "resolution, which the images kept on the device do not have yet; use "
                          "--cache ram", "cache", "tile")
    if placement.replicas > 1 or placement.group.several or placement.strategy is not None:
        raise ConfigError(f"cache device with {placement.replicas} replicas in "
                          f"{placement.group.count} process(es): the images are kept on one "
                          "device for now; use --cache ram (each replica's batches come from "
                          "the host)", "cache", "coordinator" if placement.group.several
                          else "cpu_replicas" if config.hardware.cpu_replicas else "gpus")


def check_device_room(layout: DeviceLayout) -> None:
    """Refuse (NotEnoughMemory, exit 2, with the figures) images that would take more than
    :data:`DEVICE_SHARE` of the accelerator's memory (the CPU's: half the memory available), or
    more than :data:`~yolo3.data.device_cache.MAX_PIXELS` pixels."""
    if layout.pixels > MAX_PIXELS:
        raise NotEnoughMemory(
            f"--cache device: the {len(layout)} decoded images are {layout.pixels:,} pixels "
            f"({gigabytes(layout.nbytes)}); the device reads at most {MAX_PIXELS:,} "
            "(int32 rows); use --cache ram or disk")
    total, device = accelerator_memory(keras.backend.backend(), "cache device")
    if total is None:  # the device is this machine's CPU: its memory holds them
        check_ram(layout.nbytes, len(layout), kind="device")
        return
    if layout.nbytes > DEVICE_SHARE * total:
        raise NotEnoughMemory(
            f"--cache device: the {len(layout)} decoded images need {gigabytes(layout.nbytes)}, "
            f"more than {DEVICE_SHARE:.0%} of the {device} (the rest is the training step's); "
            "use --cache ram or disk")


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
             repeat: bool = False, feed: str = "threads") -> Any:
    """``records`` batched as ``config`` says by ``pipeline`` (the numpy pipeline's ``feed``)."""
    if pipeline == "tf":
        from yolo3.data.pipeline import make_dataset  # imports TensorFlow: tf.data only
        dataset = make_dataset(records, config)
        return dataset.repeat() if repeat else dataset
    return NumpyBatches(records, config, workers=workers or None, repeat=repeat, feed=feed)


def pick_feed(config: TrainConfig) -> str:
    """``threads`` or ``processes``: who makes the numpy pipeline's training batches. ``auto``:
    processes from :data:`~yolo3.config.choices.PROCESS_FEED_FROM` workers. Threads share the
    GIL with the planner's Python (a quarter of a batch's time with the cache and the colours on
    the device: two threads make 1.6x one thread's batches, so no number of threads makes more
    than about 4x); processes do not, and cost a second of start-up each run."""
    choice = config.data.data_feed
    if choice == "auto":
        workers = config.data.data_workers or default_workers()
        choice = "processes" if workers >= PROCESS_FEED_FROM else "threads"
    return choice


def dataset_configs(config: TrainConfig, data: TrainData, placement: Placement
                    ) -> Tuple[DatasetConfig, DatasetConfig]:
    """The training and validation :class:`~yolo3.data.dataset_config.DatasetConfig` of a run."""
    # JAX splits every batch evenly over the wrapper's devices: validation's last partial batch
    # is left out of val_loss there (the mAP evaluation sees every image)
    # (too few for one batch is refused earlier: yolo3.training.placement.pick_strategy)
    whole_batches = placement.uses_wrapper and keras.backend.backend() == "jax"
    training, validation = _stream_configs(
        config, data, placement.global_batch, whole_batches,
        (placement.group.index, placement.group.count),
        pick_augment_site(config, placement) == "device")
    if config.data.cache == "device" and training.tiles is None:  # one buffer for both
        layout = _kept_layout(data, training, validation)
        training = replace(training, device_layout=layout)
        validation = replace(validation, device_layout=layout)
    return training, validation


def kept_layout(config: TrainConfig, data: TrainData) -> DeviceLayout:
    """Where each image of a ``cache device`` run lies in the buffer on the device (its size
    known before any placement: the batch choice leaves it room)."""
    return _kept_layout(data, *_stream_configs(config, data, 1, False, (0, 1), True))


def _kept_layout(data: TrainData, training: DatasetConfig, validation: DatasetConfig
                 ) -> DeviceLayout:
    """Training's images, then validation's, each at its stream's longest side, each once."""
    return DeviceLayout.of([(data.records, cache_longest_side(training)),
                            (data.val_records, cache_longest_side(validation))])


def _stream_configs(config: TrainConfig, data: TrainData, global_batch: int,
                    whole_batches: bool, shard: Tuple[int, int], device: bool
                    ) -> Tuple[DatasetConfig, DatasetConfig]:
    """The two configs, without the buffer's layout: ``device``, the pixel work on the device."""
    settings = config.data
    shapes = (data.spec.multi_scale_shapes(*settings.multi_scale, data.input_hw)
              if settings.multi_scale else None)
    augment = AugmentConfig.preset(settings.augment)
    if augment is not None and settings.mosaic:
        augment = replace(augment, mosaic=settings.mosaic)
    targets = data.head.target_encoding(data.num_classes, config.recipe.assign_iou)
    kept = settings.cache == "device"  # the images on the device: plans only cross
    validation = DatasetConfig(data.input_hw, global_batch,
                               training=False, targets=targets, max_boxes=settings.max_boxes,
                               seed=config.seed, augment=None,
                               drop_remainder=True if whole_batches else None,
                               image_cache="none" if kept else settings.cache,
                               device_colour=device and not kept, device_images=kept,
                               shard=shard)
    tiles = (TileSampling(data.tile, settings.tile_whole, settings.tile_background,
                          whole_from=settings.tile_whole_from) if data.tile else None)
    training = replace(validation, training=True, augment=augment, multi_scale=(
        MultiScale(shapes, settings.multi_scale_every) if shapes else None), tiles=tiles)
    return training, validation


def first_batches(config: TrainConfig, data: TrainData, placement: Placement) -> NumpyBatches:
    """The run's training batches as images and boxes, without target encoding: the NumPy
    pipeline's (equal to tf.data's for the same seed), for drawing what the model is given."""
    training, _ = dataset_configs(config, data, placement)
    return NumpyBatches(data.records, replace(training, targets=None, device_colour=False,
                                              device_images=False, device_layout=None,
                                              image_cache="none", shard=(0, 1)),
                        workers=0, repeat=True)


def make_datasets(config: TrainConfig, data: TrainData, placement: Placement,
                  first_epoch: int = 0) -> Tuple[Any, Any]:
    """Training (augmented, shuffled, mosaic, multi-scale and tiled as configured) and validation
    (letterboxed at ``input_hw``) batches of the global batch, with the padded boxes last:
    tf.data datasets or :class:`~yolo3.data.numpy_pipeline.NumpyBatches`
    (:func:`pick_pipeline`). The training batches begin where ``fit``'s epoch ``first_epoch``
    (0-based: the epochs already trained) begins (:func:`stream_position`)."""
    pipeline = pick_pipeline(config, placement)
    training, validation = dataset_configs(config, data, placement)
    epoch, batch = stream_position(config, placement, epoch_batches(len(data.records), training),
                                   first_epoch)
    training = replace(training, first_epoch=epoch, first_batch=batch)
    settings = config.data
    workers = settings.data_workers
    feed = pick_feed(config)
    train_ds = _batches(data.records, training, pipeline, workers,
                        repeat=bool(config.schedule.steps_per_epoch), feed=feed)
    val_ds = _batches(data.val_records, validation, pipeline, workers)
    site = ("images, geometry and colours on the device" if training.device_images else
            f"colours on the {'device' if training.device_colour else 'host'}")
    logger.info("input pipeline: %s", "tf.data" if pipeline == "tf" else
                f"NumPy/OpenCV, {train_ds.feed_workers} worker {feed}, {site}, "
                f"cache {settings.cache}")
    if placement.strategy is not None:
        train_ds, val_ds = shard_by_data(train_ds), shard_by_data(val_ds)
    return train_ds, val_ds


def stream_position(config: TrainConfig, placement: Placement, per_epoch: int,
                    fit_epoch: int) -> Tuple[int, int]:
    """Where ``fit``'s epoch ``fit_epoch`` (0-based) begins in the training batches, as
    ``(planner epoch, batch)``: the planner's epoch itself when an epoch is one pass
    (``batch`` 0); with ``steps_per_epoch``, the batches are one stream of passes of
    ``per_epoch`` batches each, ``placement.steps`` to a ``fit`` epoch."""
    if not config.schedule.steps_per_epoch:
        return int(fit_epoch), 0
    return divmod(int(fit_epoch) * int(placement.steps), int(per_epoch))


def datasets_from(config: TrainConfig, data: TrainData, placement: Placement,
                  datasets: Tuple[Any, Any], fit_epoch: int) -> Tuple[Any, Any]:
    """``datasets`` ready for a ``fit`` whose first epoch is ``fit_epoch`` (0-based), so that
    every epoch gets the batches an unbroken run gives it, whatever stage it is in: the NumPy
    pipeline's training batches moved there (their image cache and workers kept); tf.data's,
    which hold no cache, made again (:func:`make_datasets`)."""
    train_ds, _ = datasets
    if isinstance(train_ds, NumpyBatches):
        train_ds.start_at(*stream_position(config, placement, train_ds.per_epoch, fit_epoch))
        return datasets
    return make_datasets(config, data, placement, fit_epoch)


def batch_norm_images(config: TrainConfig, data: TrainData,
                      group: ProcessGroup = SINGLE) -> Optional[Any]:
    """The training images (``bn_stats_images`` of them, a seeded choice, letterboxed at the input
    size, no augmentation, decoded once and cached) over which the batch-norm statistics are
    recomputed, from the run's pipeline; None when ``bn_stats_images`` is 0. With several
    processes (``group``), this process's whole batches of them (``[]`` when it has none), the
    others' never decoded here."""
    count = min(int(config.recipe.bn_stats_images), len(data.records))
    if count <= 0:
        return None
    order = np.random.default_rng(config.seed).permutation(len(data.records))[:count]
    records = [data.records[i] for i in sorted(order)]
    size = min(16, count)
    mine = group.share(-(-count // size))  # batch k goes to process k mod count
    records = [r for k in mine for r in records[k * size:(k + 1) * size]]
    if not records:
        return []
    return _batches(records, DatasetConfig(
        data.input_hw, size, training=False, max_boxes=config.data.max_boxes,
        seed=config.seed, augment=None, cache=True), pick_pipeline(config),
        config.data.data_workers)


def device_feed(config: TrainConfig, placement: Placement, datasets: Tuple[Any, Any],
                progress: bool = False) -> Optional[Callable[[keras.Model], keras.Model]]:
    """What the model ``fit`` runs puts before the template, for the run's whole life (every
    stage): None (float32 images from the host); the colours on the device
    (:func:`~yolo3.modeling.pixel_input.with_planned_pixels`); or, with ``cache device``, the
    images kept there: the buffer filled once here (``progress``: a bar), copied to the device
    in one :class:`~yolo3.modeling.device_images.DeviceImages` layer every stage shares
    (:func:`~yolo3.modeling.device_images.with_device_images`)."""
    if pick_augment_site(config, placement) != "device":
        return None
    layout = getattr(getattr(datasets[0], "config", None), "device_layout", None)
    if layout is None:
        return with_planned_pixels
    start = time.perf_counter()
    images = layout.fill(progress=progress)
    with placement.scope():
        kept = DeviceImages(images, name="device_images")
    del images  # the device's copy is the one kept
    logger.log(NOTICE, "images on the device: %d, %s, in %.1f s", len(layout),
               gigabytes(layout.nbytes), time.perf_counter() - start)
    return lambda template: with_device_images(template, kept)
