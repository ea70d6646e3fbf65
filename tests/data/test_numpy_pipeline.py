"""The NumPy/OpenCV input pipeline against tf.data: for the same plans, images within 2/255 on
average (no pixel past 8/255) and the encoded targets equal, in every variant, over two epochs;
its image operations against TensorFlow's; decoding against PIL; determinism whatever the workers."""
from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from PIL import Image
from scenes import textured_scene

from yolo3.core.errors import AnnotationError
from yolo3.data.annotations import Record
from yolo3.data.dataset_config import DatasetConfig, TargetEncoding
from yolo3.data.planner import AugmentConfig, MultiScale, TileSampling
from yolo3.data.image_ops import (
    decode_image_np,
)
from yolo3.data.numpy_pipeline import NumpyBatches
from yolo3.data.pipeline import make_dataset
from yolo3.modeling.keras_compat import py_dataset_epoch
from yolo3.ops.anchors import TINY_YOLO_ANCHORS

MEAN_LIMIT, MAX_LIMIT = 2 / 255, 8 / 255


@pytest.fixture(scope="module")
def records(tmp_path_factory):
    folder = tmp_path_factory.mktemp("numpy_pipeline")
    rng = np.random.default_rng(0)
    out = []
    for i, (h, w) in enumerate([(96, 128), (120, 90), (200, 160), (64, 64), (150, 220), (80, 100),
                                (128, 128), (90, 170)]):
        image, boxes = textured_scene(rng, h, w, int(rng.integers(1, 5)))
        path = folder / f"{i}.{'jpg' if i % 2 else 'png'}"
        Image.fromarray(image).save(path, **({"quality": 95} if i % 2 else {}))
        out.append(Record(str(path), boxes))
    return out


TARGETS = TargetEncoding(TINY_YOLO_ANCHORS, 3, true_boxes=True)
BASE = DatasetConfig((64, 64), 3, True, TARGETS, seed=4, max_boxes=12)
VARIANTS = {
    "validation": replace(BASE, training=False),
    "full augmentation": BASE,
    "light, no colour": replace(BASE, augment=AugmentConfig(hue=0.0, saturation=1.0, value=1.0)),
    "mosaic on every image": replace(BASE, augment=AugmentConfig(mosaic=1.0)),
    "mosaic on some": replace(BASE, augment=AugmentConfig(mosaic=0.5)),
    "tiles": replace(BASE, tiles=TileSampling(48, whole=0.2, background=0.2)),
    "tiles and mosaic": replace(BASE, tiles=TileSampling(48), augment=AugmentConfig(mosaic=1.0)),
    "multi-scale": replace(BASE, multi_scale=MultiScale(((32, 32), (64, 96), (96, 64)), 1)),
    "letterboxed training": replace(BASE, augment=None),
    "extra anchors": replace(BASE, targets=replace(TARGETS, assign_iou=0.2)),
    "anchor-free": replace(BASE, targets=TargetEncoding(None, 3)),
    "no targets": replace(BASE, targets=None),
    "kept partial batch": replace(BASE, drop_remainder=False),
    "cached": replace(BASE, training=False, cache=True, targets=None),
}


def _two_epochs_tf(records, config):
    dataset = make_dataset(records, config)
    return [batch for _ in range(2) for batch in dataset]


def _two_epochs_numpy(records, config, workers=1):
    batches = NumpyBatches(records, config, workers=workers)
    out = list(batches)
    batches.on_epoch_end()
    return out + list(batches)


def _flat(batch):
    """A batch -> its arrays, image first."""
    inputs = batch[0] if isinstance(batch[0], (tuple, list)) else batch
    return [np.asarray(x) for x in inputs]


