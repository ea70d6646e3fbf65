"""Running exported detectors: ``.tflite`` (LiteRT), ``.onnx`` (ONNX Runtime), OpenVINO IR
(``.xml`` + ``.bin``, or the folder holding them) and SavedModel folders, behind the interface of
the Keras :class:`~yolo3.inference.detector.YOLO` (which hands exported paths to
:class:`ExportedDetector`), so that ``yolo3 detect`` and ``yolo3 evaluate`` score any of them alike.
The runners are also the engines a ``.keras`` model can run on (:mod:`yolo3.inference.engines`).

An exported model carries its facts (:func:`yolo3.checkpoint.metadata.read_info`) and its raw maps
as outputs (:mod:`yolo3.export.graph`). :class:`ExportedDetector` letterboxes each image with the
one letterbox (:mod:`yolo3.ops.letterbox`), runs the model, and decodes the raw maps on the host
with the Keras detector's own decoding (:func:`yolo3.ops.decode.decode_detections`) at the
thresholds it is given; detections come back in the image's pixels like
:meth:`yolo3.inference.detector.YOLO.detect`'s.
"""
from __future__ import annotations

import itertools
import logging
import os
from collections import deque
from dataclasses import dataclass
from typing import Dict, Iterable, Iterator, List, Optional, Sequence, Tuple

import numpy as np

from yolo3.checkpoint.metadata import ModelInfo, openvino_xml, read_info, read_sidecars
from yolo3.checkpoint.tflite_metadata import read_tflite_info
from yolo3.config.masks import default_masks
from yolo3.config.precision import resolve_precision
from yolo3.core.errors import ArgumentError, FileFormatError, PathLike
from yolo3.data.class_names import read_classes
from yolo3.ops.anchors import read_anchors
from yolo3.ops.decode import decode_detections
from yolo3.ops.letterbox import boxes_to_image_np, letterbox_np, letterbox_tf

Detections = Tuple[np.ndarray, np.ndarray, np.ndarray]
EXPORTED_SUFFIXES = (".tflite", ".onnx", ".xml")
# OpenVINO's inference precision for each of ours (its CPU plugin's INFERENCE_PRECISION_HINT)
OPENVINO_PRECISIONS = {"float32": "f32", "bfloat16": "bf16"}
OPENVINO_INSTALL = "pip install 'yolo3[openvino]' (or openvino)"

log = logging.getLogger(__name__)

__all__ = ["EngineChoice", "ExportedDetector", "TFLiteRunner", "OnnxRunner", "SavedModelRunner",
           "OpenVINORunner", "TFLiteDetector", "is_exported", "open_runner", "import_openvino",
           "ordered_raw_maps", "relative_error", "stream_outputs", "batched", "OPENVINO_INSTALL"]


@dataclass
class EngineChoice:
    """What ran: ``engine`` (keras, openvino or onnxruntime), its ``precision``, and how the
    converted network was obtained (``converted`` in ``seconds``, or reused from ``cached``)."""

    engine: str
    precision: str
    converted: bool = False
    seconds: float = 0.0
    cached: Optional[str] = None
    reason: str = ""

    def summary(self) -> str:
        text = f"engine: {self.engine}, {self.precision}"
        if self.cached:
            text += (f" (converted in {self.seconds:.1f} s, cached in {self.cached})"
                     if self.converted else f" (conversion reused from {self.cached})")
        return text + (f"; {self.reason}" if self.reason else "")


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
    try:
        import openvino
    except ImportError:
        raise ArgumentError(f"{purpose} needs OpenVINO: {OPENVINO_INSTALL}") from None
    return openvino


class TFLiteRunner:
    """A TFLite model on LiteRT (``ai-edge-litert``); ``run(images) -> {output: array}``."""

    ENGINE = "litert"

    def __init__(self, path: str, num_threads: Optional[int] = None):
        try:
            from ai_edge_litert.interpreter import Interpreter
        except ImportError:
            raise ArgumentError("running TFLite models needs LiteRT: pip install 'yolo3[export]' "
                                "(or ai-edge-litert)") from None
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
        try:
            import onnxruntime as ort
        except ImportError:
            raise ArgumentError("running ONNX models needs ONNX Runtime: pip install "
                                "'yolo3[export]' (or onnxruntime)") from None
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


