"""Runners of exported detectors: ``.tflite`` (LiteRT), ``.onnx`` (ONNX Runtime), OpenVINO IR
(``.xml`` + ``.bin``, or the folder holding them) and SavedModel folders, each
``run(images) -> {output name: array}``; they are also the engines a ``.keras`` model can run on
(:mod:`yolo3.inference.engines`). The detector over them is :mod:`yolo3.inference.exported`.
"""
from __future__ import annotations

import itertools
import logging
import os
from collections import deque
from typing import Dict, Iterable, Iterator, List, Optional

import numpy as np

from yolo3.checkpoint.metadata import openvino_xml
from yolo3.config.precision import resolve_precision
from yolo3.core.errors import FileFormatError, PathLike
from yolo3.core.extras import install_hint, require

EXPORTED_SUFFIXES = (".tflite", ".onnx", ".xml")
# OpenVINO's inference precision for each of ours (its CPU plugin's INFERENCE_PRECISION_HINT)
OPENVINO_PRECISIONS = {"float32": "f32", "bfloat16": "bf16"}
OPENVINO_INSTALL = install_hint("openvino")

log = logging.getLogger(__name__)

__all__ = ["TFLiteRunner", "OnnxRunner", "SavedModelRunner", "OpenVINORunner", "is_exported",
           "open_runner", "import_openvino", "ordered_raw_maps", "relative_error", "stream_outputs",
           "batched", "OPENVINO_INSTALL"]


def is_exported(path: PathLike) -> bool:
    """Whether ``path`` is an exported model (TFLite, ONNX, an OpenVINO IR ``.xml`` or its folder,
    or a SavedModel folder)."""
    path = os.fspath(path)
    return (path.lower().endswith(EXPORTED_SUFFIXES) or openvino_xml(path) is not None
            or os.path.isfile(os.path.join(path, "saved_model.pb")))


def ordered_raw_maps(result: Dict[str, np.ndarray]) -> List[np.ndarray]:
    """A runner's ``raw_s<stride>`` outputs, largest stride first (the body's output order)."""
    names = sorted((k for k in result if k.startswith("raw_")),
                   key=lambda k: -int(k.split("_s")[-1]) if "_s" in k else 0)
    return [result[k] for k in names]


def relative_error(a: np.ndarray, ref: np.ndarray) -> float:
    """``|a - ref| / |ref|`` in float64 (Frobenius norms; ``ref`` of norm 0 counts as 1e-12): how
    far one runtime's raw maps are from another's."""
    a, ref = np.asarray(a, np.float64), np.asarray(ref, np.float64)
    return float(np.linalg.norm(a - ref) / max(np.linalg.norm(ref), 1e-12))


def batched(items: Iterable, size: int) -> Iterator[list]:
    """``items`` in lists of ``size`` (the last may be shorter), read lazily."""
    it = iter(items)
    while chunk := list(itertools.islice(it, max(1, int(size)))):
        yield chunk


def stream_outputs(runner, batches: Iterable[np.ndarray]) -> Iterator[Dict[str, np.ndarray]]:
    """``runner.run`` of each batch, in order: several in flight at once where there are several
    and the runner streams (OpenVINO's throughput-tuned requests), else one after the other (a
    single batch keeps the latency-tuned run)."""
    it = iter(batches)
    first = list(itertools.islice(it, 2))
    if len(first) == 2 and hasattr(runner, "stream"):
        yield from runner.stream(itertools.chain(first, it))
    else:
        for batch in itertools.chain(first, it):
            yield runner.run(batch)


def import_openvino(purpose: str = "running OpenVINO models"):
    """The ``openvino`` package, or an ArgumentError saying ``purpose`` needs it and naming the
    install command."""
    return require("openvino", purpose)


