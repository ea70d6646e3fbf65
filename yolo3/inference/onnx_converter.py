"""The ONNX converter's own process: ``python -m yolo3.inference.onnx_converter REQUEST.json``,
started by :func:`yolo3.inference.conversion.write_onnx`, never by a user.

REQUEST names a SavedModel folder (its ``serving_default`` signature is converted), the ``.onnx``
file to write, the opset, metadata entries ``{key: value}`` to add, and the file where a failure
is written as one line (``error_file``). The parent starts this
process with pure-Python protobuf (``PROTOCOL_BUFFERS_PYTHON_IMPLEMENTATION=python``): tf2onnx
rewrites every node's attributes after each of its passes, and with the C protobuf (upb) each
rewrite of a weight tensor stays in the node's arena until the node is freed, so YOLOv3's 248 MB
of weights piled up to 20 GB. tf2onnx's large-model path keeps the weights outside the TensorFlow
graph while it converts (no copy of the graph per pass); they are put back into the one ``.onnx``
file here. Exit 0 when written; 3, with the error's one line in ``error_file``, otherwise.
"""
from __future__ import annotations

import sys
from typing import Dict, List, Optional, Sequence

from yolo3.core.fileio import read_json

EXIT_CONVERSION_FAILED = 3

__all__ = ["main", "convert", "EXIT_CONVERSION_FAILED", "inline_external_data"]


def _tensors(graph) -> list:
    """Every TensorProto of an ONNX ``graph``: its initializers and its nodes' tensor attributes,
    inside subgraphs (a Loop's body) too."""
    found = list(graph.initializer)
    for node in graph.node:
        for attribute in node.attribute:
            if attribute.HasField("t"):
                found.append(attribute.t)
            found.extend(attribute.tensors)
            if attribute.HasField("g"):
                found.extend(_tensors(attribute.g))
            for sub in attribute.graphs:
                found.extend(_tensors(sub))
    return found


def inline_external_data(model, data: Dict[str, bytes]) -> int:
    """Put tensors stored outside ``model`` (ONNX external data, ``location`` a key of ``data``)
    back into it; returns how many. A location missing from ``data`` raises KeyError."""
    import onnx
    count = 0
    for tensor in _tensors(model.graph):
        if tensor.data_location != onnx.TensorProto.EXTERNAL:
            continue
        entries = {e.key: e.value for e in tensor.external_data}
        tensor.raw_data = data[entries["location"]]
        del tensor.external_data[:]
        tensor.data_location = onnx.TensorProto.DEFAULT
        count += 1
    return count


def _signature_function(saved_model: str):
    """``(tf.function, input_signature)`` calling the SavedModel's ``serving_default``."""
    import tensorflow as tf
    loaded = tf.saved_model.load(saved_model)  # kept by call(): it owns the variables
    signature = loaded.signatures["serving_default"]
    _, specs = signature.structured_input_signature
    names: List[str] = sorted(specs)
    spec_list = [tf.TensorSpec(specs[n].shape, specs[n].dtype, name=n) for n in names]

    def call(*tensors):
        return loaded.signatures["serving_default"](**dict(zip(names, tensors)))
    return tf.function(call, input_signature=spec_list, autograph=False), spec_list


def convert(request: dict) -> int:
    """Convert the request's SavedModel and write its ``.onnx`` file; returns the number of weight
    tensors put back from the large-model storage."""
    import numpy as np
    if not hasattr(np, "product"):  # tf2onnx 1.17's large-model path calls np.product (NumPy < 2)
        np.product = np.prod
    import onnx
    import tf2onnx
    function, spec_list = _signature_function(request["saved_model"])
    proto, storage = tf2onnx.convert.from_function(function, input_signature=spec_list,
                                                   opset=int(request["opset"]), large_model=True)
    inlined = inline_external_data(proto, storage.name_to_tensor_data if storage else {})
    del storage
    for key, value in (request.get("metadata") or {}).items():
        entry = proto.metadata_props.add()
        entry.key, entry.value = key, value
    onnx.save(proto, request["out"])
    return inlined


def main(argv: Optional[Sequence[str]] = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    request = read_json(argv[0], "ONNX conversion request")
    try:
        convert(request)
    except Exception as e:  # noqa: BLE001 - the parent reads this one line and names the model
        text = str(e).strip().splitlines()
        with open(request["error_file"], "w", encoding="utf-8") as f:
            f.write(f"{type(e).__name__}: {text[-1] if text else ''}\n")
        return EXIT_CONVERSION_FAILED
    return 0


if __name__ == "__main__":
    sys.exit(main())
