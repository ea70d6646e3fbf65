"""Writing a detector in deployment formats: SavedModel, TFLite (float32, float16, int8), ONNX and
OpenVINO IR (float32, float16 weights, int8).

Every file carries the detector's :class:`~yolo3.checkpoint.metadata.ModelInfo` (variant, anchors,
masks, classes, input size) plus what the export was (format, quantisation, input type, batch, the
baked thresholds), so that :mod:`yolo3.inference.runners` runs it with no other file. Writes are
atomic: a file that fails its conversion or its check (:mod:`yolo3.export.verify`) is not left
behind.
"""
from __future__ import annotations

import dataclasses
import os
import re
import tempfile
import warnings
from typing import Iterable, Optional

import numpy as np
import tensorflow as tf

from yolo3.checkpoint.metadata import (
    INFO_NAME,
    ONNX_METADATA_KEY,
    OPENVINO_ENTRIES,
    OPENVINO_INFO_KEY,
    SAVED_MODEL_ENTRIES,
    info_json,
)
from yolo3.checkpoint.tflite_metadata import embed_info_tflite
from yolo3.core.errors import ArgumentError, PathLike, SettingError
from yolo3.core.extras import require
from yolo3.core.fileio import atomic_write
from yolo3.core.output_folder import write_output_folder
from yolo3.export.graph import image_function, model_function
from yolo3.inference.conversion import ONNX_OPSET, openvino_model, write_onnx
from yolo3.inference.runners import import_openvino

QUANTIZATIONS = ("none", "float16", "int8")
OPENVINO_MODEL = "model.xml"  # the IR inside the folder export_openvino writes (and model.bin)

__all__ = ["QUANTIZATIONS", "ONNX_OPSET", "export_saved_model", "export_tflite", "export_onnx",
           "export_openvino", "OPENVINO_MODEL", "exported_info"]


def exported_info(detector, fmt: str, **details):
    """The detector's info with an ``export`` entry describing the exported model."""
    export = dict(format=fmt, score=detector.score, iou=detector.iou,
                  max_boxes=detector.max_boxes, input_size=list(detector.input_hw), **details)
    return dataclasses.replace(detector.info, input_size=detector.input_hw, export=export)


def _check_float32(detector, what: str) -> None:
    if detector.precision != "float32":
        raise ArgumentError(f"{what} export needs a float32 detector, got "
                            f"precision={detector.precision!r}")


def _archive(detector, endpoints):
    """A Keras ExportArchive with ``{name: (fn, signature)}``, the inference body's variables
    saved once: through what the endpoints read, not ``track(inference_body)``, which on Keras 3
    (to 3.15 at least, keras-team/keras#23553) writes every weight a second time (YOLOv3-416's
    SavedModel 497 MB instead of 248, and a second copy in every converter that loads it)."""
    import keras
    archive = keras.export.ExportArchive()
    for name, (fn, signature) in endpoints.items():
        archive.add_endpoint(name, fn, input_signature=signature)
    return archive


def export_saved_model(detector, out_dir: PathLike, exist_ok: bool = False) -> str:
    """Write a SavedModel folder: ``serving_default`` (uint8 batch at the input size),
    ``serve_float`` (float32 in [0, 1]), ``serve_image`` (one uint8 image of any size, letterboxed
    inside, boxes in its pixels), and ``yolo3.json`` (its info). Returns ``out_dir``.

    ``out_dir`` must be new, empty or written by yolo3 before; with ``exist_ok`` it may hold other
    files, which are kept (:func:`yolo3.core.output_folder.write_output_folder`)."""
    _check_float32(detector, "SavedModel")
    h, w = detector.input_hw
    archive = _archive(detector, {
        "serving_default": (model_function(detector, tf.uint8),
                            [tf.TensorSpec([None, h, w, 3], tf.uint8, name="images")]),
        "serve_float": (model_function(detector, tf.float32),
                        [tf.TensorSpec([None, h, w, 3], tf.float32, name="images")]),
        "serve_image": (image_function(detector),
                        [tf.TensorSpec([None, None, 3], tf.uint8, name="image")]),
    })
    out_dir = os.fspath(out_dir)

    def write(folder) -> None:
        archive.write_out(os.fspath(folder), verbose=False)
        with open(os.path.join(folder, INFO_NAME), "w", encoding="utf-8") as f:
            f.write(info_json(exported_info(detector, "saved_model")))
    write_output_folder(out_dir, write, "out_dir", exist_ok, SAVED_MODEL_ENTRIES)
    return out_dir


