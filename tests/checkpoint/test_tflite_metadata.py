"""yolo3.checkpoint.tflite_metadata: the ModelInfo a ``.tflite`` file carries, written into
TensorFlow's flatbuffer schema and read back in place."""
from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

from yolo3.checkpoint.metadata import ModelInfo
from yolo3.checkpoint.tflite_metadata import (
    TFLITE_METADATA_NAME,
    embed_info_tflite,
    read_tflite_info,
)
from yolo3.config.specs import get_spec
from yolo3.core.errors import FileFormatError


@pytest.fixture(scope="module")
def flatbuffer() -> bytes:
    """A one-op TFLite model (x * 2), converted here: any flatbuffer will do."""
    @tf.function(input_signature=[tf.TensorSpec([1, 4], tf.float32)])
    def double(x):
        return x * 2.0
    converter = tf.lite.TFLiteConverter.from_concrete_functions([double.get_concrete_function()],
                                                               double)
    return converter.convert()


def _info() -> ModelInfo:
    spec = get_spec("tiny")
    return ModelInfo(spec.default_anchors(), spec.default_masks(), 3, ["a", "b", "c"], "tiny",
                     (96, 160))


def test_info_round_trips_and_the_model_still_runs(flatbuffer, tmp_path):
    path = tmp_path / "m.tflite"
    path.write_bytes(embed_info_tflite(flatbuffer, _info()))
    got = read_tflite_info(path)
    want = _info()
    assert got.variant == want.variant and got.class_names == want.class_names
    assert got.num_classes == 3 and tuple(got.input_size) == (96, 160)
    np.testing.assert_array_equal(got.anchors, want.anchors)
    assert [list(m) for m in got.masks] == [list(m) for m in want.masks]
    interpreter = tf.lite.Interpreter(model_path=str(path))
    interpreter.allocate_tensors()
    interpreter.set_tensor(interpreter.get_input_details()[0]["index"],
                           np.arange(4, dtype=np.float32)[None])
    interpreter.invoke()
    out = interpreter.get_tensor(interpreter.get_output_details()[0]["index"])
    np.testing.assert_array_equal(out, [[0, 2, 4, 6]])


def test_a_flatbuffer_without_the_metadata_has_no_info(flatbuffer, tmp_path):
    path = tmp_path / "plain.tflite"
    path.write_bytes(flatbuffer)
    assert read_tflite_info(path) is None


def test_unreadable_metadata_is_named(flatbuffer, tmp_path, monkeypatch):
    import yolo3.checkpoint.tflite_metadata as module
    path = tmp_path / "bad.tflite"
    monkeypatch.setattr(module, "info_json", lambda info: "{not json")
    path.write_bytes(embed_info_tflite(flatbuffer, _info()))
    with pytest.raises(FileFormatError, match=rf"bad\.tflite.*cannot read the "
                                              rf"{TFLITE_METADATA_NAME} metadata"):
        read_tflite_info(path)
    with pytest.raises(FileFormatError, match=r"missing\.tflite"):
        read_tflite_info(tmp_path / "missing.tflite")