@pytest.mark.parametrize("variant", list(VARIANTS))
def test_each_variant_gives_tf_datas_batches(records, variant):
    config = VARIANTS[variant]
    ours = _two_epochs_numpy(records, config)
    theirs = _two_epochs_tf(records, config)
    assert len(ours) == len(theirs) > 0
    for a, b in zip(ours, theirs):
        mine, ref = _flat(a), _flat(b)
        assert len(mine) == len(ref)
        assert mine[0].shape == ref[0].shape and mine[0].dtype == np.float32
        diff = np.abs(mine[0] - ref[0])
        assert diff.mean() <= MEAN_LIMIT and diff.max() <= MAX_LIMIT, (diff.mean(), diff.max())
        for x, y in zip(mine[1:], ref[1:]):  # y_true per scale and the padded boxes
            np.testing.assert_array_equal(x, y)
    # the second epoch is another draw
    if config.training and config.augment is not None:
        assert not np.array_equal(_flat(ours[0])[0], _flat(ours[len(ours) // 2])[0])


def test_the_same_seed_gives_the_same_batches_whatever_the_workers(records):
    config = VARIANTS["mosaic on some"]
    alone = _two_epochs_numpy(records, config, workers=1)
    dataset = NumpyBatches(records, config, workers=3)
    pooled = []
    for _ in range(2):
        batches, end = py_dataset_epoch(dataset)
        pooled += list(batches)
        end()
    assert len(alone) == len(pooled)
    for a, b in zip(alone, pooled):
        for x, y in zip(_flat(a), _flat(b)):
            np.testing.assert_array_equal(x, y)
    other = NumpyBatches(records, replace(config, seed=5), workers=1)[0]
    assert not np.array_equal(_flat(other)[0], _flat(alone[0])[0])


def test_a_repeated_stream_walks_through_the_epochs(records):
    config = VARIANTS["full augmentation"]
    per_epoch = _two_epochs_numpy(records, config)
    stream = NumpyBatches(records, config, workers=1, repeat=True)
    assert stream.num_batches is None and len(stream) == len(per_epoch) // 2
    for k, batch in enumerate(per_epoch):
        for x, y in zip(_flat(stream[k]), _flat(batch)):
            np.testing.assert_array_equal(x, y)
    with pytest.raises(IndexError):
        NumpyBatches(records, config, workers=1)[len(per_epoch)]


def _same(a, b):
    for x, y in zip(_flat(a), _flat(b)):
        np.testing.assert_array_equal(x, y)


@pytest.mark.parametrize("variant", ["full augmentation", "mosaic on some", "multi-scale"])
def test_batches_begun_later_are_those_an_unbroken_run_gets_there(records, variant):
    """--resume and later stages: a pass begun at epoch e is epoch e's, whichever pipeline, and a
    stream begun at (e, b) goes on as the unbroken stream does from there."""
    config = VARIANTS[variant]
    unbroken = _two_epochs_numpy(records, config)  # epochs 0 and 1
    per_epoch = len(unbroken) // 2
    later = NumpyBatches(records, config, workers=1)
    later.start_at(1)
    for k in range(per_epoch):
        _same(later[k], unbroken[per_epoch + k])
    made = NumpyBatches(records, replace(config, first_epoch=1), workers=1)
    _same(made[0], unbroken[per_epoch])
    theirs = list(make_dataset(records, replace(config, first_epoch=1)))
    assert len(theirs) == per_epoch
    np.testing.assert_array_equal(_flat(theirs[-1])[-1], _flat(unbroken[-1])[-1])  # the boxes
    stream = NumpyBatches(records, config, workers=2, repeat=True)
    stream.start_at(0, 1)
    for k in range(len(unbroken) - 1):
        _same(stream[k], unbroken[1 + k])
    stream.start_at(1)
    _same(stream[0], unbroken[per_epoch])
    # tf.data's stream begun at batch 1: the rest of epoch 0, then epoch 1 whole
    tf_stream = make_dataset(records, replace(config, first_batch=1)).repeat()
    boxes = [_flat(batch)[-1] for batch in tf_stream.take(len(unbroken) - 1)]
    for k, b in enumerate(boxes):
        np.testing.assert_array_equal(b, _flat(unbroken[1 + k])[-1])
    with pytest.raises(ValueError, match="batch 0"):
        later.start_at(1, 1)  # a pass (no stream) begins at its first batch


def test_a_file_that_does_not_decode_is_named(tmp_path, records):
    bad = tmp_path / "broken.jpg"
    bad.write_bytes(b"\xff\xd8\xff\xe0 not a jpeg")
    with pytest.raises(AnnotationError, match="broken.jpg"):
        decode_image_np(str(bad), 1)
    batches = NumpyBatches([*records[:2], Record(str(bad), np.zeros((0, 5), np.float32),
                                                 (10, 10), 1)],
                           replace(BASE, training=False, batch_size=3), workers=1)
    with pytest.raises(AnnotationError, match="broken.jpg"):
        batches[0]


DEVICE_VARIANTS = ["validation", "full augmentation", "light, no colour", "mosaic on some",
                   "tiles and mosaic", "multi-scale", "letterboxed training", "anchor-free"]


@pytest.mark.parametrize("variant", DEVICE_VARIANTS)
def test_uint8_batches_with_colour_plans_are_the_float_batches_once_coloured(records, variant):
    """``device_colour``: the same plans as uint8 canvases and colour plans, which the device's
    step turns into the host's float images (to float rounding of the HSV formula; exactly where
    no colour changes), with the same targets."""
    from yolo3.modeling.pixel_input import PlannedPixels
    config = VARIANTS[variant]
    host = _two_epochs_numpy(records, config)
    device = _two_epochs_numpy(records, replace(config, device_colour=True))
    assert len(host) == len(device)
    for a, b in zip(host, device):
        floats, (pixels, plans, *rest) = _flat(a), _flat(b)
        assert pixels.dtype == np.uint8 and plans.shape == (len(pixels), 14)
        coloured = np.asarray(PlannedPixels()(pixels, plans))
        if config.augment is None or not config.augment.colours:
            np.testing.assert_array_equal(coloured, floats[0])
        else:
            np.testing.assert_allclose(coloured, floats[0], rtol=0, atol=4e-6)
        for x, y in zip(floats[1:], rest):
            np.testing.assert_array_equal(x, y)


@pytest.mark.parametrize("kind", ["ram", "disk"])
def test_a_cache_of_images_no_larger_than_needed_gives_the_same_batches(records, kind,
                                                                        tmp_path, monkeypatch):
    """Every image here is smaller than the recipe's longest side (64 px x scale 2): the cache
    keeps it whole, and the batches are the uncached ones, over two epochs."""
    monkeypatch.setenv("YOLO3_CACHE_DIR", str(tmp_path))
    config = replace(VARIANTS["mosaic on some"], augment=AugmentConfig(mosaic=0.5,
                                                                       scale=(0.25, 4.0)))
    plain = _two_epochs_numpy(records, config)
    cached = NumpyBatches(records, replace(config, image_cache=kind), workers=2)
    assert cached.images.longest == 256 and cached.images.nbytes() > 0
    got = list(cached)
    cached.on_epoch_end()
    got += list(cached)
    for a, b in zip(plain, got):
        for x, y in zip(_flat(a), _flat(b)):
            np.testing.assert_array_equal(x, y)
    if kind == "disk":
        assert len(list((tmp_path / "decoded").glob("*.y3img"))) == len(records)


def test_a_smaller_cached_copy_keeps_the_boxes_and_the_letterbox_geometry(records):
    """Validation at 64 px keeps at most 64 px: the letterbox is drawn for the displayed size,
    so the boxes and targets are the uncached ones and the picture differs only by resampling."""
    config = VARIANTS["validation"]
    plain = NumpyBatches(records, config, workers=1)
    cached = NumpyBatches(records, replace(config, image_cache="ram"), workers=1)
    assert cached.images.longest == 64 and cached.images.hw(4) == (44, 64)
    for k in range(len(plain)):
        a, b = _flat(plain[k]), _flat(cached[k])
        assert np.abs(a[0] - b[0]).mean() < 4 / 255
        for x, y in zip(a[1:], b[1:]):
            np.testing.assert_array_equal(x, y)


def test_the_feed_keeps_its_threads_across_epochs_and_lets_them_go_on_close(records):
    config = VARIANTS["full augmentation"]
    dataset = NumpyBatches(records, config, workers=2, max_queue_size=2)
    epochs, threads = [], None
    for _ in range(3):
        epochs.append([_flat(b)[0] for b in dataset])
        dataset.on_epoch_end()
        pool = set(dataset._feed._pool._threads)  # the executor's own threads
        assert len(pool) == 2 and all(t.is_alive() for t in pool)
        assert threads is None or pool == threads  # the same threads, epoch after epoch
        threads = pool
    # the next epoch's first batches were made ahead, and are those of that epoch's plan
    alone = NumpyBatches(records, config, workers=1)
    alone.epoch = 2
    np.testing.assert_array_equal(epochs[2][0], _flat(alone[0])[0])
    lone = set(alone._feed._pool._threads)
    dataset.close()
    del alone  # dropped without close: its thread ends with it
    for thread in threads | lone:
        thread.join(timeout=10)
        assert not thread.is_alive()


def test_batches_asked_out_of_order_are_still_the_plans(records):
    config = VARIANTS["mosaic on some"]
    dataset = NumpyBatches(records, config, workers=2, max_queue_size=1)
    alone = NumpyBatches(records, config, workers=1)
    for k in [1, 0, 1, 0, 1]:
        np.testing.assert_array_equal(_flat(dataset[k])[0], _flat(alone.batch(0, k))[0])
    assert len(dataset._feed._pending) <= 2
    dataset.close()


@pytest.mark.slow  # CI runs it (.ci/run): a fresh process, 5 s; test_feeds.py interrupts processes
def test_ctrl_c_while_the_feed_works_ends_the_process_at_once(records, tmp_path):
    """An interrupt in the middle of an epoch: KeyboardInterrupt reaches the caller and the
    process exits without waiting on the batches queued ahead (no thread left running)."""
    import os
    import signal
    import subprocess
    import sys
    import time
    script = tmp_path / "interrupt.py"
    script.write_text(f"""
import os, signal, sys, time
import numpy as np
from yolo3.data.annotations import Record
from yolo3.data.dataset_config import DatasetConfig
from yolo3.data.planner import AugmentConfig
from yolo3.data.numpy_pipeline import NumpyBatches
signal.signal(signal.SIGINT, signal.default_int_handler)  # as at a terminal (a background suite's is ignored)
records = [Record(p, np.zeros((0, 5), np.float32)) for p in {[r.path for r in records]!r}]
dataset = NumpyBatches(records * 50, DatasetConfig((256, 256), 4, True, seed=1,
                       augment=AugmentConfig(mosaic=1.0)), workers=2, max_queue_size=64)
try:
    for k, batch in enumerate(dataset):
        if k == 2:
            print("ready", flush=True)
            time.sleep(60)
except KeyboardInterrupt:
    print("interrupted", flush=True)
    sys.exit(130)
""")
    env = dict(os.environ, PYTHONPATH=os.getcwd())
    child = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True,
                             env=env)
    assert child.stdout.readline().strip() == "ready"
    start = time.monotonic()
    child.send_signal(signal.SIGINT)
    out, _ = child.communicate(timeout=60)
    assert child.returncode == 130 and "interrupted" in out
    assert time.monotonic() - start < 30


def test_no_workers_makes_each_batch_when_asked_and_nothing_ahead(records):
    config = VARIANTS["mosaic on some"]
    dataset = NumpyBatches(records, config, workers=0, repeat=True)
    assert dataset._feed is None and dataset.workers == 1  # Keras's own enqueuer stays off
    alone = NumpyBatches(records, config, workers=1, repeat=True)
    for k in (3, 0):
        for x, y in zip(_flat(dataset[k]), _flat(alone[k])):
            np.testing.assert_array_equal(x, y)
    alone.close()