def export_tflite(detector, out_path: PathLike, input_dtype: str = "uint8", batch: int = 1,
                  quantize: str = "none", calibration: Optional[Iterable[np.ndarray]] = None,
                  raw: bool = False) -> str:
    """Convert ``detector`` to a TFLite flatbuffer at ``out_path``; returns ``out_path``.

    Built-in ops only, a fixed ``batch`` (per-class NMS by
    :func:`yolo3.export.graph.class_aware_nms`: combined NMS would need the Flex delegate).
    quantize: ``none`` (float32), ``float16`` (float16 weights, float32 compute) or ``int8``
    (full-integer network: int8 weights and activations, calibrated on ``calibration``, letterboxed
    float32 RGB images ``(in_h, in_w, 3)`` in [0, 1]; decoding and NMS stay float32).
    input_dtype: ``uint8`` (RGB 0..255), ``int8`` (RGB - 128, -128..127) or ``float32`` ([0, 1]).
    raw: only the raw maps as outputs.
    """
    _check_float32(detector, "TFLite")
    if quantize not in QUANTIZATIONS:
        raise SettingError(f"quantize must be one of {QUANTIZATIONS}, got {quantize!r}", "quantize")
    if input_dtype not in ("uint8", "float32", "int8"):
        raise ArgumentError(f"TFLite input must be uint8, int8 or float32, got {input_dtype!r}")
    if quantize == "int8" and input_dtype == "float32":
        raise ArgumentError("an int8 model takes uint8 or int8 input, not float32")
    h, w = detector.input_hw
    dtype = tf.as_dtype(input_dtype)
    archive = _archive(detector, {"serving_default": (
        model_function(detector, dtype, batch=batch, raw=raw),
        [tf.TensorSpec([batch, h, w, 3], dtype, name="images")])})
    with tempfile.TemporaryDirectory(prefix="yolo3_tflite_") as tmp:
        archive.write_out(tmp, verbose=False)

        def converter():
            c = tf.lite.TFLiteConverter.from_saved_model(tmp, signature_keys=["serving_default"])
            c.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS]
            return c
        if quantize == "int8":
            flatbuffer = _int8_flatbuffer(detector, converter, calibration, batch, dtype)
        else:
            c = converter()
            if quantize == "float16":
                c.optimizations = [tf.lite.Optimize.DEFAULT]
                c.target_spec.supported_types = [tf.float16]
            flatbuffer = c.convert()
    info = exported_info(detector, "tflite", quantize=quantize, input_dtype=input_dtype,
                         batch=batch, raw=raw)
    flatbuffer = embed_info_tflite(flatbuffer, info)
    atomic_write(out_path, lambda tmp: _write_bytes(tmp, flatbuffer), suffix=".tflite")
    return os.fspath(out_path)


