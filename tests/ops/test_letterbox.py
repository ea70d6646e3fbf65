"""One letterbox: the training pipeline, the detector and the exported models feed the network the
same pixels and map boxes back alike."""
from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf
from PIL import Image

from yolo3.data.annotations import Record
from yolo3.data.pipeline import make_dataset
from yolo3.modeling.bodies import build_spec_body
from yolo3.ops.anchors import TINY_YOLO_ANCHORS
from yolo3.ops.letterbox import (
    PAD_VALUE,
    boxes_to_image_np,
    boxes_to_input,
    geometry,
    geometry_np,
    letterbox_np,
)

INPUT = (96, 128)
SHAPES = [(60, 200), (200, 60), (96, 128), (37, 41)]


@pytest.fixture(scope="module")
def images(tmp_path_factory):
    folder = tmp_path_factory.mktemp("lb")
    rng = np.random.default_rng(3)
    out = []
    for i, (h, w) in enumerate(SHAPES):
        array = rng.integers(0, 256, (h, w, 3), dtype=np.uint8)
        path = folder / f"{i}.png"
        Image.fromarray(array).save(path)
        out.append((str(path), array))
    return out


@pytest.fixture(scope="module")
def detector(tmp_path_factory):
    import keras

    from yolo3.checkpoint.metadata import ModelInfo
    from yolo3.config.specs import get_spec
    from yolo3.inference.detector import YOLO
    keras.utils.set_random_seed(0)
    spec = get_spec("tiny")
    body = build_spec_body(spec, 2)
    info = ModelInfo(spec.default_anchors(), spec.default_masks(), 2, ["a", "b"], spec.name, INPUT)
    return YOLO.from_body(body, info, precision="float32")


def test_pipeline_detector_and_export_feed_identical_pixels(images, detector, tmp_path):
    from yolo3.export import export_tflite
    from yolo3.inference.exported import TFLiteDetector
    records = [Record(path, np.zeros((0, 5), np.float32)) for path, _ in images]
    tflite = tmp_path / "m.tflite"
    export_tflite(detector, tflite, input_dtype="float32")
    lite = TFLiteDetector(tflite)
    for (path, array), record in zip(images, records):
        ds = make_dataset([record], INPUT, TINY_YOLO_ANCHORS, 2, 1, training=False, targets=False)
        from_pipeline = next(iter(ds))[0][0].numpy()
        from_detector = detector.preprocess(array)
        from_export = lite.prepare(array)
        assert from_pipeline.shape == (*INPUT, 3) and from_pipeline.dtype == np.float32
        np.testing.assert_array_equal(from_pipeline, from_detector)
        np.testing.assert_array_equal(from_pipeline, from_export)
        np.testing.assert_array_equal(from_detector, letterbox_np(array, INPUT))


def test_padding_value_and_placement(images):
    _, array = images[0]  # 60 x 200 into 96 x 128: scale 0.64 -> 38 x 128, offset 29 rows
    x = letterbox_np(array, INPUT)
    new_hw, offset, _ = geometry_np(array.shape[:2], INPUT)
    assert tuple(new_hw) == (38, 128) and tuple(offset) == (29, 0)
    assert np.all(x[:29] == np.float32(PAD_VALUE)) and np.all(x[29 + 38:] == np.float32(PAD_VALUE))
    assert PAD_VALUE == 128 / 255
    # uint8 and float input give the same canvas
    np.testing.assert_allclose(letterbox_np(array.astype(np.float32) / 255, INPUT), x, atol=1e-6)


@pytest.mark.parametrize("shape", SHAPES)
def test_geometry_twins_and_box_round_trip(shape):
    for a, b in zip(geometry(shape, INPUT), geometry_np(shape, INPUT)):
        np.testing.assert_allclose(a.numpy(), b, rtol=1e-6)
    h, w = shape
    boxes = np.array([[0, 0, w, h, 1], [w * .2, h * .3, w * .6, h * .9, 0]], np.float32)
    on_input = boxes_to_input(tf.constant(boxes), tf.constant(shape), tf.constant(INPUT)).numpy()
    assert np.all(on_input[:, [0, 2]] <= INPUT[1]) and np.all(on_input[:, [1, 3]] <= INPUT[0])
    np.testing.assert_allclose(boxes_to_image_np(on_input[:, :4], shape, INPUT), boxes[:, :4],
                               atol=1e-3)
