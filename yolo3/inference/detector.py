"""Inference API: load a body, letterbox, forward, decode and NMS in one compiled function (a
``tf.function`` on TensorFlow; on JAX and PyTorch the letterbox runs eagerly and the rest is
:mod:`yolo3.inference.portable`'s).

Images are NumPy RGB arrays ``(H, W, 3)``: uint8 in 0..255, or floating point already in [0, 1].
Detections are ``boxes`` ``(N, 4)`` float32 ``(x1, y1, x2, y2)`` in original image pixels (continuous
coordinates: a box covering the whole image is ``(0, 0, W, H)``), ``scores`` ``(N,)`` float32 and
``classes`` ``(N,)`` int32, sorted by score (highest first).

Construction: ``YOLO(model_path, ...)`` (= :meth:`YOLO.from_files`) reads a model file and what it
says about itself (:mod:`yolo3.checkpoint.metadata`); an exported model (``.tflite``, ``.onnx``,
OpenVINO IR, SavedModel) gives an :class:`yolo3.inference.exported.ExportedDetector` with the same
interface;
:meth:`YOLO.from_body` takes a body in memory and its :class:`~yolo3.checkpoint.metadata.ModelInfo`.
:func:`load_detector` is the same with the engine chosen for the machine (``engine="auto"``). The
graph surgery (batch-norm folding, compute dtype) is :mod:`yolo3.modeling.graph_surgery`'s; other
engines (OpenVINO, ONNX Runtime) are :mod:`yolo3.inference.engines`'.
"""
from __future__ import annotations

import dataclasses
import logging
import os
from typing import Callable, Dict, Iterable, Iterator, List, Optional, Sequence, Tuple, Union

import keras
import numpy as np
from PIL import Image

from yolo3.checkpoint.loading import load_body
from yolo3.checkpoint.metadata import ModelInfo
from yolo3.config.precision import resolve_precision
from yolo3.config.specs import check_input_size
from yolo3.core.deprecation import accepts_old_keywords
from yolo3.core.errors import CommandFailed, FileFormatError, PathLike, SettingError
from yolo3.evaluation.visualize import draw_detections
from yolo3.heads.registry import as_head
from yolo3.inference.engines import EngineChoice, engine_runner, resolve_engine
from yolo3.inference.exported import ExportedDetector
from yolo3.inference.keras_yolo3_args import KERAS_YOLO3_DEFAULTS, resolve_yolo_kwargs
from yolo3.inference.portable import compiled_call, float_maps
from yolo3.inference.runners import batched, is_exported
from yolo3.inference.torch_forward import TorchForward
from yolo3.modeling.graph_surgery import (  # noqa: F401  (fold_batch_norms re-exported)
    channels_first_twin,
    copy_weights,
    fold_batch_norms,
    refold_batch_norms,
    with_compute_dtype,
)
from yolo3.ops.letterbox import letterbox, letterbox_np, letterbox_tf

Detections = Tuple[np.ndarray, np.ndarray, np.ndarray]
InputSize = Union[int, Tuple[int, int], None]
DEFAULT_INPUT_SIZE = 416

log = logging.getLogger(__name__)


def _float_maps(body, x) -> List:
    """``body``'s outputs for ``x`` as a list of float32 maps, one per scale (``keras.ops``)."""
    return float_maps(body(x, training=False))