def _int8_flatbuffer(detector, converter, calibration, batch: int, dtype: tf.DType) -> bytes:
    """Full-integer quantisation of the network (int8 weights and activations, calibrated on
    ``calibration``), the decoding and NMS kept in float32 (quantised, the box coordinates and
    scores would lose their precision): every tensor outside the inference body is denylisted for
    TFLite's quantiser (``tf.lite.experimental.QuantizationDebugger``). The input stays ``dtype``
    (uint8 or int8 pixels), quantised to int8 inside."""
    if calibration is None:
        raise SettingError("int8 quantisation needs calibration images (calibration)", "calibration")
    images = [np.asarray(x, np.float32) for x in calibration]
    if not images:
        raise ArgumentError("no calibration images")
    offset = 128.0 if dtype == tf.int8 else 0.0

    def representative():  # each image's pixels made when asked: no second copy of the set
        for x in images:
            pixels = np.round(x * 255.0) - offset
            yield [np.repeat(pixels[np.newaxis], batch, 0).astype(dtype.as_numpy_dtype)]

    from ai_edge_litert.interpreter import Interpreter
    c = converter()
    c.optimizations = [tf.lite.Optimize.DEFAULT]
    c.representative_dataset = representative
    c.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8,
                                   tf.lite.OpsSet.TFLITE_BUILTINS]
    with warnings.catch_warnings():  # the debugger's own use of tf.lite.Interpreter warns
        warnings.simplefilter("ignore", UserWarning)
        # calibrated once; the nodes to keep in float are read from its calibrated model, then
        # set as the debugger's options (no float conversion of its own: 0.3 GB and 9 s less for
        # YOLOv3-416)
        debugger = tf.lite.experimental.QuantizationDebugger(converter=c,
                                                             debug_dataset=representative)
        names = [d["name"] for d in Interpreter(model_content=debugger.calibrated_model)
                 .get_tensor_details()]
        body = re.compile(rf"^{re.escape(detector.inference_body.name)}(_\d+)?/")  # its op scope
        denylist = [n for n in names if not any(body.match(part) for part in n.split(";"))
                    and not n.startswith(("serving_default", "arith.constant", "Const"))]
        debugger.options = tf.lite.experimental.QuantizationDebugOptions(denylisted_nodes=denylist)
        return debugger.get_nondebug_quantized_model()


def _write_bytes(path: str, data: bytes) -> None:
    with open(path, "wb") as f:
        f.write(data)


def export_onnx(detector, out_path: PathLike, input_dtype: str = "uint8",
                batch: Optional[int] = 1, raw: bool = False, opset: int = ONNX_OPSET) -> str:
    """Convert ``detector`` to ONNX (opset ``opset``, via tf2onnx, in a process of its own:
    :func:`yolo3.inference.conversion.write_onnx`) at ``out_path``.

    Input ``images (batch, in_h, in_w, 3)`` ``uint8`` or ``float32``; the outputs of
    :mod:`yolo3.export.graph` (NMS with built-in ops for a fixed ``batch``). Needs the
    ``[export]`` extra (tf2onnx, onnx).
    """
    _check_float32(detector, "ONNX")
    require("onnx", "ONNX export")
    if input_dtype not in ("uint8", "float32"):
        raise ArgumentError(f"ONNX input must be uint8 or float32, got {input_dtype!r}")
    h, w = detector.input_hw
    dtype = tf.as_dtype(input_dtype)
    signature = (tf.TensorSpec([batch, h, w, 3], dtype, name="images"),)
    function = tf.function(model_function(detector, dtype, batch=batch, raw=raw),
                           input_signature=signature)
    info = exported_info(detector, "onnx", input_dtype=input_dtype, batch=batch, raw=raw,
                         opset=opset)
    what = detector.model_path or detector.info.variant
    atomic_write(out_path, lambda tmp: write_onnx(function, tmp, opset,
                                                  {ONNX_METADATA_KEY: info_json(info)}, what),
                 suffix=".onnx")
    return os.fspath(out_path)


def _import_nncf():
    return require("nncf", "OpenVINO int8 quantization")


def _decoding_ops(model) -> list:
    """Names of the ops of an OpenVINO model computed from the raw maps (decoding and NMS): the
    nodes downstream of each ``raw_*`` output's producer, which int8 must leave in float."""
    producers = [out.get_node().input_value(0).get_node() for out in model.outputs
                 if out.get_any_name().startswith("raw_")]
    seen, stack = set(), []
    for node in producers:
        for output in node.outputs():
            stack += [t.get_node() for t in output.get_target_inputs()]
    while stack:
        node = stack.pop()
        name = node.get_friendly_name()
        if name in seen or node.get_type_name() == "Result":
            continue
        seen.add(name)
        for output in node.outputs():
            stack += [t.get_node() for t in output.get_target_inputs()]
    return sorted(seen)


