"""Running any saved detector: ``.keras`` / ``.weights.h5`` / keras-yolo3 ``.h5`` (the Keras
:class:`~yolo3.detector.YOLO`), ``.tflite`` (LiteRT), ``.onnx`` (ONNX Runtime) and SavedModel folders,
behind one interface, so that ``yolo3 detect`` and ``yolo3 evaluate`` score any of them alike.

An exported model carries its facts (:func:`yolo3.metadata.read_info`) and its raw maps as outputs
(:mod:`yolo3.export.graph`). :class:`ExportedDetector` letterboxes each image with the one
letterbox (:mod:`yolo3.letterbox`), runs the model, and decodes the raw maps on the host with the
Keras detector's own decoding (:func:`yolo3.decode.decode_detections`) at the thresholds it is
given; detections come back in the image's pixels like :meth:`yolo3.detector.YOLO.detect`'s.
"""
from __future__ import annotations

import os
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np

from yolo3.anchors import read_classes
from yolo3.decode import decode_detections
from yolo3.detector import YOLO
from yolo3.deprecation import accepts_old_keywords
from yolo3.errors import ArgumentError, FileFormatError, PathLike, SettingError
from yolo3.letterbox import boxes_to_image_np, letterbox_np
from yolo3.metadata import read_info
from yolo3.tflite_metadata import read_tflite_info

Detections = Tuple[np.ndarray, np.ndarray, np.ndarray]
EXPORTED_SUFFIXES = (".tflite", ".onnx")

__all__ = ["load_detector", "ExportedDetector", "TFLiteRunner", "OnnxRunner", "SavedModelRunner",
           "TFLiteDetector", "is_exported"]


def is_exported(path: PathLike) -> bool:
    """Whether ``path`` is an exported model (TFLite, ONNX or a SavedModel folder)."""
    path = os.fspath(path)
    return path.endswith(EXPORTED_SUFFIXES) or os.path.isfile(os.path.join(path, "saved_model.pb"))


class TFLiteRunner:
    """A TFLite model on LiteRT (``ai-edge-litert``); ``run(images) -> {output: array}``."""

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


def _runner(path: str, num_threads: Optional[int]):
    if path.endswith(".tflite"):
        return TFLiteRunner(path, num_threads)
    if path.endswith(".onnx"):
        return OnnxRunner(path, num_threads)
    return SavedModelRunner(path, num_threads)


class ExportedDetector:
    """Detection with an exported model, the interface of :class:`yolo3.detector.YOLO` (``detect``,
    ``detect_batch``, ``class_names``, ``num_classes``, ``input_hw``); thresholds are applied on the
    host, so any score threshold works whatever the model baked in."""

    def __init__(self, path: PathLike, classes_path: Optional[PathLike] = None, score: float = 0.3,
                 iou: float = 0.45, max_boxes: int = 100, num_threads: Optional[int] = None):
        path = os.fspath(path)
        if not os.path.exists(path):
            raise FileFormatError(path, "model file not found")
        info = read_tflite_info(path) if path.endswith(".tflite") else read_info(path)
        if info is None or not info.export:
            raise FileFormatError(path, "not a model exported by yolo3 (it carries no yolo3 info): "
                                        "export it with yolo3 export")
        if classes_path is not None:
            names = read_classes(classes_path)
            if len(names) != info.num_classes:
                raise FileFormatError(classes_path, f"{len(names)} classes but the model predicts "
                                                    f"{info.num_classes}")
            info.class_names = names
        self._setup(path, _runner(path, num_threads), info, score, iou, max_boxes)

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
        self.anchors, self.anchor_mask = info.anchors, info.masks
        self.num_classes, self.class_names = info.num_classes, info.names()
        self.score, self.iou, self.max_boxes = float(score), float(iou), int(max_boxes)
        self.precision = info.export.get("quantize", "none")

    # -- preparing inputs ------------------------------------------------------------------------
    def preprocess(self, image: np.ndarray) -> np.ndarray:
        """One image letterboxed to the model's input, float32 in [0, 1]."""
        return letterbox_np(image, self.input_hw)

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

    def raw_outputs(self, x: np.ndarray) -> List[np.ndarray]:
        """The raw maps ``raw_s32``, ... for a letterboxed float batch ``(B, in_h, in_w, 3)``."""
        outs = []
        step = self.batch or len(x)
        for start in range(0, len(x), step):
            chunk = x[start:start + step]
            n = len(chunk)
            if self.batch and n < self.batch:  # a fixed batch: pad, then drop the padding
                chunk = np.concatenate([chunk, np.zeros((self.batch - n, *chunk.shape[1:]),
                                                        chunk.dtype)])
            result = self.runner.run(self._to_input(chunk))
            names = sorted((k for k in result if k.startswith("raw_")),
                           key=lambda k: -int(k.split("_s")[-1]) if "_s" in k else 0)
            outs.append([result[k][:n].astype(np.float32) for k in names])
        return [np.concatenate(parts) for parts in zip(*outs)]

    def forward(self, x: np.ndarray) -> List[np.ndarray]:
        return self.raw_outputs(np.asarray(x, np.float32))

    # -- detecting -------------------------------------------------------------------------------
    def detect_batch(self, images: Sequence[np.ndarray]) -> List[Detections]:
        """One ``(boxes, scores, classes)`` per image (boxes x1, y1, x2, y2 in its pixels)."""
        import tensorflow as tf

        if not len(images):
            return []
        x = np.stack([self.preprocess(im) for im in images])
        raw = self.raw_outputs(x)
        sizes = np.array([np.shape(im)[:2] for im in images], np.int32)
        boxes, scores, classes, valid = decode_detections(
            [tf.constant(r) for r in raw], self.anchors, self.num_classes, tf.constant(sizes),
            max_boxes=self.max_boxes, score_threshold=self.score, iou_threshold=self.iou,
            anchor_mask=self.anchor_mask, input_shape=self.input_hw)
        boxes, scores, classes = boxes.numpy(), scores.numpy(), classes.numpy()
        return [(boxes[i, :n], scores[i, :n], classes[i, :n]) for i, n in enumerate(valid.numpy())]

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
        float32 in [0, 1] (:func:`yolo3.letterbox.letterbox_np`)."""
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


@accepts_old_keywords(model_type="variant")
def load_detector(path: PathLike, anchors_path: Optional[PathLike] = None,
                  classes_path: Optional[PathLike] = None, score: float = 0.3, iou: float = 0.45,
                  input_size=None, variant: Optional[str] = None, max_boxes: int = 100,
                  precision: str = "auto"):
    """The detector of any model file: :class:`ExportedDetector` for ``.tflite``, ``.onnx`` and
    SavedModel folders (their input size, anchors and masks are fixed: those arguments are
    refused), else :class:`yolo3.detector.YOLO`."""
    if is_exported(path):
        fixed = {"anchors": anchors_path, "input_size": input_size, "variant": variant}
        given = [setting for setting, value in fixed.items() if value is not None]
        if given:
            raise SettingError(f"{os.fspath(path)}: an exported model has a fixed input size, "
                               f"anchors and variant; drop {', '.join(given)}", *given)
        return ExportedDetector(path, classes_path, score=score, iou=iou, max_boxes=max_boxes)
    return YOLO(path, anchors_path, classes_path, score=score, iou=iou, input_size=input_size,
                variant=variant, max_boxes=max_boxes, precision=precision)