class TFLiteRunner:
    """A TFLite model on LiteRT (``ai-edge-litert``); ``run(images) -> {output: array}``."""

    ENGINE = "litert"

    def __init__(self, path: str, num_threads: Optional[int] = None):
        Interpreter = require("ai_edge_litert.interpreter", "running TFLite models").Interpreter
        try:
            self.interpreter = Interpreter(model_path=path, num_threads=num_threads)
        except (ValueError, RuntimeError) as e:
            raise FileFormatError(path, f"not a TFLite model LiteRT can load: {e}") from None
        self.runner = self.interpreter.get_signature_runner()
        details = self.interpreter.get_input_details()[0]
        self.input_shape = tuple(int(v) for v in details["shape"])
        self.input_dtype = np.dtype(details["dtype"])
        scale, zero = details.get("quantization", (0.0, 0))
        self.input_quantization = (float(scale), int(zero)) if scale else None

    def run(self, images: np.ndarray) -> Dict[str, np.ndarray]:
        out = self.runner(images=images)
        return {k: np.asarray(v) for k, v in out.items()}


class OnnxRunner:
    """An ONNX model on ONNX Runtime's CPU (or CUDA when present) provider."""

    ENGINE = "onnxruntime"

    def __init__(self, path: str, num_threads: Optional[int] = None):
        ort = require("onnxruntime", "running ONNX models")
        options = ort.SessionOptions()
        if num_threads:
            options.intra_op_num_threads = num_threads
        providers = [p for p in ("CUDAExecutionProvider", "CPUExecutionProvider")
                     if p in ort.get_available_providers()]
        try:
            self.session = ort.InferenceSession(path, options, providers=providers)
        except Exception as e:  # noqa: BLE001 - onnxruntime raises its own types
            raise FileFormatError(path, f"not an ONNX model ONNX Runtime can load: {e}") from None
        first = self.session.get_inputs()[0]
        self.input_name = first.name
        self.input_shape = tuple(v if isinstance(v, int) else -1 for v in first.shape)
        self.input_dtype = np.dtype({"tensor(uint8)": np.uint8, "tensor(int8)": np.int8,
                                     "tensor(float)": np.float32}.get(first.type, np.float32))
        self.input_quantization = None
        self.output_names = [o.name for o in self.session.get_outputs()]

    def run(self, images: np.ndarray) -> Dict[str, np.ndarray]:
        return dict(zip(self.output_names, self.session.run(None, {self.input_name: images})))


class SavedModelRunner:
    """A SavedModel folder written by :func:`yolo3.export.export_saved_model` (``serve_float``)."""

    ENGINE = "tensorflow"

    def __init__(self, path: str, num_threads: Optional[int] = None):
        import tensorflow as tf
        self.model = tf.saved_model.load(path)
        self.function = self.model.signatures.get("serve_float") or getattr(self.model, "serve_float")
        self.input_dtype = np.dtype(np.float32)
        self.input_shape = None
        self.input_quantization = None

    def run(self, images: np.ndarray) -> Dict[str, np.ndarray]:
        import tensorflow as tf
        return {k: v.numpy() for k, v in self.function(images=tf.constant(images)).items()}


def _openvino_error(e: Exception) -> str:
    """The telling line of an OpenVINO exception (its text starts with C++ source locations)."""
    lines = [ln.strip() for ln in str(e).splitlines() if ln.strip()]
    told = [ln for ln in lines if not ln.startswith(("Exception from", "Check '"))]
    return (told or lines or [type(e).__name__])[-1]


