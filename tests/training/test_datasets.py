"""yolo3.training.datasets: the training and validation batches of a run, the images of the
batch-norm statistics, and how a tf.distribute strategy splits the batches."""
from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
import tensorflow as tf

from yolo3.training.data_step import prepare_data
from yolo3.training.datasets import (
    batch_norm_images,
    datasets_from,
    make_datasets,
    shard_by_data,
    stream_position,
)
from yolo3.training.placement import pick_strategy


def test_batches_are_the_global_batch_with_the_padded_boxes_last(step_config):
    config = step_config(val_split=0.2, augment="none", mosaic=0.0)
    data = prepare_data(config)
    train_ds, val_ds = make_datasets(config, data, pick_strategy(config, len(data.records)))
    (images, y_s32, y_s16, boxes), dummy = next(iter(train_ds))  # y_true per scale encoded
    assert images.shape == (2, 64, 64, 3) and boxes.shape == (2, config.data.max_boxes, 5)
    assert y_s32.shape == (2, 2, 2, 3, 8) and y_s16.shape == (2, 4, 4, 3, 8)
    assert dummy.shape == (2,)  # the training model's output is its loss: no labels
    (val_images, *_), _ = next(iter(val_ds))
    assert val_images.shape[1:] == (64, 64, 3)


def test_multi_scale_batches_take_each_size_of_the_registry(step_config):
    config = step_config(multi_scale=(64, 96), multi_scale_every=1, augment="none", mosaic=0.0)
    data = prepare_data(config)
    train_ds, _ = make_datasets(config, data, pick_strategy(config, len(data.records)))
    sizes = {tuple(x[0].shape[1:3]) for x, _ in train_ds.repeat().take(12)}
    assert sizes == {(64, 64), (96, 96)}


def test_steps_per_epoch_repeat_the_training_set(step_config):
    config = step_config(steps_per_epoch=50, augment="none", mosaic=0.0)
    data = prepare_data(config)
    train_ds, _ = make_datasets(config, data, pick_strategy(config, len(data.records)))
    assert sum(1 for _ in train_ds.take(50)) == 50  # more than one pass over 8 images


def _boxes(batch) -> np.ndarray:
    (*_, boxes), _ = batch
    return np.asarray(boxes)


@pytest.mark.parametrize("pipeline", ["tf", "numpy"])
@pytest.mark.parametrize("steps", [None, 3])
def test_a_fit_begun_later_gets_the_batches_an_unbroken_run_gets(step_config, pipeline, steps):
    """What --resume and a later stage start from: fit epoch 2 begins where an unbroken run's
    third epoch begins, with steps_per_epoch (a stream: 3 steps of 4-batch passes) or without."""
    config = step_config(steps_per_epoch=steps, pipeline=pipeline, mosaic=0.5)
    data = prepare_data(config)
    placement = pick_strategy(config, len(data.records))
    per_epoch = len(data.records) // 2
    assert per_epoch == 4 and placement.steps == (steps or 4)
    assert stream_position(config, placement, per_epoch, 2) == ((1, 2) if steps else (2, 0))
    unbroken = make_datasets(config, data, placement)
    if pipeline == "tf" and not steps:
        expected = [_boxes(b) for _ in range(3) for b in unbroken[0]][2 * per_epoch:]
    elif pipeline == "tf":
        expected = [_boxes(b) for b in unbroken[0].take(9)][6:]
    elif not steps:  # Keras ends each pass with on_epoch_end
        for _ in range(2):
            list(unbroken[0])
            unbroken[0].on_epoch_end()
        expected = [_boxes(b) for b in unbroken[0]]
    else:
        expected = [_boxes(unbroken[0][k]) for k in range(6, 9)]
    if pipeline == "numpy":
        unbroken[0].start_at(0)  # back where a new run begins: datasets_from must move it
    later = datasets_from(config, data, placement, unbroken, 2)
    train_ds = later[0]
    got = ([_boxes(b) for b in train_ds.take(3)] if pipeline == "tf" and steps else
           [_boxes(b) for b in train_ds] if not steps else
           [_boxes(train_ds[k]) for k in range(3)])
    assert len(got) == len(expected) > 0
    for a, b in zip(got, expected):
        np.testing.assert_array_equal(a, b)
    assert (train_ds is unbroken[0]) == (pipeline == "numpy")  # the cache and workers kept
    for dataset in unbroken + later:
        getattr(dataset, "close", lambda: None)()


