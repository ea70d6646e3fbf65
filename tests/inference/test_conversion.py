"""Converting a network to ONNX and OpenVINO IR, written once (yolo3.inference.conversion): the
converted models compute what the function computes (float32), ONNX in a converter process of its
own that carries the metadata over, a machine without the memory refused before it starts, a
converter's failure named, and a missing converter named."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf

import yolo3.inference.conversion as conversion
from yolo3.core.errors import CommandFailed, NotEnoughMemory
from yolo3.inference.conversion import ONNX_OPSET, onnx_memory_needed, openvino_model, write_onnx


@pytest.fixture(scope="module")
def function():
    weights = np.random.default_rng(0).normal(size=(3, 4)).astype(np.float32)

    @tf.function(input_signature=[tf.TensorSpec([None, 5, 3], tf.float32, name="images")])
    def f(images):  # the weights a constant of the graph, as a frozen network's are
        kernel = tf.constant(weights)
        return {"raw_s32": tf.nn.leaky_relu(tf.einsum("bnc,cd->bnd", images, kernel), 0.1)}
    return f


@pytest.fixture(scope="module")
def variable_function():
    """A function reading variables (as a Keras network's does), large enough for tf2onnx's
    large-model storage (tensors over 1 KB are stored outside the graph while it converts)."""
    kernel = tf.Variable(np.random.default_rng(2).normal(size=(3, 3, 3, 64)).astype(np.float32))
    bias = tf.Variable(np.linspace(-1, 1, 64).astype(np.float32))

    @tf.function(input_signature=[tf.TensorSpec([1, 8, 8, 3], tf.float32, name="images")])
    def f(images):
        return {"raw_s8": tf.nn.leaky_relu(tf.nn.conv2d(images, kernel, 1, "SAME") + bias, 0.1)}
    f.kept = (kernel, bias)
    return f


def _inputs(shape=(2, 5, 3)):
    return np.random.default_rng(1).uniform(0, 1, shape).astype(np.float32)


def _session(path):
    import onnxruntime as ort
    return ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])


def test_onnx_computes_what_the_function_computes_and_carries_the_metadata(variable_function,
                                                                           tmp_path):
    """The converted model computes what the function computes (ONNX Runtime and OpenVINO): the
    weights come back from tf2onnx's large-model storage into the one file (no external data file
    beside it), the input and outputs keep their names, and the metadata entries are written."""
    import onnx
    write_onnx(variable_function, tmp_path / "v.onnx", metadata={"yolo3": '{"a": 1}', "b": "2"})
    assert sorted(p.name for p in tmp_path.iterdir()) == ["v.onnx"]
    model = onnx.load(str(tmp_path / "v.onnx"), load_external_data=False)
    assert {p.key: p.value for p in model.metadata_props} == {"yolo3": '{"a": 1}', "b": "2"}
    assert all(t.data_location == onnx.TensorProto.DEFAULT for t in model.graph.initializer)
    assert model.opset_import[0].version == ONNX_OPSET
    session = _session(tmp_path / "v.onnx")
    assert [i.name for i in session.get_inputs()] == ["images"]
    assert [o.name for o in session.get_outputs()] == ["raw_s8"]
    x = _inputs((1, 8, 8, 3))
    got = session.run(None, {"images": x})[0]
    want = variable_function(x)["raw_s8"].numpy()
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    import openvino as ov  # the same file loads in OpenVINO too
    compiled = ov.Core().compile_model(str(tmp_path / "v.onnx"), "CPU",
                                       {"INFERENCE_PRECISION_HINT": "f32"})
    np.testing.assert_allclose(compiled(x)[0], want, rtol=1e-5, atol=1e-5)


def test_the_converter_runs_apart_with_pure_python_protobuf_and_no_gpu():
    env = conversion._converter_env()
    assert env["PROTOCOL_BUFFERS_PYTHON_IMPLEMENTATION"] == "python"
    assert env["CUDA_VISIBLE_DEVICES"] == "-1"


def test_memory_needed_grows_with_the_weights():
    # fitted to the converter's measured peaks: tiny-416 (35 MB of weights) 1.1 GB, YOLOv3 2.4 GB
    assert 1.0e9 < onnx_memory_needed(35_000_000) < 1.3e9
    assert 2.2e9 < onnx_memory_needed(248_000_000) < 2.7e9


def test_too_little_memory_is_refused_before_the_converter_starts(variable_function, tmp_path,
                                                                   monkeypatch):
    monkeypatch.setattr(conversion, "available_memory", lambda: 200_000_000)
    monkeypatch.setattr(conversion, "_run_converter", lambda *a: pytest.fail("converter started"))
    with pytest.raises(NotEnoughMemory, match=r"ONNX conversion of net\.keras: needs about 0\.9 GB "
                                              r"of memory, 0\.2 GB is available"):
        write_onnx(variable_function, tmp_path / "v.onnx", what="net.keras")
    assert not (tmp_path / "v.onnx").exists()


def test_a_converter_killed_or_failing_is_named(variable_function, tmp_path, monkeypatch):
    monkeypatch.setattr(conversion, "available_memory", lambda: None)  # not known here
    monkeypatch.setattr(conversion, "_run_converter", lambda *a: (-9, 3_000_000_000))
    with pytest.raises(NotEnoughMemory, match=r"net\.keras: the converter was killed, most likely "
                                              r"for memory: it needs about 0\.9 GB \(it had "
                                              r"reached 3\.0 GB\), an unknown amount was"):
        write_onnx(variable_function, tmp_path / "v.onnx", what="net.keras")

    def failing(request, log_path):  # the converter's one line, in the file its request names
        with open(log_path, "w") as f:
            f.write("noise from TensorFlow\n")
        with open(json.loads(Path(request).read_text())["error_file"], "w") as f:
            f.write("ValueError: opset 99 is not supported\n")
        return 3, 1_000_000_000
    monkeypatch.setattr(conversion, "_run_converter", failing)
    with pytest.raises(CommandFailed, match=r"^ONNX conversion of net\.keras failed: ValueError: "
                                            r"opset 99 is not supported$"):
        write_onnx(variable_function, tmp_path / "v.onnx", what="net.keras")


def test_openvino_computes_what_the_function_computes(function):
    import openvino as ov
    compiled = ov.Core().compile_model(openvino_model(function), "CPU",
                                       {"INFERENCE_PRECISION_HINT": "f32"})
    got = compiled(_inputs())[0]
    np.testing.assert_allclose(got, function(_inputs())["raw_s32"].numpy(), rtol=1e-5, atol=1e-6)


def test_a_missing_converter_is_named(function, monkeypatch, tmp_path):
    import sys

    from yolo3.core.errors import ArgumentError
    monkeypatch.setitem(sys.modules, "tf2onnx", None)  # as if not installed
    with pytest.raises(ArgumentError, match=r"ONNX conversion needs tf2onnx: pip install "
                                            r"'yolo3\[export\]'"):
        write_onnx(function, tmp_path / "f.onnx")
