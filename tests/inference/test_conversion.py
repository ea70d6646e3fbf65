"""Converting a network to ONNX and OpenVINO IR, written once (yolo3.inference.conversion): the
converted models compute what the function computes (float32), and a missing converter is named."""
from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

from yolo3.inference.conversion import ONNX_OPSET, onnx_model, openvino_model


@pytest.fixture(scope="module")
def function():
    weights = np.random.default_rng(0).normal(size=(3, 4)).astype(np.float32)

    @tf.function(input_signature=[tf.TensorSpec([None, 5, 3], tf.float32, name="images")])
    def f(images):  # the weights a constant of the graph, as a frozen network's are
        kernel = tf.constant(weights)
        return {"raw_s32": tf.nn.leaky_relu(tf.einsum("bnc,cd->bnd", images, kernel), 0.1)}
    return f


def _inputs():
    return np.random.default_rng(1).uniform(0, 1, (2, 5, 3)).astype(np.float32)


def test_onnx_computes_what_the_function_computes(function):
    import onnxruntime as ort
    proto = onnx_model(function)
    assert proto.opset_import[0].version == ONNX_OPSET
    session = ort.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"])
    got = session.run(None, {session.get_inputs()[0].name: _inputs()})[0]
    np.testing.assert_allclose(got, function(_inputs())["raw_s32"].numpy(), rtol=1e-5, atol=1e-6)


def test_openvino_computes_what_the_function_computes(function):
    import openvino as ov
    compiled = ov.Core().compile_model(openvino_model(function), "CPU",
                                       {"INFERENCE_PRECISION_HINT": "f32"})
    got = compiled(_inputs())[0]
    np.testing.assert_allclose(got, function(_inputs())["raw_s32"].numpy(), rtol=1e-5, atol=1e-6)


def test_a_missing_converter_is_named(function, monkeypatch):
    import sys

    from yolo3.core.errors import ArgumentError
    monkeypatch.setitem(sys.modules, "tf2onnx", None)  # as if not installed
    with pytest.raises(ArgumentError, match=r"ONNX conversion needs tf2onnx: pip install "
                                            r"'yolo3\[export\]'"):
        onnx_model(function)