def test_batch_norm_images_are_a_seeded_choice_or_none(step_config):
    config = step_config(bn_stats_images=4)
    data = prepare_data(config)
    first = np.concatenate([x.numpy() for x, _ in batch_norm_images(config, data)])
    again = np.concatenate([x.numpy() for x, _ in batch_norm_images(config, data)])
    assert first.shape == (4, 64, 64, 3)
    np.testing.assert_array_equal(first, again)
    assert batch_norm_images(step_config(bn_stats_images=0), data) is None


def test_a_strategy_splits_each_global_batch_by_data():
    dataset = shard_by_data(tf.data.Dataset.range(8).batch(4))
    policy = dataset.options().experimental_distribute.auto_shard_policy
    assert policy == tf.data.experimental.AutoShardPolicy.DATA


def test_tiled_training_batches_show_objects_at_native_resolution(step_config):
    # no hand-over: every object drawn gets its window (these objects are large at the input)
    config = step_config(augment="none", tile=32, tile_whole=0.0, tile_background=0.0,
                         tile_whole_from=0.0)
    data = prepare_data(config)
    assert data.tile == 32
    train_ds, val_ds = make_datasets(config, data, pick_strategy(config, len(data.records)))
    native = np.concatenate([np.sqrt(np.prod(r.boxes[:, 2:4] - r.boxes[:, :2], axis=1))
                             for r in data.records])
    sides = []
    batches = [batch for _ in range(6) for batch in train_ds]  # six epochs: the windows vary
    for (images, *_, boxes), _ in batches:
        b = boxes.numpy()
        real = b[..., 2] > 0
        sides.append(np.sqrt(np.prod(b[..., 2:4] - b[..., :2], axis=-1))[real])
        assert images.shape[1:] == (64, 64, 3)
    # 32 px windows of 64 px images, letterboxed to 64: objects twice their native size, never
    # more (those clipped by the window keep at least half their area); whole images: once
    sides = np.concatenate(sides)
    assert np.median(sides) > 1.5 * np.median(native)
    assert sides.max() <= 2 * native.max() + 1e-3
    # validation stays whole
    untiled = step_config(augment="none")
    _, plain_val = make_datasets(untiled, prepare_data(untiled),
                                 pick_strategy(untiled, len(data.records)))
    (tiled_images, *_), _ = next(iter(val_ds))
    (plain_images, *_), _ = next(iter(plain_val))
    np.testing.assert_array_equal(tiled_images.numpy(), plain_images.numpy())


def test_the_colours_run_on_the_host_on_a_cpu_and_where_asked(step_config, monkeypatch):
    from yolo3.config.train_config import ConfigError
    from yolo3.training import datasets
    assert datasets.pick_augment_site(step_config()) == "host"  # no GPU here
    assert datasets.pick_augment_site(step_config(augment_on="device")) == "device"
    assert datasets.pick_pipeline(step_config(augment_on="device")) == "numpy"
    assert datasets.pick_pipeline(step_config(cache="ram")) == "numpy"
    monkeypatch.setattr(datasets, "on_gpu", lambda config: True)
    assert datasets.pick_augment_site(step_config(pipeline="numpy")) == "device"
    assert datasets.pick_augment_site(step_config(pipeline="numpy", augment_on="host")) == "host"
    assert datasets.pick_augment_site(step_config(pipeline="tf")) == "host"
    with pytest.raises(ConfigError, match="augment_on device with pipeline tf") as e:
        datasets.pick_augment_site(step_config(pipeline="tf", augment_on="device"))
    assert set(e.value.settings) == {"augment_on", "pipeline"}
    with pytest.raises(ConfigError, match="cache ram with pipeline tf"):
        datasets.pick_pipeline(step_config(pipeline="tf", cache="ram"))