class OpenVINORunner:
    """An OpenVINO IR (or an ``openvino.Model`` in memory) compiled for the CPU.

    precision: ``auto`` (:func:`yolo3.config.precision.resolve_precision`: bfloat16 where the CPU
    computes it natively, else float32 - OpenVINO is never left to pick an emulated one),
    ``float32`` or ``bfloat16``: the CPU plugin's inference precision (an int8 IR keeps its int8
    parts). ``run`` uses a latency-tuned compilation; ``stream`` a throughput-tuned one with
    asynchronous requests, for folders and video (:func:`stream_outputs`). cache_dir:
    OpenVINO's compiled-model cache.
    """

    ENGINE = "openvino"

    def __init__(self, path: Optional[str] = None, num_threads: Optional[int] = None,
                 precision: str = "auto", model=None, cache_dir: Optional[str] = None):
        ov = import_openvino()
        self.core = ov.Core()
        if cache_dir:
            self.core.set_property({"CACHE_DIR": cache_dir})
        self.path = path
        if model is None:
            xml = openvino_xml(path)
            if not os.path.isfile(xml):
                raise FileFormatError(xml, "model file not found")
            try:
                model = self.core.read_model(xml)
            except RuntimeError as e:
                raise FileFormatError(xml, f"not an OpenVINO IR OpenVINO can read: "
                                           f"{_openvino_error(e)}") from None
        self.model = model
        self.precision = resolve_precision(precision, gpu=False)
        self.config = {"INFERENCE_PRECISION_HINT": OPENVINO_PRECISIONS[self.precision]}
        if num_threads:
            self.config["INFERENCE_NUM_THREADS"] = int(num_threads)
        self.compiled = self._compile("LATENCY")
        self._throughput = None
        first = model.inputs[0]
        shape = first.get_partial_shape()
        self.input_shape = tuple(d.get_length() if d.is_static else -1 for d in shape)
        self.input_dtype = np.dtype(first.get_element_type().to_dtype())
        self.input_quantization = None
        self.output_names = [o.get_any_name() for o in self.compiled.outputs]

    def _compile(self, hint: str):
        try:
            return self.core.compile_model(self.model, "CPU",
                                           dict(self.config, PERFORMANCE_HINT=hint))
        except RuntimeError as e:
            raise FileFormatError(self.path or "model", f"OpenVINO cannot compile it: "
                                                        f"{_openvino_error(e)}") from None

    def run(self, images: np.ndarray) -> Dict[str, np.ndarray]:
        result = self.compiled(np.ascontiguousarray(images))
        return {name: np.asarray(result[out]) for name, out in
                zip(self.output_names, self.compiled.outputs)}

    def _outputs(self, request) -> Dict[str, np.ndarray]:
        return {name: np.array(request.get_output_tensor(i).data)
                for i, name in enumerate(self.output_names)}

    def stream(self, batches: Iterable[np.ndarray]) -> Iterator[Dict[str, np.ndarray]]:
        """``run`` of each batch as the batches come, in order, with OpenVINO's throughput hint and
        twice the requests it finds best for the CPU in flight: while one set computes, the caller
        prepares and queues the next and reads earlier results (on a 2-core Zen 4, 8 images of
        YOLOv3-tiny: 16-18 ms each, against 18-20 with only OpenVINO's number in flight). Reads
        ahead of the results by that many batches."""
        if self._throughput is None:
            self._throughput = self._compile("THROUGHPUT")
        compiled = self._throughput
        slots = 2 * max(1, int(compiled.get_property("OPTIMAL_NUMBER_OF_INFER_REQUESTS")))
        free = deque(compiled.create_infer_request() for _ in range(slots))
        in_flight: deque = deque()  # oldest first
        try:
            for batch in batches:
                if not free:
                    oldest = in_flight.popleft()
                    oldest.wait()
                    yield self._outputs(oldest)
                    free.append(oldest)
                request = free.popleft()
                request.start_async(np.ascontiguousarray(batch))
                in_flight.append(request)
            while in_flight:
                oldest = in_flight.popleft()
                oldest.wait()
                yield self._outputs(oldest)
        finally:  # a caller that stops early: no request may outlive its inputs
            for request in in_flight:
                request.wait()


def open_runner(path: str, num_threads: Optional[int] = None, precision: str = "auto"):
    """The runner of an exported model file or folder, by its kind."""
    if path.endswith(".tflite"):
        return TFLiteRunner(path, num_threads)
    if path.endswith(".onnx"):
        return OnnxRunner(path, num_threads)
    if openvino_xml(path) is not None:
        return OpenVINORunner(path, num_threads, precision=precision)
    return SavedModelRunner(path, num_threads)
