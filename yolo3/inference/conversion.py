"""Converting a network to ONNX and to OpenVINO IR, written once: the engines that run a ``.keras``
model on OpenVINO or ONNX Runtime (:mod:`yolo3.inference.engines`) and ``yolo3 export``
(:mod:`yolo3.export.formats`, which adds the model's facts, quantisation and the check) both
convert through these.

``function`` is a ``tf.function`` with an input signature (the graph of
:mod:`yolo3.export.graph`). Needs the ``[export]`` extra (tf2onnx, onnx) or ``[openvino]``.
"""
from __future__ import annotations

from yolo3.core.extras import require

ONNX_OPSET = 17

__all__ = ["ONNX_OPSET", "onnx_model", "openvino_model"]


def onnx_model(function, opset: int = ONNX_OPSET):
    """The ``onnx.ModelProto`` of ``function`` (tf2onnx, opset ``opset``)."""
    tf2onnx = require("tf2onnx", "ONNX conversion")
    require("onnx", "ONNX conversion")
    proto, _ = tf2onnx.convert.from_function(function, input_signature=function.input_signature,
                                             opset=opset)
    return proto


def openvino_model(function):
    """The ``openvino.Model`` of ``function`` (OpenVINO's converter), float32 weights."""
    return require("openvino", "OpenVINO conversion").convert_model(function)