def test_device_colours_feed_uint8_batches_with_their_plans(step_config):
    config = step_config(val_split=0.2, augment_on="device", mosaic=0.5)
    data = prepare_data(config)
    train_ds, val_ds = make_datasets(config, data, pick_strategy(config, len(data.records)))
    (images, plans, *_), _ = train_ds[0]
    assert images.dtype == np.uint8 and plans.shape == (2, 14)
    (val_images, val_plans, *_), _ = val_ds[0]
    assert val_images.dtype == np.uint8
    assert val_plans[:, 2:].tolist() == [[0.0, 1.0, 1.0] * 4] * len(val_plans)
    train_ds.close()
    val_ds.close()


def test_the_cache_is_sized_before_training_and_a_ram_cache_that_cannot_fit_refused(
        step_config, monkeypatch, caplog):
    import logging

    from yolo3.core.errors import NotEnoughMemory
    from yolo3.data import image_cache
    from yolo3.training.datasets import check_image_cache
    config = step_config(val_split=0.2, cache="ram")
    data = prepare_data(config)
    placement = pick_strategy(config, len(data.records))
    with caplog.at_level(logging.INFO, logger="yolo3.training.datasets"):
        n_bytes = check_image_cache(config, data, placement)
    assert n_bytes == 10 * 64 * 64 * 3  # 64 px images: kept whole
    # the longest a 64 px input needs: 64 x 1.3, the largest scale of the augmentation
    assert config.data.augment == "light"
    assert "decoded-image cache (ram): 10 images, 0.0 GB, longer side at most 84 px" in caplog.text
    assert check_image_cache(step_config(val_split=0.2), data, placement) == 0
    monkeypatch.setattr(image_cache, "available_memory", lambda: 100_000)
    with pytest.raises(NotEnoughMemory, match="10 decoded images need"):
        check_image_cache(config, data, placement)
    assert check_image_cache(step_config(val_split=0.2, cache="disk"), data, placement) == n_bytes


def test_the_feed_is_threads_below_four_workers_and_processes_from_four(step_config,
                                                                         monkeypatch):
    from yolo3.training import datasets
    assert datasets.pick_feed(step_config(data_workers=2)) == "threads"
    assert datasets.pick_feed(step_config(data_workers=4)) == "processes"
    assert datasets.pick_feed(step_config(data_workers=16, data_feed="threads")) == "threads"
    assert datasets.pick_feed(step_config(data_workers=1, data_feed="processes")) == "processes"
    monkeypatch.setattr(datasets, "default_workers", lambda: 16)  # 0: one per core
    assert datasets.pick_feed(step_config()) == "processes"
    monkeypatch.setattr(datasets, "default_workers", lambda: 2)
    assert datasets.pick_feed(step_config()) == "threads"


def test_images_kept_on_the_device_send_plans_into_one_buffer(step_config):
    """``cache device``: training's and validation's images in one layout (validation's after
    training's), nothing decoded on the host per batch, each batch the canvas's size, the window
    plans, where each window's image begins, the colour plans and the targets."""
    from yolo3.training import datasets
    config = step_config(val_split=0.2, cache="device", mosaic=0.5)
    assert datasets.pick_augment_site(config) == "device"  # on a CPU too: the images are there
    assert datasets.pick_pipeline(config) == "numpy"
    data = prepare_data(config)
    placement = pick_strategy(config, len(data.records))
    training, validation = datasets.dataset_configs(config, data, placement)
    assert training.device_layout is validation.device_layout
    assert training.device_images and not training.device_colour
    assert training.image_cache == "none"
    layout = training.device_layout
    assert len(layout) == len(data.records) + len(data.val_records)
    train_ds, val_ds = make_datasets(config, data, placement)
    try:
        (canvas, plans, starts, colours, *targets), _ = train_ds[0]
        assert canvas.shape == (2, 64, 64, 0) and plans.shape == (2, 4, 11)
        assert starts.dtype == np.int32 and colours.shape == (2, 14)
        assert train_ds.maker.images.kind == "none" and not train_ds.maker.images._ram
        (_, _, val_starts, _, *_), _ = val_ds[0]
        first_val = layout.starts[len(data.records)]
        assert val_starts[:, 0].min() >= first_val  # validation's images after training's
    finally:
        train_ds.close()
        val_ds.close()