class _ForeignOutputs:
    """A runner over an IR without yolo3's facts (a Darknet model converted by other tools): its
    input NHWC or NCHW float32 RGB in [0, 1], its outputs the raw maps in NHWC or NCHW with
    ``channels`` channels, in any order; ``run`` gives them as ``raw_s<stride>`` in NHWC."""

    ENGINE = "openvino"

    input_dtype = np.dtype(np.float32)
    input_quantization = None

    def __init__(self, runner: OpenVINORunner, channels: int, input_hw: Tuple[int, int],
                 channels_first: bool):
        self.runner, self.channels, self.input_hw = runner, channels, input_hw
        self.channels_first = channels_first
        self.path, self.precision = runner.path, runner.precision

    def _maps(self, result: Dict[str, np.ndarray]) -> Dict[str, np.ndarray]:
        maps = {}
        for name, out in result.items():
            if out.ndim != 4 or self.channels not in (out.shape[1], out.shape[3]):
                raise FileFormatError(self.path, f"output {name!r} of shape {out.shape} is not a "
                                                 f"raw YOLO map with {self.channels} channels")
            nhwc = out if out.shape[3] == self.channels else out.transpose(0, 2, 3, 1)
            maps[f"raw_s{self.input_hw[0] // nhwc.shape[1]}"] = nhwc
        return maps

    def _input(self, images: np.ndarray) -> np.ndarray:
        return images.transpose(0, 3, 1, 2) if self.channels_first else images

    def run(self, images: np.ndarray) -> Dict[str, np.ndarray]:
        return self._maps(self.runner.run(self._input(images)))

    def stream(self, batches: Iterable[np.ndarray]) -> Iterator[Dict[str, np.ndarray]]:
        for result in self.runner.stream(self._input(b) for b in batches):
            yield self._maps(result)


def _foreign_ir(path: str, runner: OpenVINORunner, anchors_path: Optional[PathLike],
                classes_path: Optional[PathLike]) -> Tuple[ModelInfo, _ForeignOutputs]:
    """The info and runner of an IR that carries no yolo3 facts: the anchors and classes must be
    given; input size and layout come from its input shape; the masks from ``NAME.masks.json``
    beside ``NAME.xml`` (the converter's side file), else the one mask rule for its output count."""
    if anchors_path is None or classes_path is None:
        raise FileFormatError(path, "this OpenVINO IR carries no yolo3 info (anchors, masks, "
                                    "classes, input size): export it with yolo3 export, or give "
                                    "the anchors and classes of the model it was converted from "
                                    "(masks other than the default: NAME.masks.json beside it)")
    shape = runner.input_shape
    if len(shape) != 4 or 3 not in (shape[1], shape[3]):
        raise FileFormatError(path, f"input shape {shape} is not an image batch (NHWC or NCHW)")
    channels_first = shape[1] == 3 and shape[3] != 3
    hw = shape[2:4] if channels_first else shape[1:3]
    if min(hw) <= 0:
        raise FileFormatError(path, f"input shape {shape} has no fixed height and width")
    anchors, names = read_anchors(anchors_path), read_classes(classes_path)
    outputs = len(runner.output_names)
    if len(anchors) % outputs:
        raise FileFormatError(anchors_path, f"{len(anchors)} anchors do not split over the "
                                            f"model's {outputs} outputs")
    channels = len(anchors) // outputs * (5 + len(names))
    xml = openvino_xml(path)
    masks = read_sidecars(os.path.splitext(xml)[0]).get("masks") or default_masks(len(anchors),
                                                                                  outputs)
    info = ModelInfo(anchors=anchors, masks=masks,
                     num_classes=len(names), class_names=names, input_size=tuple(hw),
                     export={"format": "openvino", "input_size": list(hw), "foreign": True})
    log.info("%s: no yolo3 info; anchors from %s, classes from %s, input %s", path, anchors_path,
             classes_path, tuple(hw))
    return info, _ForeignOutputs(runner, channels, tuple(hw), channels_first)


