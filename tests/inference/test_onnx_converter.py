"""The ONNX converter's own process (yolo3.inference.onnx_converter): weights come back from
tf2onnx's large-model storage into the one file (initializers, node attributes, subgraphs), and a
failure is one ``error:`` line with exit 3."""
from __future__ import annotations

import json

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from yolo3.inference.onnx_converter import (
    EXIT_CONVERSION_FAILED,
    convert,
    inline_external_data,
    main,
)


def _external(name: str, location: str, dims) -> TensorProto:
    tensor = TensorProto(name=name, data_type=TensorProto.FLOAT, dims=dims)
    entry = tensor.external_data.add()
    entry.key, entry.value = "location", location
    tensor.data_location = TensorProto.EXTERNAL
    return tensor


def test_every_external_tensor_is_put_back():
    weight = np.arange(6, dtype=np.float32).reshape(2, 3)
    inner = np.full(4, 7.0, np.float32)
    then_graph = helper.make_graph(
        [helper.make_node("Constant", [], ["k"], value=_external("k", "inner", [4]))], "then", [],
        [helper.make_tensor_value_info("k", TensorProto.FLOAT, [4])])
    nodes = [helper.make_node("Constant", [], ["c"], value=_external("c", "const", [2, 3])),
             helper.make_node("Add", ["w", "c"], ["y"]),
             helper.make_node("If", ["cond"], ["z"], then_branch=then_graph, else_branch=then_graph)]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("cond", TensorProto.BOOL, [])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])],
                              initializer=[_external("w", "weight", [2, 3])])
    model = helper.make_model(graph)
    data = {"weight": weight.tobytes(), "const": (weight * 2).tobytes(), "inner": inner.tobytes()}
    assert inline_external_data(model, data) == 4  # the If has the branch twice (then, else)
    np.testing.assert_array_equal(numpy_helper.to_array(model.graph.initializer[0]), weight)
    np.testing.assert_array_equal(numpy_helper.to_array(model.graph.node[0].attribute[0].t),
                                  weight * 2)
    branch = model.graph.node[2].attribute[0].g
    np.testing.assert_array_equal(numpy_helper.to_array(branch.node[0].attribute[0].t), inner)
    assert inline_external_data(model, {}) == 0  # nothing left outside
    with pytest.raises(KeyError):
        inline_external_data(helper.make_model(helper.make_graph(
            [], "h", [], [], initializer=[_external("w", "elsewhere", [1])])), data)


def test_a_savedmodel_converts_through_the_large_model_storage(tmp_path):
    import tensorflow as tf
    holder = tf.Module()
    holder.kernel = tf.Variable(np.random.default_rng(0).normal(size=(16, 128)).astype(np.float32))

    @tf.function(input_signature=[tf.TensorSpec([None, 16], tf.float32, name="images")])
    def f(images):
        return {"raw_s32": tf.matmul(images, holder.kernel)}
    tf.saved_model.save(holder, str(tmp_path / "sm"), signatures={"serving_default": f})
    out = tmp_path / "m.onnx"
    assert convert({"saved_model": str(tmp_path / "sm"), "out": str(out), "opset": 17,
                    "metadata": {"k": "v"}}) >= 1  # the 8 KB kernel came back from the storage
    import onnxruntime as ort
    x = np.ones((2, 16), np.float32)
    got = ort.InferenceSession(str(out), providers=["CPUExecutionProvider"]).run(None, {"images": x})
    np.testing.assert_allclose(got[0], x @ holder.kernel.numpy(), rtol=1e-5)
    assert {p.key: p.value for p in onnx.load(str(out)).metadata_props} == {"k": "v"}


def test_a_failure_is_one_line_in_the_error_file_and_exit_3(tmp_path):
    request = tmp_path / "request.json"
    request.write_text(json.dumps({"saved_model": str(tmp_path / "missing"),
                                   "out": str(tmp_path / "m.onnx"), "opset": 17,
                                   "error_file": str(tmp_path / "error.txt")}))
    assert main([str(request)]) == EXIT_CONVERSION_FAILED
    lines = (tmp_path / "error.txt").read_text().strip().splitlines()
    assert len(lines) == 1 and "missing" in lines[0], lines
    assert not (tmp_path / "m.onnx").exists()
