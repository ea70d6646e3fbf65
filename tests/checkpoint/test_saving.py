"""Keras model files (yolo3.checkpoint.saving): atomic saves with the model info inside, reading
them back, and reading any weights file into ``{layer name: [arrays]}``.

The legacy Keras 2 ``.h5`` reader is checked on a file written here with h5py in Keras 2's layout
(``layer_names`` / ``weight_names`` attributes), batch-norm arrays stored out of order.
"""
from __future__ import annotations

import os
import re
import zipfile

import h5py
import keras
import numpy as np
import pytest

from yolo3.checkpoint.metadata import ModelInfo
from yolo3.checkpoint.saving import (
    atomic_save_model,
    atomic_save_weights,
    build_from_weights,
    keras_refusal,
    layers_with_weights,
    load_keras_model,
    output_channels,
    read_layer_weights,
)
from yolo3.checkpoint.weight_names import WeightsError
from yolo3.config.specs import get_spec
from yolo3.core.errors import FileFormatError
from yolo3.modeling.bodies import build_body


@pytest.fixture(scope="module")
def tiny2():
    """A tiny body for 2 classes at 64x64 with distinct, non-default weights."""
    body = build_body("tiny", 2, input_shape=(64, 64))
    rng = np.random.default_rng(0)
    body.set_weights([rng.normal(size=w.shape).astype("float32") for w in body.get_weights()])
    return body


def _same_weights(a, b):
    assert len(a.weights) == len(b.weights)
    for x, y in zip(a.weights, b.weights):
        np.testing.assert_array_equal(np.asarray(x), np.asarray(y))


def test_atomic_save_weights_roundtrip(tiny2, tmp_path):
    path = atomic_save_weights(tiny2, tmp_path / "b.weights.h5")
    other = build_body("tiny", 2, input_shape=(64, 64))
    other.load_weights(path)
    _same_weights(tiny2, other)
    with pytest.raises(ValueError, match=".weights.h5"):
        atomic_save_weights(tiny2, tmp_path / "b.h5")
    assert sorted(os.listdir(tmp_path)) == ["b.weights.h5"]


def test_model_roundtrip_carries_its_info(tiny2, tmp_path):
    info = ModelInfo(anchors=get_spec("tiny").default_anchors(), masks=[[3, 4, 5], [0, 1, 2]],
                     num_classes=2, class_names=["cat", "dog"], variant="tiny", input_size=(64, 64))
    path = atomic_save_model(tiny2, tmp_path / "m.keras", info)
    model, read = load_keras_model(path)
    _same_weights(tiny2, model)
    assert read.to_dict() == info.to_dict()
    bare, none = load_keras_model(atomic_save_model(tiny2, tmp_path / "bare.keras"))
    assert none is None and output_channels(bare) == [21, 21]
    with pytest.raises(ValueError, match=".keras"):
        atomic_save_model(tiny2, tmp_path / "m.h5")


def test_a_failed_save_keeps_the_old_file_and_leaves_no_temporary(tiny2, tmp_path, monkeypatch):
    path = atomic_save_weights(tiny2, tmp_path / "keep.weights.h5")
    before = path.read_bytes()

    def broken(self, filepath, *args, **kwargs):
        with open(filepath, "wb") as f:
            f.write(b"half")
        raise OSError("disk full")
    monkeypatch.setattr(type(tiny2), "save_weights", broken)
    with pytest.raises(OSError, match="disk full"):
        atomic_save_weights(tiny2, path)
    assert path.read_bytes() == before
    assert os.listdir(tmp_path) == ["keep.weights.h5"]


def test_load_keras_model_names_the_file_and_the_reason(tmp_path):
    with pytest.raises(FileFormatError, match="missing.keras.*not found"):
        load_keras_model(tmp_path / "missing.keras")
    text = tmp_path / "text.keras"
    text.write_text("not a zip")
    with pytest.raises(FileFormatError, match="text.keras.*not a .keras model"):
        load_keras_model(text)
    other_zip = tmp_path / "other.keras"
    with zipfile.ZipFile(other_zip, "w") as z:
        z.writestr("readme.txt", "hello")
    with pytest.raises(FileFormatError, match="other.keras.*cannot load Keras model"):
        load_keras_model(other_zip)