class ExportedDetector:
    """Detection with an exported model, the interface of :class:`yolo3.inference.detector.YOLO`
    (``detect``, ``detect_batch``, ``class_names``, ``num_classes``, ``input_hw``); thresholds are
    applied on the host, so any score threshold works whatever the model baked in."""

    def __init__(self, path: PathLike, classes_path: Optional[PathLike] = None, score: float = 0.3,
                 iou: float = 0.45, max_boxes: int = 100, num_threads: Optional[int] = None,
                 anchors_path: Optional[PathLike] = None, precision: str = "auto"):
        path = os.fspath(path)
        if not os.path.exists(path):
            raise FileFormatError(path, "model file not found")
        info = read_tflite_info(path) if path.endswith(".tflite") else read_info(path)
        runner = open_runner(path, num_threads, precision)
        if info is None and isinstance(runner, OpenVINORunner):
            info, runner = _foreign_ir(path, runner, anchors_path, classes_path)
        elif info is None or not info.export:
            raise FileFormatError(path, "not a model exported by yolo3 (it carries no yolo3 info): "
                                        "export it with yolo3 export")
        elif anchors_path is not None:
            raise ArgumentError(f"{path}: an exported model carries its anchors; drop the anchors")
        if classes_path is not None:
            names = read_classes(classes_path)
            if len(names) != info.num_classes:
                raise FileFormatError(classes_path, f"{len(names)} classes but the model predicts "
                                                    f"{info.num_classes}")
            info.class_names = names
        self._setup(path, runner, info, score, iou, max_boxes)

    @classmethod
    def from_runner(cls, runner, info, score: float = 0.3, iou: float = 0.45,
                    max_boxes: int = 100) -> "ExportedDetector":
        """The detector of any ``runner`` (``run(images) -> {'raw_s32': ...}``, ``input_dtype``,
        ``input_quantization``) described by ``info`` (``info.export['input_size']`` set)."""
        detector = cls.__new__(cls)
        detector._setup(getattr(runner, "path", None), runner, info, score, iou, max_boxes)
        return detector

    def _setup(self, path: Optional[str], runner, info, score: float, iou: float,
               max_boxes: int) -> None:
        self.path, self.info, self.runner = path, info, runner
        self.input_hw: Tuple[int, int] = tuple(info.export["input_size"])
        batch = info.export.get("batch")
        self.batch: Optional[int] = int(batch) if batch else None  # None: any batch
        self.anchors, self.anchor_mask, self.head = info.anchors, info.masks, info.head
        self.num_classes, self.class_names = info.num_classes, info.names()
        self.score, self.iou, self.max_boxes = float(score), float(iou), int(max_boxes)
        quantized = info.export.get("quantize", "none")
        self.precision = (quantized if quantized != "none"
                          else getattr(runner, "precision", None) or "float32")
        self.engine = EngineChoice(getattr(runner, "ENGINE", type(runner).__name__), self.precision)
        self._compiled: Dict[tuple, object] = {}  # the compiled letterbox and decoding functions

    # -- preparing inputs ------------------------------------------------------------------------
    def preprocess(self, image: np.ndarray) -> np.ndarray:
        """One image letterboxed to the model's input, float32 in [0, 1]
        (:func:`yolo3.ops.letterbox.letterbox_tf`, compiled once per image type)."""
        import tensorflow as tf

        image = np.asarray(image)
        if image.dtype != np.uint8:
            image = image.astype(np.float32)
        key = ("letterbox", image.dtype.name)
        if key not in self._compiled:
            hw = tuple(self.input_hw)
            self._compiled[key] = tf.function(
                lambda im: letterbox_tf(im, hw), autograph=False,
                input_signature=[tf.TensorSpec([None, None, 3], tf.as_dtype(image.dtype))])
        return self._compiled[key](tf.convert_to_tensor(image)).numpy()

    def _to_input(self, x: np.ndarray) -> np.ndarray:
        return self._convert_input(self.runner, x)

    @staticmethod
    def _convert_input(runner, x: np.ndarray) -> np.ndarray:
        """Float [0, 1] batch -> the model's input type: uint8 pixels, int8 pixels - 128, float32
        (or a quantised input's own scale and zero point)."""
        if runner.input_quantization is not None:
            scale, zero = runner.input_quantization
            info = np.iinfo(runner.input_dtype)
            return np.clip(np.round(x / scale + zero), info.min, info.max).astype(runner.input_dtype)
        if runner.input_dtype == np.uint8:
            return np.clip(np.round(x * 255.0), 0, 255).astype(np.uint8)
        if runner.input_dtype == np.int8:  # RGB - 128
            return (np.clip(np.round(x * 255.0), 0, 255) - 128).astype(np.int8)
        return x.astype(np.float32)

    def _model_input(self, x: np.ndarray) -> np.ndarray:
        """A letterboxed float batch as the model takes it (a fixed batch: padded with zeros)."""
        if self.batch and len(x) < self.batch:
            x = np.concatenate([x, np.zeros((self.batch - len(x), *x.shape[1:]), x.dtype)])
        return self._to_input(x)

    @staticmethod
    def _raw_maps(result: Dict[str, np.ndarray], n: int) -> List[np.ndarray]:
        """The first ``n`` images' raw maps of one run, float32, by stride (padding dropped)."""
        return [r[:n].astype(np.float32) for r in ordered_raw_maps(result)]

    def raw_outputs(self, x: np.ndarray) -> List[np.ndarray]:
        """The raw maps ``raw_s32``, ... for a letterboxed float batch ``(B, in_h, in_w, 3)``
        (a runner that streams takes one image per request, several in flight)."""
        step = self.batch or (1 if hasattr(self.runner, "stream") else len(x))
        chunks = [x[start:start + step] for start in range(0, len(x), step)]
        results = stream_outputs(self.runner, (self._model_input(c) for c in chunks))
        outs = [self._raw_maps(result, len(c)) for result, c in zip(results, chunks)]
        return [np.concatenate(parts) for parts in zip(*outs)]

    def forward(self, x: np.ndarray) -> List[np.ndarray]:
        return self.raw_outputs(np.asarray(x, np.float32))

    # -- detecting -------------------------------------------------------------------------------
    def detect_batch(self, images: Sequence[np.ndarray]) -> List[Detections]:
        """One ``(boxes, scores, classes)`` per image (boxes x1, y1, x2, y2 in its pixels)."""
        if not len(images):
            return []
        raw = self.raw_outputs(np.stack([self.preprocess(im) for im in images]))
        return self._detections(raw, [np.shape(im)[:2] for im in images])

    def detect_stream(self, images: Iterable[np.ndarray],
                      batch_size: int = 1) -> Iterator[Detections]:
        """``detect`` of each image as the images come (a folder's files, a video's frames), in
        order: ``batch_size`` images per request (a fixed-batch model: its batch); on OpenVINO the
        next images are letterboxed and sent while earlier ones compute. Reads a few images ahead
        of the detections it gives."""
        sizes: deque = deque()  # image sizes of the batches sent, oldest first

        def inputs() -> Iterator[np.ndarray]:
            for chunk in batched(images, self.batch or batch_size):
                sizes.append([np.shape(im)[:2] for im in chunk])
                yield self._model_input(np.stack([self.preprocess(im) for im in chunk]))
        for result in stream_outputs(self.runner, inputs()):
            hw = sizes.popleft()
            yield from self._detections(self._raw_maps(result, len(hw)), hw)

    def _detections(self, raw: List[np.ndarray], image_hw: Sequence[tuple]) -> List[Detections]:
        """Host decoding and NMS of raw maps for images of ``image_hw`` (one ``(h, w)`` each)."""
        import tensorflow as tf

        decode = self._decoder(tuple(r.shape[1:] for r in raw))
        sizes = np.array(image_hw, np.int32).reshape(-1, 2)
        boxes, scores, classes, valid = decode([tf.constant(r) for r in raw], tf.constant(sizes))
        boxes, scores, classes = boxes.numpy(), scores.numpy(), classes.numpy()
        return [(boxes[i, :n], scores[i, :n], classes[i, :n]) for i, n in enumerate(valid.numpy())]

    def _decoder(self, shapes: Tuple[tuple, ...]):
        """The compiled host decoding and NMS for raw maps of ``shapes`` (per image), at the
        current thresholds."""
        import tensorflow as tf

        key = (shapes, self.score, self.iou, self.max_boxes)
        if key not in self._compiled:
            score, iou, max_boxes = self.score, self.iou, self.max_boxes

            def decode(raw, sizes):
                return decode_detections(raw, self.anchors, self.num_classes, sizes,
                                         max_boxes=max_boxes, score_threshold=score,
                                         iou_threshold=iou, anchor_mask=self.anchor_mask,
                                         input_shape=self.input_hw, head=self.head)
            signature = [[tf.TensorSpec([None, *shape], tf.float32) for shape in shapes],
                         tf.TensorSpec([None, 2], tf.int32)]
            self._compiled[key] = tf.function(decode, input_signature=signature, autograph=False)
        return self._compiled[key]

    def detect(self, image: np.ndarray) -> Detections:
        return self.detect_batch([image])[0]


