"""Detection with an exported model (``.tflite``, ``.onnx``, OpenVINO IR, SavedModel) behind the
interface of the Keras :class:`~yolo3.inference.detector.YOLO`, so that ``yolo3 detect`` and
``yolo3 evaluate`` score any of them alike; and OpenVINO IRs converted by other tools, which carry
no yolo3 facts (their anchors and classes given).

An exported model carries its facts (:func:`yolo3.checkpoint.metadata.read_info`) and its raw maps
as outputs (:mod:`yolo3.export.graph`). :class:`ExportedDetector` letterboxes each image with the
one letterbox (:mod:`yolo3.ops.letterbox`), runs the model on its runner
(:mod:`yolo3.inference.runners`), and decodes the raw maps on the host with the Keras detector's
own decoding (its head's :meth:`~yolo3.heads.base.Head.decode`) at the thresholds it is given;
detections come back in the image's pixels like :meth:`yolo3.inference.detector.YOLO.detect`'s.
"""
from __future__ import annotations

import logging
import os
from collections import deque
from typing import Dict, Iterable, Iterator, List, Optional, Sequence, Tuple

import numpy as np

from yolo3.checkpoint.metadata import ModelInfo, openvino_xml, read_info, read_sidecars
from yolo3.checkpoint.tflite_metadata import read_tflite_info
from yolo3.config.masks import default_masks
from yolo3.core.errors import ArgumentError, FileFormatError, PathLike
from yolo3.data.class_names import read_classes
from yolo3.heads.registry import as_head
from yolo3.inference.engines import EngineChoice
from yolo3.inference.runners import (
    OpenVINORunner,
    TFLiteRunner,
    batched,
    open_runner,
    ordered_raw_maps,
    stream_outputs,
)
from yolo3.ops.anchors import read_anchors
from yolo3.ops.letterbox import boxes_to_image_np, letterbox_np, letterbox_tf

log = logging.getLogger(__name__)

__all__ = ["ExportedDetector", "TFLiteDetector", "Detections"]


Detections = Tuple[np.ndarray, np.ndarray, np.ndarray]


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
        self.anchors, self.anchor_mask = info.anchors, info.masks
        self.head = as_head(info.head)  # the anchor head holds its anchors
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
                return self.head.decode(raw, self.num_classes, sizes, self.input_hw,
                                        max_boxes=max_boxes, score_threshold=score,
                                        iou_threshold=iou)
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
