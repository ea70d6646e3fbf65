"""The NumPy/OpenCV input pipeline against tf.data: for the same plans, images within 2/255 on
average (no pixel past 8/255) and the encoded targets equal, in every variant, over two epochs;
its image operations against TensorFlow's; decoding against PIL; determinism whatever the workers."""
from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
import tensorflow as tf
from keras.src.trainers.data_adapters.py_dataset_adapter import PyDatasetAdapter
from PIL import Image

from yolo3.core.errors import AnnotationError
from yolo3.data.annotations import Record
from yolo3.data.augment import augment_image, mosaic_images
from yolo3.data.dataset_config import DatasetConfig, TargetEncoding, make_planner, record_geometry
from yolo3.data.draws import AugmentConfig, AugmentDraw, MultiScale, TileSampling
from yolo3.data.image_ops import (
    augment_image_np,
    decode_image_np,
    letterbox_image_np,
    mosaic_images_np,
)
from yolo3.data.images import load_image
from yolo3.data.numpy_pipeline import NumpyBatches
from yolo3.data.pipeline import make_dataset
from yolo3.ops.anchors import TINY_YOLO_ANCHORS
from yolo3.ops.letterbox import letterbox_tf

MEAN_LIMIT, MAX_LIMIT = 2 / 255, 8 / 255


def _scene(rng, h, w, n):
    """A textured image (smooth gradient, noise and solid boxes) and its boxes."""
    yy, xx = np.mgrid[0:h, 0:w]
    image = np.stack([xx * 255 / w, yy * 255 / h, (xx + yy) * 127 / (h + w)], -1)
    image = image + rng.normal(0, 12, image.shape)
    boxes = []
    for _ in range(n):
        bw, bh = rng.uniform(8, w / 2), rng.uniform(8, h / 2)
        x1, y1 = rng.uniform(0, w - bw), rng.uniform(0, h - bh)
        image[int(y1):int(y1 + bh), int(x1):int(x1 + bw)] = rng.uniform(0, 255, 3)
        boxes.append([x1, y1, x1 + bw, y1 + bh, rng.integers(3)])
    return np.clip(image, 0, 255).astype(np.uint8), np.array(boxes, np.float32).reshape(-1, 5)


@pytest.fixture(scope="module")
def records(tmp_path_factory):
    folder = tmp_path_factory.mktemp("numpy_pipeline")
    rng = np.random.default_rng(0)
    out = []
    for i, (h, w) in enumerate([(96, 128), (120, 90), (200, 160), (64, 64), (150, 220), (80, 100),
                                (128, 128), (90, 170)]):
        image, boxes = _scene(rng, h, w, int(rng.integers(1, 5)))
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
    adapter = PyDatasetAdapter(NumpyBatches(records, config, workers=3))
    pooled = []
    for _ in range(2):
        adapter.on_epoch_begin()
        pooled += list(adapter.get_numpy_iterator())
        adapter.on_epoch_end()
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


def test_a_plan_is_a_function_of_seed_epoch_and_index(records):
    config = VARIANTS["tiles and mosaic"]
    hws, _ = record_geometry(records)
    first, second = (make_planner(records, config, 11, hws) for _ in range(2))
    for epoch, index in [(3, 5), (0, 0), (7, 2)]:
        a, b = first.element(epoch, index), second.element(epoch, index)
        assert (a.sources, a.windows, a.draws, a.split_yx) == (b.sources, b.windows, b.draws,
                                                               b.split_yx)
        np.testing.assert_array_equal(a.boxes, b.boxes)
    assert first.element(0, 1).draws != first.element(1, 1).draws


@pytest.mark.parametrize("draw", [
    AugmentDraw((50, 70), (5, -3), False, 0.05, 1.3, 0.8),
    AugmentDraw((120, 40), (-30, 10), True, -0.08, 0.7, 1.4),
    AugmentDraw((20, 20), (60, 60), True, 0.0, 1.0, 1.0),   # off the canvas
    AugmentDraw((64, 96), (0, 0), False, 0.099, 1.5, 1.5),
], ids=["inside", "cropped and flipped", "off the canvas", "fills it"])
def test_the_image_operations_are_tensorflows(draw):
    rng = np.random.default_rng(1)
    image, _ = _scene(rng, 45, 60, 2)
    ours = augment_image_np(image, draw, (64, 96))
    theirs = augment_image(tf.constant(image, tf.float32) / 255, tf.constant(draw.new_hw),
                           tf.constant(draw.offset_hw), tf.constant(draw.flip),
                           tf.constant([draw.hue, draw.sat, draw.val], tf.float32),
                           tf.constant([64, 96])).numpy()
    assert ours.shape == theirs.shape == (64, 96, 3)
    diff = np.abs(ours - theirs)
    assert diff.mean() <= MEAN_LIMIT and diff.max() <= MAX_LIMIT
    # without the colour step: only the resize's rounding to uint8 differs
    plain = augment_image_np(image.astype(np.float32) / 255, draw, (64, 96), colours=False)
    ref = augment_image(tf.constant(image, tf.float32) / 255, tf.constant(draw.new_hw),
                        tf.constant(draw.offset_hw), tf.constant(draw.flip),
                        tf.constant([0.0, 1.0, 1.0]), tf.constant([64, 96]), colours=False)
    np.testing.assert_allclose(plain, ref.numpy(), atol=1e-5)


def test_mosaic_and_letterbox_are_tensorflows():
    rng = np.random.default_rng(2)
    canvases = [rng.uniform(size=(40, 60, 3)).astype(np.float32) for _ in range(4)]
    for split in [(10, 45), (30, 15), (20, 30)]:
        np.testing.assert_array_equal(
            mosaic_images_np(canvases, split),
            mosaic_images([tf.constant(c) for c in canvases], tf.constant(split),
                          tf.constant([40, 60])).numpy())
    image, _ = _scene(rng, 70, 130, 1)
    np.testing.assert_allclose(letterbox_image_np(image.astype(np.float32) / 255, (96, 96)),
                               letterbox_tf(image, (96, 96)).numpy(), atol=1e-5)


@pytest.mark.parametrize("orientation", range(1, 9))
def test_decoding_applies_the_exif_orientation_as_pil_does(tmp_path, orientation):
    rng = np.random.default_rng(orientation)
    raw = np.kron(rng.integers(0, 255, (3, 5, 3)), np.ones((8, 8, 1))).astype(np.uint8)
    path = tmp_path / "rot.jpg"
    exif = Image.Exif()
    exif[0x0112] = orientation
    Image.fromarray(raw).save(path, quality=100, subsampling=0, exif=exif.tobytes())
    ours = decode_image_np(str(path), orientation)
    theirs = load_image(path)
    assert ours.shape == theirs.shape and ours.dtype == np.uint8
    assert np.abs(ours.astype(int) - theirs).mean() < 1.0


def test_grey_palette_and_16_bit_images_decode_as_pil_reads_them(tmp_path):
    rng = np.random.default_rng(3)
    grey = rng.integers(0, 255, (20, 30)).astype(np.uint8)
    Image.fromarray(grey).save(tmp_path / "grey.png")
    Image.fromarray(grey).convert("P").save(tmp_path / "palette.png")
    Image.fromarray((grey.astype(np.uint16) * 257)).save(tmp_path / "deep.png")
    for name in ("grey.png", "palette.png", "deep.png"):
        path = str(tmp_path / name)
        np.testing.assert_array_equal(decode_image_np(path, 1), load_image(path))


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