def test_what_the_images_kept_on_the_device_cannot_do_is_refused_before_anything(
        step_config, monkeypatch):
    from yolo3.config.train_config import ConfigError
    from yolo3.core.errors import NotEnoughMemory
    from yolo3.data import image_cache
    from yolo3.training import datasets
    config = step_config(val_split=0.2, cache="device")
    data = prepare_data(config)
    placement = pick_strategy(config, len(data.records))

    def refused(settings, match, names, data=data, placement=placement):
        with pytest.raises(ConfigError, match=match) as e:
            datasets.check_image_cache(step_config(val_split=0.2, cache="device", **settings),
                                       data, placement)
        assert set(e.value.settings) == set(names)

    refused({"augment_on": "host"}, "cache device with augment_on host", {"cache", "augment_on"})
    refused({"pipeline": "tf"}, "cache device with pipeline tf", {"cache", "pipeline"})
    tiled = replace(data, tile=32)
    refused({}, "cache device with tile", {"cache", "tile"}, data=tiled)
    two = step_config(val_split=0.2, cache="device", cpu_replicas=2)
    refused({"cpu_replicas": 2}, "with 2 replicas in 1 process", {"cache", "cpu_replicas"},
            placement=pick_strategy(two, len(data.records)))
    assert datasets.check_image_cache(config, data, placement) == 3 * sum(
        64 * 64 for _ in range(10))  # 64 px images, kept whole, each once
    monkeypatch.setattr(image_cache, "available_memory", lambda: 50_000)  # the CPU's memory
    with pytest.raises(NotEnoughMemory, match=r"--cache device: the 10 decoded images need"):
        datasets.check_image_cache(config, data, placement)
    monkeypatch.setattr(datasets, "accelerator_memory",
                        lambda backend, setting: (200_000, "0.0 GB on a GPU"))
    with pytest.raises(NotEnoughMemory, match=r"more than 30% of the 0.0 GB on a GPU"):
        datasets.check_image_cache(config, data, placement)
    monkeypatch.setattr(datasets, "accelerator_memory",
                        lambda backend, setting: (10 ** 9, "1.0 GB on a GPU"))
    datasets.check_image_cache(config, data, placement)  # fits there
    monkeypatch.setattr(datasets, "MAX_PIXELS", 1000)
    with pytest.raises(NotEnoughMemory, match=r"40,960 pixels .* the device reads at most 1,000"):
        datasets.check_image_cache(config, data, placement)


def test_the_model_fit_runs_is_chosen_by_where_the_pixels_are(step_config):
    from yolo3.modeling.pixel_input import with_planned_pixels
    from yolo3.training import datasets
    config = step_config(val_split=0.2)
    data = prepare_data(config)
    placement = pick_strategy(config, len(data.records))
    assert datasets.device_feed(config, placement, (None, None)) is None
    colours = step_config(val_split=0.2, augment_on="device")
    assert datasets.device_feed(colours, placement, make_datasets(colours, data, placement)
                                ) is with_planned_pixels
    kept = step_config(val_split=0.2, cache="device")
    batches = make_datasets(kept, data, placement)
    feed = datasets.device_feed(kept, placement, batches)
    import keras
    image = keras.Input((64, 64, 3))
    fed = feed(keras.Model(image, keras.layers.Dense(1)(image)))
    (buffer,) = fed.non_trainable_variables
    assert tuple(buffer.shape) == (batches[0].config.device_layout.pixels, 3)
    for ds in batches:
        ds.close()