class YOLO:
    """A YOLOv3 detector (any registered variant, or a converted Darknet model).

    ``body`` is the loaded model; inference runs ``inference_body``, its batch-norm-folded copy.
    precision: ``"auto"`` (default: :func:`yolo3.config.precision.resolve_precision`, bfloat16 where
    the hardware computes it faster, float32 elsewhere), ``"float32"`` (matches Darknet / OpenCV to
    ~1e-6) or ``"bfloat16"``: the convolutions compute in bfloat16 (weights stay float32, outputs
    are cast back), about 1.7x faster on CPUs with AMX or AMD's AVX-512 BF16 and on recent GPUs,
    at about 1% relative error on the raw maps; slower on Intel's AVX-512 BF16 without AMX, many
    times slower where bfloat16 is emulated.
    ``self.precision`` is the one in use.

    engine: ``"keras"`` (default: the Keras backend, ``KERAS_BACKEND``), ``"openvino"``, ``"onnxruntime"`` or ``"auto"``
    (OpenVINO on a CPU where it is installed, else Keras; :mod:`yolo3.inference.engines`): the
    network, converted once and cached, runs there at ``precision``; letterboxing and decoding are
    the same. ``self.engine`` says what runs (:class:`yolo3.inference.engines.EngineChoice`).
    The conversions go through TensorFlow: on the JAX and PyTorch backends Keras runs (``auto``),
    and a named OpenVINO or ONNX Runtime engine is refused.

    model_path: a ``.keras`` body (written by training or the converter: it carries its anchors,
    masks, classes and input size), ``.weights.h5`` template weights (the body is built from
    ``variant``, the anchors and the classes) or a keras-yolo3 ``.h5`` file. anchors_path /
    classes_path / anchor_mask override what the model carries; for older models they default to
    the side files beside it. input_size: int or ``(h, w)``; None means the model's fixed input
    size, else the size it was trained or converted at, else 416.

    keras-yolo3 scripts work unchanged: ``YOLO()`` (its ``model_data/`` defaults),
    ``YOLO(model_path=..., anchors_path=..., classes_path=..., score=..., iou=...,
    model_image_size=(416, 416), gpu_num=1)`` and ``YOLO(**vars(FLAGS))`` of its ``yolo_video.py``
    (``model``, ``anchors``, ``classes``; ``image``, ``input``, ``output`` are ignored);
    ``detect_image``, ``close_session`` and :func:`yolo3.detect_video` keep its contracts.
    """

    _defaults = None  # keras-yolo3's YOLO._defaults (see get_defaults), filled below the class

    def __new__(cls, model_path: Optional[PathLike] = None, *args, **kwargs):
        """An exported model's path gives its :class:`ExportedDetector` (no Keras model)."""
        if cls is YOLO and model_path is not None and is_exported(model_path):
            return _exported_detector(model_path, *args, **kwargs)
        return super().__new__(cls)

    @accepts_old_keywords(model_type="variant")
    def __init__(self, model_path: Optional[PathLike] = None, anchors_path: Optional[PathLike] = None,
                 classes_path: Optional[PathLike] = None, score: float = 0.3, iou: float = 0.45,
                 input_size: InputSize = None, variant: Optional[str] = None,
                 anchor_mask: Optional[Sequence[Sequence[int]]] = None, max_boxes: int = 100,
                 precision: str = "auto", *, engine: str = "keras",
                 num_threads: Optional[int] = None, model_image_size=None, gpu_num: int = 1,
                 **flags):
        precision = resolve_precision(precision)
        model_path, anchors_path, classes_path, input_size = resolve_yolo_kwargs(
            model_path, anchors_path, classes_path, input_size, model_image_size, flags)
        self.gpu_num = int(gpu_num)  # accepted for keras-yolo3 scripts: inference uses one device
        body, info = load_body(model_path, anchors_path=anchors_path, classes_path=classes_path,
                               variant=variant, anchor_mask=anchor_mask)
        self.model_path: Optional[str] = os.fspath(model_path)
        self._setup(body, info, score, iou, input_size, max_boxes, precision)
        self._choose_engine(engine, num_threads)

    @classmethod
    def get_defaults(cls, n: str):
        """keras-yolo3's ``YOLO.get_defaults``: the default of setting ``n``."""
        if n in KERAS_YOLO3_DEFAULTS:
            return KERAS_YOLO3_DEFAULTS[n]
        return "Unrecognized attribute name '" + n + "'"

    @classmethod
    def from_files(cls, model_path: PathLike, **kwargs) -> "YOLO":
        """The detector of a model file (see the class docstring for the arguments)."""
        return cls(model_path, **kwargs)

    @classmethod
    def from_body(cls, body, info: ModelInfo, score: float = 0.3, iou: float = 0.45,
                  input_size: InputSize = None, max_boxes: int = 100,
                  precision: str = "auto") -> "YOLO":
        """The detector of a body in memory, described by ``info``."""
        precision = resolve_precision(precision)
        detector = cls.__new__(cls)
        detector.model_path = None
        detector._setup(body, info, score, iou, input_size, max_boxes, precision)
        return detector

    def _setup(self, body, info: ModelInfo, score: float, iou: float, input_size: InputSize,
               max_boxes: int, precision: str) -> None:
        self.body, self.info, self.precision = body, info, precision
        self.anchors = info.anchors
        self.anchor_mask = info.masks
        self.head = as_head(info.head)  # the anchor head holds its anchors and masks
        self.num_classes = info.num_classes
        self.class_names: List[str] = info.names()
        self.score, self.iou, self.max_boxes = float(score), float(iou), int(max_boxes)
        fixed = tuple(body.inputs[0].shape[1:3])
        # keras-yolo3's model_image_size=(None, None): each image at its own size (multiple of 32)
        self.fit_to_image = isinstance(input_size, str) and input_size == "image"
        if self.fit_to_image:
            if None not in fixed:
                raise FileFormatError(self.model_path, f"model input is fixed at {fixed}: it "
                                                       "cannot take each image at its own size")
            input_size = None
        if input_size is None:
            input_size = (fixed if None not in fixed else info.input_size) or DEFAULT_INPUT_SIZE
        self.input_hw = check_input_size(input_size)
        if None not in fixed and tuple(int(v) for v in fixed) != self.input_hw:
            raise FileFormatError(self.model_path, f"model input is fixed at {fixed}, not the "
                                                   f"requested {self.input_hw}")
        self.inference_body = fold_batch_norms(body)
        if precision == "bfloat16":
            self.inference_body = with_compute_dtype(self.inference_body, "mixed_bfloat16")
        self._fns: Dict[tuple, object] = {}  # compiled functions by what they take
        self._twin: Optional[keras.Model] = None  # PyTorch: the inference body in channels-first
        self._torch_forward: Optional[Callable] = None  # PyTorch: the twin as plain torch calls
        self.backend = keras.backend.backend()
        self.engine = EngineChoice("keras", precision)
        self._engine: Optional[ExportedDetector] = None

    # -- engines ---------------------------------------------------------------------------------
    def _choose_engine(self, engine: str, num_threads: Optional[int]) -> None:
        """Run the network on ``engine`` (see the class docstring); ``auto`` falls back to Keras
        (with the reason in ``self.engine``) where another engine cannot take this model."""
        if self.backend != "tensorflow":
            resolve_engine(engine)  # a bad or missing engine is named as on TensorFlow
            if engine not in ("auto", "keras"):
                raise SettingError(f"engine={engine!r} converts the model through TensorFlow; on "
                                   f"the {self.backend} backend use engine='keras' (or export the "
                                   "model under TensorFlow)", "engine")
            if engine == "auto":
                self.engine.reason = f"the {self.backend} backend runs Keras"
            return
        import tensorflow as tf
        chosen = resolve_engine(engine, gpu=bool(tf.config.list_physical_devices("GPU")))
        if chosen == "keras":
            return
        if self.fit_to_image:
            if engine != "auto":
                raise SettingError(f"engine={engine!r} runs a fixed input size; each image at its "
                                   "own size (model_image_size=(None, None)) needs the Keras "
                                   "engine", "engine")
            self.engine.reason = "each image at its own size runs on Keras"
            return
        float_body = (self.inference_body if self.precision == "float32"
                      else fold_batch_norms(self.body))
        names = [f"raw_s{stride}" for stride in self.info.strides]

        def raw_maps(images):
            return dict(zip(names, _float_maps(float_body, images)))
        function = tf.function(raw_maps, autograph=False, input_signature=[
            tf.TensorSpec([None, *self.input_hw, 3], tf.float32, name="images")])

        def reference(x: np.ndarray) -> List[np.ndarray]:
            out = function(tf.constant(x))
            return [out[n].numpy() for n in names]
        facts = {"variant": self.info.variant, "num_classes": self.num_classes,
                 "masks": self.anchor_mask, "input_hw": list(self.input_hw),
                 "head": self.info.head.record()}
        try:
            runner, self.engine = engine_runner(chosen, function, reference, self.model_path,
                                                facts, self.input_hw, self.precision, num_threads)
        except Exception as e:  # noqa: BLE001 - the converters raise their own error types
            checked = isinstance(e, CommandFailed)  # EngineCheckFailed, or a file we name
            if engine != "auto":
                if checked:
                    raise
                text = str(e).strip()
                raise CommandFailed(f"{self.model_path}: cannot convert it for {chosen}: "
                                    f"{text.splitlines()[-1] if text else type(e).__name__}"
                                    ) from None
            self.engine.reason = (f"{chosen} failed its check against Keras, Keras runs" if checked
                                  else f"{chosen} cannot convert it ({type(e).__name__}), Keras runs")
            log.warning("%s: %s", self.model_path, self.engine.reason)
            return
        info = dataclasses.replace(self.info, export={"format": chosen,
                                                      "input_size": list(self.input_hw)})
        self._engine = ExportedDetector.from_runner(runner, info, self.score, self.iou,
                                                    self.max_boxes)
        log.debug("%s: %s", self.model_path, self.engine.summary())  # the CLI prints it

    def _engine_detector(self) -> Optional[ExportedDetector]:
        """The engine's detector with this detector's current thresholds (None: Keras runs)."""
        if self._engine is not None:
            self._engine.score, self._engine.iou = self.score, self.iou
            self._engine.max_boxes = self.max_boxes
        return self._engine

    def sync_weights(self) -> None:
        """Take up the body's current weights (after training steps changed them) in the
        inference copy, keeping the compiled functions (a float32 detector) or rebuilding it. A
        converted engine no longer matches the weights: Keras runs from here on."""
        if self._engine is not None:
            self._engine = None
            self.engine = EngineChoice("keras", self.precision, reason="weights changed")
        if self.precision == "bfloat16":
            self.inference_body = with_compute_dtype(fold_batch_norms(self.body), "mixed_bfloat16")
            self._fns.clear()
            self._twin = self._torch_forward = None
        else:
            refold_batch_norms(self.body, self.inference_body)
            if self._twin is not None:
                copy_weights(self.inference_body, self._twin)

    def _compiled_body(self) -> Callable:
        """What the compiled calls run: the inference body, or on PyTorch its channels-first twin
        (:func:`yolo3.modeling.graph_surgery.channels_first_twin`: Keras's PyTorch convolutions
        copy each channels-last tensor to channels-first and back) called as plain PyTorch
        functions (:class:`yolo3.inference.torch_forward.TorchForward`: Keras's layer calls cost
        as much Python time as the operators take); the same maps to float32 rounding."""
        if self.backend != "torch":
            return self.inference_body
        if self._torch_forward is None:
            try:
                self._twin = channels_first_twin(self.inference_body)
            except ValueError as e:  # a layer it cannot lay out: the channels-last body runs
                log.debug("PyTorch runs the channels-last body: %s", e)
                self._twin = self.inference_body
            try:
                self._torch_forward = TorchForward(self._twin)
            except ValueError as e:  # bfloat16 layers: Keras calls them
                log.debug("PyTorch runs the body through Keras: %s", e)
                self._torch_forward = self._twin
        return self._torch_forward

    # -- compiled pieces -------------------------------------------------------------------------
    def raw_outputs(self, x) -> List:
        """The inference body's maps for a letterboxed float32 batch ``(B, in_h, in_w, 3)`` in [0, 1],
        one ``(B, h, w, anchors * (5 + classes))`` float32 tensor per scale (``keras.ops``; for
        export)."""
        return _float_maps(self.inference_body, x)

    def _decode_maps(self, maps: List, image_hw, input_hw: Tuple[int, int]):
        return self.head.decode(maps, self.num_classes, image_hw, input_hw,
                                max_boxes=self.max_boxes, score_threshold=self.score,
                                iou_threshold=self.iou)

    def _decode(self, x, image_hw, input_hw: Tuple[int, int]):
        return self._decode_maps(self.raw_outputs(x), image_hw, input_hw)

    def _portable(self, input_hw: Tuple[int, int]):
        """JAX and PyTorch: the compiled forward -> decode -> NMS of a letterboxed batch at
        ``input_hw`` and its images' ``(B, 2)`` sizes (thresholds as they are when it runs)."""
        key = ("portable", input_hw, self.score, self.iou, self.max_boxes)
        if key not in self._fns:
            self._fns[key] = compiled_call(
                self._compiled_body(), lambda maps, sizes: self._decode_maps(maps, sizes, input_hw))
        return self._fns[key]

    def _detect_letterboxed(self, x: np.ndarray, sizes: np.ndarray, input_hw) -> List[Detections]:
        """JAX and PyTorch: detections of a letterboxed float32 batch and its images' sizes."""
        out = self._portable(tuple(input_hw))(x, sizes)
        boxes, scores, classes, valid = (np.asarray(keras.ops.convert_to_numpy(t)) for t in out)
        return [(boxes[i, :n], scores[i, :n], classes[i, :n]) for i, n in enumerate(valid)]

    def _function(self, dtype, batched: bool, input_hw: Tuple[int, int]):
        """The compiled letterbox -> forward -> decode -> NMS for ``dtype`` images at ``input_hw``
        (TensorFlow)."""
        import tensorflow as tf
        dtype = tf.as_dtype(dtype)
        key = (dtype.name, batched, input_hw)
        if key in self._fns:
            return self._fns[key]
        if batched:
            def run(images, sizes):
                def one(args):
                    image, hw = args
                    return letterbox_tf(image[:hw[0], :hw[1]], input_hw)
                x = tf.map_fn(one, (images, sizes),
                              fn_output_signature=tf.TensorSpec([*input_hw, 3], tf.float32))
                return self._decode(x, sizes, input_hw)
            sig = [tf.TensorSpec([None, None, None, 3], dtype), tf.TensorSpec([None, 2], tf.int32)]
        else:
            def run(image):
                x = letterbox_tf(image, input_hw)[tf.newaxis]
                return self._decode(x, tf.shape(image)[:2], input_hw)
            sig = [tf.TensorSpec([None, None, 3], dtype)]
        fn = tf.function(run, input_signature=sig, autograph=False)
        self._fns[key] = fn
        return fn

    def input_hw_for(self, image_hw) -> Tuple[int, int]:
        """The network input size for an image of ``image_hw``: :attr:`input_hw`, or with
        keras-yolo3's ``model_image_size=(None, None)`` the image's size rounded down to a multiple
        of 32 (at least 32)."""
        if not self.fit_to_image:
            return self.input_hw
        return tuple(max(32, int(v) - int(v) % 32) for v in image_hw[:2])

    @staticmethod
    def _check(image) -> np.ndarray:
        image = np.asarray(image)
        if image.ndim != 3 or image.shape[-1] != 3:
            raise ValueError(f"expected an (H, W, 3) RGB image, got shape {image.shape}")
        if image.dtype != np.uint8:
            image = image.astype(np.float32)
        return image

    # -- public API ------------------------------------------------------------------------------
    def preprocess(self, image: np.ndarray) -> np.ndarray:
        """The network input for one ``(H, W, 3)`` image: float32 ``(in_h, in_w, 3)`` in [0, 1],
        letterboxed as ``detect`` feeds the network (:mod:`yolo3.ops.letterbox`)."""
        image = self._check(image)
        return letterbox_np(image, self.input_hw_for(image.shape))

    def forward(self, x: np.ndarray) -> List[np.ndarray]:
        """Raw body outputs for an already letterboxed float batch ``(B, in_h, in_w, 3)`` in [0, 1]."""
        if self._engine is not None:
            return self._engine.forward(x)
        x = np.asarray(x, np.float32)
        if self.backend != "tensorflow":
            key = ("forward", "portable")
            if key not in self._fns:
                self._fns[key] = compiled_call(self._compiled_body(), lambda maps: maps)
            return [np.asarray(keras.ops.convert_to_numpy(o)) for o in self._fns[key](x)]
        import tensorflow as tf
        key = ("forward", True)
        if key not in self._fns:
            self._fns[key] = tf.function(
                self.raw_outputs, autograph=False,
                input_signature=[tf.TensorSpec([None, *self.input_hw, 3], tf.float32)])
        out = self._fns[key](tf.convert_to_tensor(x, tf.float32))
        return [o.numpy() for o in (out if isinstance(out, (list, tuple)) else [out])]

    def detect(self, image: np.ndarray) -> Detections:
        """Detect objects in one ``(H, W, 3)`` RGB image; returns ``(boxes, scores, classes)``."""
        image = self._check(image)
        if self._engine is not None:
            return self._engine_detector().detect(image)
        input_hw = self.input_hw_for(image.shape)
        if self.backend != "tensorflow":
            x = keras.ops.expand_dims(letterbox(image, input_hw), 0)
            return self._detect_letterboxed(x, np.array([image.shape[:2]], np.int32), input_hw)[0]
        fn = self._function(image.dtype, False, input_hw)
        boxes, scores, classes, valid = fn(image)
        n = int(valid[0])
        return boxes[0, :n].numpy(), scores[0, :n].numpy(), classes[0, :n].numpy()

    def detect_batch(self, images: Sequence[np.ndarray]) -> List[Detections]:
        """Detect in several images of any sizes with one call; one ``(boxes, scores, classes)`` each."""
        arrays = [self._check(im) for im in images]
        if not arrays:
            return []
        if self._engine is not None:
            return self._engine_detector().detect_batch(arrays)
        if self.fit_to_image:  # one input size per image: one call each
            return [self.detect(a) for a in arrays]
        if self.backend != "tensorflow":
            x = keras.ops.stack([letterbox(a, self.input_hw) for a in arrays])
            sizes = np.array([a.shape[:2] for a in arrays], dtype=np.int32)
            return self._detect_letterboxed(x, sizes, self.input_hw)
        dtype = np.uint8 if all(a.dtype == np.uint8 for a in arrays) else np.float32
        if dtype == np.float32:
            arrays = [a.astype(np.float32) / 255.0 if a.dtype == np.uint8 else a for a in arrays]
        hmax = max(a.shape[0] for a in arrays)
        wmax = max(a.shape[1] for a in arrays)
        batch = np.zeros((len(arrays), hmax, wmax, 3), dtype=dtype)
        for i, a in enumerate(arrays):
            batch[i, :a.shape[0], :a.shape[1]] = a
        sizes = np.array([a.shape[:2] for a in arrays], dtype=np.int32)
        fn = self._function(dtype, True, self.input_hw)
        boxes, scores, classes, valid = fn(batch, sizes)
        boxes, scores, classes, valid = boxes.numpy(), scores.numpy(), classes.numpy(), valid.numpy()
        return [(boxes[i, :n], scores[i, :n], classes[i, :n]) for i, n in enumerate(valid)]

    def detect_stream(self, images: Iterable[np.ndarray],
                      batch_size: int = 1) -> Iterator[Detections]:
        """``detect`` of each image of an iterable as it comes (a folder's files, a video's
        frames), in order, ``batch_size`` images per forward pass. On an engine with asynchronous
        requests (OpenVINO) the next images are prepared and sent while earlier ones compute, so
        the iterable is read a few images ahead of the detections given."""
        if self._engine is not None:
            yield from self._engine_detector().detect_stream(
                (self._check(im) for im in images), batch_size)
            return
        for chunk in batched(images, batch_size):
            yield from (self.detect_batch(chunk) if len(chunk) > 1 else [self.detect(chunk[0])])

    def detect_image(self, image: Image.Image) -> Image.Image:
        """Detect in a PIL image; returns a copy with boxes and ``"name 0.87"`` labels drawn (one
        stable colour per class). keras-yolo3's ``model_image_size=(None, None)`` detects at the
        image's own size rounded down to a multiple of 32."""
        rgb = image.convert("RGB")
        boxes, scores, classes = self.detect(np.asarray(rgb))
        return draw_detections(rgb, boxes, scores, classes, self.class_names)

    def close_session(self) -> None:
        """keras-yolo3's ``close_session``: drops the compiled functions (Keras 3 has no session)."""
        self._fns.clear()