class TFLiteDetector:
    """A TFLite model exported with decoding inside, run as it is: ``detect(images)`` -> its outputs
    (boxes in input pixels, scores, classes, count; see :mod:`yolo3.export.graph`), and
    ``detect_image(image)`` for one image of any size (letterboxed; boxes in its pixels)."""

    def __init__(self, path: PathLike, num_threads: Optional[int] = None):
        self.runner = TFLiteRunner(os.fspath(path), num_threads)
        self.input_shape: Tuple[int, ...] = self.runner.input_shape
        self.input_dtype = self.runner.input_dtype

    def detect(self, images: np.ndarray) -> Dict[str, np.ndarray]:
        images = np.asarray(images, dtype=self.input_dtype)
        if images.ndim == 3:
            images = images[None]
        if images.shape != self.input_shape:
            raise ValueError(f"TFLite model takes images of shape {self.input_shape}, got "
                             f"{images.shape}")
        return self.runner.run(images)

    def prepare(self, image: np.ndarray) -> np.ndarray:
        """One ``(H, W, 3)`` image (uint8, or float in [0, 1]) letterboxed to the model's input:
        float32 in [0, 1] (:func:`yolo3.ops.letterbox.letterbox_np`)."""
        return letterbox_np(image, self.input_shape[1:3])

    def detect_image(self, image: np.ndarray) -> Detections:
        """Detect in one image of any size with the model's own decoding: ``(boxes (N, 4) x1, y1,
        x2, y2 image pixels, scores, classes)`` (a uint8 model gets the letterboxed pixels rounded
        back to 0..255)."""
        if self.input_shape[0] != 1:
            raise ValueError(f"detect_image runs one image; this model takes batches of "
                             f"{self.input_shape[0]}")
        out = self.detect(ExportedDetector._convert_input(self.runner, self.prepare(image)[None]))
        n = int(out["count"][0])
        boxes = boxes_to_image_np(out["boxes"][0, :n], np.shape(image)[:2], self.input_shape[1:3])
        return boxes, out["scores"][0, :n], out["classes"][0, :n]


def __getattr__(name: str):
    """``load_detector`` moved to :mod:`yolo3.inference.detector` (it chooses between the Keras
    detector and these): the old location still gives it, with a warning."""
    if name == "load_detector":
        import importlib
        import warnings
        warnings.warn("yolo3.inference.runners.load_detector is now yolo3.inference.detector.load_detector (also "
                      "yolo3.load_detector)", DeprecationWarning, stacklevel=2)
        return importlib.import_module("yolo3.inference.detector").load_detector
    raise AttributeError(f"module 'yolo3.inference.runners' has no attribute {name!r}")