def export_openvino(detector, out_dir: PathLike, input_dtype: str = "uint8",
                    batch: Optional[int] = 1, raw: bool = False, quantize: str = "none",
                    calibration: Optional[Iterable[np.ndarray]] = None,
                    exist_ok: bool = False) -> str:
    """Convert ``detector`` to an OpenVINO IR: the folder ``out_dir`` holding ``model.xml`` and
    ``model.bin``, the info in the IR's run-time info (``yolo3``). Returns the ``.xml`` path.
    ``out_dir`` is written as :func:`export_saved_model` writes its folder (``exist_ok`` the same).

    Input ``images (batch, in_h, in_w, 3)`` ``uint8`` (RGB 0..255) or ``float32`` ([0, 1]); the
    outputs of :mod:`yolo3.export.graph` (decoding and per-class NMS need a fixed ``batch``; with
    ``raw``, ``batch=None`` takes any). quantize: ``none`` (float32 weights; OpenVINO computes in
    the precision the CPU suits, :class:`yolo3.inference.runners.OpenVINORunner`), ``float16``
    (float16 weights) or ``int8`` (NNCF post-training quantization of the network, mixed preset,
    calibrated on ``calibration``: letterboxed float32 RGB images ``(in_h, in_w, 3)`` in [0, 1];
    decoding and NMS stay float). Needs the ``[openvino]`` extra (openvino; nncf for int8).
    """
    _check_float32(detector, "OpenVINO")
    ov = import_openvino("OpenVINO export")
    if quantize not in QUANTIZATIONS:
        raise SettingError(f"quantize must be one of {QUANTIZATIONS}, got {quantize!r}", "quantize")
    if input_dtype not in ("uint8", "float32"):
        raise ArgumentError(f"OpenVINO input must be uint8 or float32, got {input_dtype!r}")
    if batch is None and not raw:
        raise SettingError("decoding and NMS inside an OpenVINO model need a fixed batch "
                           "(or export raw maps only)", "batch")
    nncf = _import_nncf() if quantize == "int8" else None
    if quantize == "int8" and calibration is None:
        raise SettingError("int8 quantization needs calibration images (calibration)",
                           "calibration")
    h, w = detector.input_hw
    dtype = tf.as_dtype(input_dtype)
    function = tf.function(model_function(detector, dtype, batch=batch, raw=raw),
                           input_signature=[tf.TensorSpec([batch, h, w, 3], dtype, name="images")])
    model = openvino_model(function)
    if quantize == "int8":
        images = [np.asarray(x, np.float32) for x in calibration]
        if not images:
            raise ArgumentError("no calibration images")

        def to_input(x: np.ndarray) -> np.ndarray:
            pixels = np.round(x * 255.0) if dtype == tf.uint8 else x
            return np.repeat(pixels[np.newaxis], batch or 1, 0).astype(input_dtype)
        # MIXED: symmetric weights, asymmetric activations (leaky ReLU outputs are skewed); on
        # the demo's model it keeps mAP@0.5:0.95 within 0.007 of float, symmetric within 0.014
        model = nncf.quantize(model, nncf.Dataset(images, to_input), subset_size=len(images),
                              preset=nncf.QuantizationPreset.MIXED,
                              ignored_scope=nncf.IgnoredScope(names=_decoding_ops(model),
                                                              validate=False))
    info = exported_info(detector, "openvino", quantize=quantize, input_dtype=input_dtype,
                         batch=batch, raw=raw)
    model.set_rt_info(info_json(info), [OPENVINO_INFO_KEY])

    def write(folder) -> None:
        ov.save_model(model, os.path.join(folder, OPENVINO_MODEL),
                      compress_to_fp16=quantize == "float16")
    write_output_folder(out_dir, write, "out_dir", exist_ok, OPENVINO_ENTRIES)
    return os.path.join(os.fspath(out_dir), OPENVINO_MODEL)
