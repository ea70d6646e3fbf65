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
from yolo3.data.draws import AugmentConfig, MultiScale, TileSampling
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