def _exported_detector(path: PathLike, anchors_path: Optional[PathLike] = None,
                       classes_path: Optional[PathLike] = None, score: float = 0.3,
                       iou: float = 0.45, input_size: InputSize = None,
                       variant: Optional[str] = None, anchor_mask=None, max_boxes: int = 100,
                       precision: str = "auto", *, engine: str = "auto",
                       num_threads: Optional[int] = None, model_type: Optional[str] = None,
                       **ignored) -> ExportedDetector:
    """The detector of an exported model: its input size, variant and masks are fixed (those
    arguments are refused); anchors only for an OpenVINO IR that carries no yolo3 info."""
    path = os.fspath(path)
    fixed = {"input_size": input_size, "variant": variant or model_type, "anchor_mask": anchor_mask}
    given = [setting for setting, value in fixed.items() if value is not None]
    if given:
        raise SettingError(f"{path}: an exported model has a fixed input size, anchors and "
                           f"variant; drop {', '.join(given)}", *given)
    detector = ExportedDetector(path, classes_path, score=score, iou=iou, max_boxes=max_boxes,
                                num_threads=num_threads, anchors_path=anchors_path,
                                precision=precision)
    own = detector.engine.engine  # the runtime its format runs on (runtimes' runner ENGINE)
    if engine not in ("auto", own):
        raise SettingError(f"{path}: an exported model runs on its own runtime ({own}), not "
                           f"engine={engine!r}", "engine")
    return detector


@accepts_old_keywords(model_type="variant")
def load_detector(path: PathLike, anchors_path: Optional[PathLike] = None,
                  classes_path: Optional[PathLike] = None, score: float = 0.3, iou: float = 0.45,
                  input_size=None, variant: Optional[str] = None, max_boxes: int = 100,
                  precision: str = "auto", engine: str = "auto",
                  num_threads: Optional[int] = None):
    """The detector of any model file, on the engine chosen for the machine (``auto``: see
    :mod:`yolo3.inference.engines`): :class:`yolo3.inference.exported.ExportedDetector` for
    ``.tflite``, ``.onnx``, OpenVINO IR and SavedModel folders (their input size, anchors and masks
    are fixed: those arguments are refused), else :class:`YOLO`."""
    return YOLO(path, anchors_path, classes_path, score=score, iou=iou, input_size=input_size,
                variant=variant, max_boxes=max_boxes, precision=precision, engine=engine,
                num_threads=num_threads)