def test_read_layer_weights_of_keras_and_weights_files(tiny2, tmp_path):
    expected = {name: layer.get_weights() for name, layer in layers_with_weights(tiny2).items()}
    tiny2.save(tmp_path / "m.keras")
    tiny2.save_weights(tmp_path / "m.weights.h5")
    for name in ("m.keras", "m.weights.h5"):
        arrays = read_layer_weights(tmp_path / name)
        assert set(arrays) == set(expected)
        for layer, values in expected.items():
            for a, b in zip(arrays[layer], values):
                np.testing.assert_array_equal(a, b)


def test_read_layer_weights_of_a_keras2_h5_orders_batch_norms(tmp_path):
    rng = np.random.default_rng(1)
    kernel = rng.normal(size=(3, 3, 3, 4)).astype("float32")
    bn = {k: rng.normal(size=(4,)).astype("float32")
          for k in ("gamma", "beta", "moving_mean", "moving_variance")}
    path = tmp_path / "keras2.h5"
    with h5py.File(path, "w") as f:
        root = f.create_group("model_weights")
        root.attrs["layer_names"] = [b"conv2d_1", b"batch_normalization_1", b"leaky_re_lu_1"]
        conv = root.create_group("conv2d_1")
        conv.attrs["weight_names"] = [b"conv2d_1/kernel:0"]
        conv.create_dataset("conv2d_1/kernel:0", data=kernel)
        norm = root.create_group("batch_normalization_1")
        stored = ["moving_variance", "gamma", "moving_mean", "beta"]  # not Keras's order
        norm.attrs["weight_names"] = [f"batch_normalization_1/{k}:0".encode() for k in stored]
        for k in stored:
            norm.create_dataset(f"batch_normalization_1/{k}:0", data=bn[k])
        root.create_group("leaky_re_lu_1").attrs["weight_names"] = []
    arrays = read_layer_weights(path)
    assert sorted(arrays) == ["batch_normalization_1", "conv2d_1"]
    np.testing.assert_array_equal(arrays["conv2d_1"][0], kernel)
    for got, k in zip(arrays["batch_normalization_1"],
                      ("gamma", "beta", "moving_mean", "moving_variance")):
        np.testing.assert_array_equal(got, bn[k])


def test_read_layer_weights_refuses_what_is_not_a_yolo3_body(tmp_path):
    with pytest.raises(WeightsError, match="missing.weights.h5: weights file not found"):
        read_layer_weights(tmp_path / "missing.weights.h5")
    path = tmp_path / "dense.weights.h5"
    # a model that is no yolo3 body: no 1x1 output convolution with a bias
    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(3)])
    model.save_weights(path)
    with pytest.raises(WeightsError, match="dense.weights.h5: not a yolo3 body weights file"):
        read_layer_weights(path)


def test_build_from_weights_finds_the_variant_or_lists_each_refusal(tiny2, tmp_path):
    path = tmp_path / "t.weights.h5"
    tiny2.save_weights(path)
    body, spec = build_from_weights(path, 2, [get_spec("yolov3"), get_spec("tiny")], 6)
    assert spec.name == "tiny"
    _same_weights(tiny2, body)
    with pytest.raises(FileFormatError, match=r"t.weights.h5.*2 classes.*yolov3: "):
        build_from_weights(path, 2, [get_spec("yolov3")], 9)


def test_a_shape_refusal_is_one_line_naming_the_layer_and_both_shapes(tiny2, tmp_path):
    path = tmp_path / "t.weights.h5"
    tiny2.save_weights(path)
    with pytest.raises(FileFormatError) as refused:
        build_from_weights(path, 2, [get_spec("tiny-af")], 0)
    message = str(refused.value)
    assert "t.weights.h5" in message and "tiny-af: " in message and len(message) < 600, message
    assert "\n" not in message and "value=" not in message  # no tensors from Keras's message
    assert re.search(r"/kernel: the body has \(\d+(, \d+)*\), the file \(\d+(, \d+)*\)", message)


def test_keras_refusal_keeps_a_message_without_shapes_whole():
    assert keras_refusal(ValueError("bad file\nmore")) == "bad file"
    assert keras_refusal(KeyError()) == "KeyError"
