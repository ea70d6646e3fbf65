"""Inference API: load a body, letterbox, forward, decode and NMS in one compiled TF function.

Images are NumPy RGB arrays ``(H, W, 3)``: uint8 in 0..255, or floating point already in [0, 1].
Detections are ``boxes`` ``(N, 4)`` float32 ``(x1, y1, x2, y2)`` in original image pixels (continuous
coordinates: a box covering the whole image is ``(0, 0, W, H)``), ``scores`` ``(N,)`` float32 and
``classes`` ``(N,)`` int32, sorted by score (highest first).
"""
from __future__ import annotations

import json
import os
from typing import Dict, List, Optional, Sequence, Tuple, Union

import keras
import numpy as np
import tensorflow as tf
from PIL import Image

from yolo3.anchors import default_masks, read_anchors, read_classes, validate_masks
from yolo3.boxes import letterbox_geometry
from yolo3.data.images import load_image  # noqa: F401  (re-exported for convenience)
from yolo3.decode import yolo_eval
from yolo3.errors import FileFormatError, PathLike

Detections = Tuple[np.ndarray, np.ndarray, np.ndarray]
InputSize = Union[int, Tuple[int, int], None]
PRECISIONS = ("float32", "bfloat16")


def letterbox_tf(image: tf.Tensor, input_hw: Tuple[int, int]) -> tf.Tensor:
    """Letterbox one ``(H, W, 3)`` image to ``input_hw``: resize (bilinear) keeping the aspect ratio to
    :func:`yolo3.boxes.letterbox_geometry`'s ``new_hw`` and pad with 0.5 gray. uint8 input is scaled
    to [0, 1]; float input is taken as [0, 1]. Returns float32 ``(in_h, in_w, 3)``.
    """
    scale = 1.0 / 255.0 if image.dtype == tf.uint8 else 1.0
    x = tf.cast(image, tf.float32)
    new_hw, offset_hw, _ = letterbox_geometry(tf.shape(image)[:2], input_hw)
    new_hw = tf.cast(new_hw, tf.int32)
    offset = tf.cast(offset_hw, tf.int32)
    x = tf.image.resize(x[tf.newaxis], new_hw, method="bilinear")[0] * scale
    pads = tf.stack([tf.stack([offset[0], input_hw[0] - new_hw[0] - offset[0]]),
                     tf.stack([offset[1], input_hw[1] - new_hw[1] - offset[1]]),
                     tf.constant([0, 0])])
    x = tf.pad(x, pads, constant_values=0.5)
    return tf.ensure_shape(x, [input_hw[0], input_hw[1], 3])


def _sidecars(model_path: str) -> Dict[str, str]:
    """Anchors / masks / classes files written beside a model by the converter or the trainer."""
    from yolo3.darknet.convert import sidecar_paths

    found: Dict[str, str] = {}
    anchors_file, masks_file = sidecar_paths(model_path)
    for key, p in (("anchors", anchors_file), ("masks", masks_file)):
        if os.path.isfile(p):
            found[key] = os.fspath(p)
    folder = os.path.dirname(os.path.abspath(model_path))
    for key, name in (("anchors", "anchors.txt"), ("classes", "classes.txt")):
        p = os.path.join(folder, name)
        if key not in found and os.path.isfile(p):
            found[key] = p
    return found


def _read_masks(path: str, num_anchors: int) -> List[List[int]]:
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except (OSError, ValueError) as e:
        raise FileFormatError(path, f"cannot read anchor masks JSON: {e}")
    if isinstance(data, dict):
        data = data.get("masks", data.get("anchor_mask"))
    try:
        return validate_masks(data, num_anchors)
    except (TypeError, ValueError) as e:
        raise FileFormatError(path, f"bad anchor masks: {e}")


def _as_hw(size: InputSize) -> Tuple[int, int]:
    hw = (int(size), int(size)) if np.ndim(size) == 0 else (int(size[0]), int(size[1]))
    if hw[0] <= 0 or hw[1] <= 0 or hw[0] % 32 or hw[1] % 32:
        raise ValueError(f"input size {hw} must be positive multiples of 32")
    return hw


class YOLO:
    """A YOLOv3 / tiny YOLOv3 detector.

    ``body`` is the loaded model; inference runs ``inference_body``, its batch-norm-folded copy.
    precision: ``"float32"`` (default, matches Darknet / OpenCV to ~1e-6) or ``"bfloat16"``: the
    convolutions compute in bfloat16 (weights stay float32, outputs are cast back), about 1.7x faster
    on CPUs with AVX-512 BF16 or AMX (see :func:`yolo3.benchmarking.has_fast_bfloat16`) and on recent
    GPUs, at about 1% relative error on the raw maps; slower where bfloat16 is emulated.

    model_path: a ``.keras`` body (template from training, or a converted Darknet model) or
    ``.weights.h5`` template weights (the body is built from ``model_type``, the anchors and classes).
    anchors_path / classes_path default to the files written beside the model (converter sidecars,
    training's ``anchors.txt`` / ``classes.txt``). anchor_mask defaults to the converter's masks JSON
    when present, else :func:`yolo3.anchors.default_masks`. input_size: int or ``(h, w)``; None means
    the model's fixed input size, or 416 for a size-agnostic body.
    """

    def __init__(self, model_path: PathLike, anchors_path: Optional[PathLike] = None,
                 classes_path: Optional[PathLike] = None, score: float = 0.3, iou: float = 0.45,
                 input_size: InputSize = None, model_type: Optional[str] = None,
                 anchor_mask: Optional[Sequence[Sequence[int]]] = None, max_boxes: int = 100,
                 precision: str = "float32"):
        import yolo3  # noqa: F401  (registers serializable objects)
        from yolo3.model import build_body

        if precision not in PRECISIONS:
            raise ValueError(f"precision must be one of {PRECISIONS}, got {precision!r}")
        self.precision = precision
        model_path = os.fspath(model_path)
        if not os.path.isfile(model_path):
            raise FileFormatError(model_path, "model file not found")
        side = _sidecars(model_path)
        anchors_path = os.fspath(anchors_path) if anchors_path is not None else side.get("anchors")
        if anchors_path is None:
            raise FileFormatError(model_path, "no anchors file given and none found beside the model")
        self.anchors = read_anchors(anchors_path)
        if classes_path is None:
            classes_path = side.get("classes")
        self.class_names: Optional[List[str]] = (read_classes(classes_path)
                                                 if classes_path is not None else None)
        self.score = float(score)
        self.iou = float(iou)
        self.max_boxes = int(max_boxes)

        if model_path.endswith(".weights.h5"):
            if self.class_names is None:
                raise FileFormatError(model_path, "building a body from .weights.h5 needs a classes file")
            if model_type is None:
                model_type = {9: "yolov3", 6: "tiny"}.get(len(self.anchors))
                if model_type is None:
                    raise FileFormatError(anchors_path, f"{len(self.anchors)} anchors: cannot infer "
                                          "model_type (9 -> yolov3, 6 -> tiny); pass model_type")
            scales = 3 if model_type == "yolov3" else 2
            body = build_body(model_type, len(self.class_names), len(self.anchors) // scales)
            try:
                body.load_weights(model_path)
            except Exception as e:  # noqa: BLE001 - Keras raises many types for a wrong file
                raise FileFormatError(model_path, f"weights do not fit a {model_type} body for "
                                      f"{len(self.class_names)} classes: {e}")
        else:
            try:
                body = keras.models.load_model(model_path, compile=False)
            except Exception as e:  # noqa: BLE001
                raise FileFormatError(model_path, f"cannot load Keras model: {e}")
        self.body = body
        self.inference_body = fold_batch_norms(body)
        if precision == "bfloat16":
            self.inference_body = with_compute_dtype(self.inference_body, "mixed_bfloat16")

        outputs = list(body.outputs)
        if anchor_mask is None and "masks" in side:
            anchor_mask = _read_masks(side["masks"], len(self.anchors))
        if anchor_mask is None:
            if len(self.anchors) % len(outputs):
                raise FileFormatError(anchors_path, f"{len(self.anchors)} anchors do not split over "
                                      f"{len(outputs)} outputs; pass anchor_mask")
            per = len(self.anchors) // len(outputs)
            anchor_mask = [[s * per + i for i in range(per)] for s in reversed(range(len(outputs)))]
            if per == 3:
                anchor_mask = default_masks(len(self.anchors))
        self.anchor_mask = validate_masks(anchor_mask, len(self.anchors))
        if len(self.anchor_mask) != len(outputs):
            raise FileFormatError(model_path, f"{len(outputs)} outputs but {len(self.anchor_mask)} "
                                  "anchor masks")
        channels = [int(o.shape[-1]) for o in outputs]
        a0 = len(self.anchor_mask[0])
        num_classes = channels[0] // a0 - 5
        for c, m in zip(channels, self.anchor_mask):
            if c != len(m) * (num_classes + 5):
                raise FileFormatError(model_path, f"output channels {channels} do not fit anchor masks "
                                      f"{self.anchor_mask}")
        if self.class_names is None:
            self.class_names = [str(i) for i in range(num_classes)]
        if len(self.class_names) != num_classes:
            raise FileFormatError(classes_path, f"{len(self.class_names)} classes but the model "
                                  f"predicts {num_classes}")
        self.num_classes = num_classes

        fixed = body.inputs[0].shape[1:3]
        if input_size is None:
            input_size = (int(fixed[0]), int(fixed[1])) if None not in tuple(fixed) else 416
        self.input_hw = _as_hw(input_size)
        if None not in tuple(fixed) and tuple(int(v) for v in fixed) != self.input_hw:
            raise FileFormatError(model_path, f"model input is fixed at {tuple(fixed)}, "
                                  f"not the requested {self.input_hw}")
        self._fns: Dict[Tuple[str, bool], tf.types.experimental.GenericFunction] = {}

    # -- compiled pieces -------------------------------------------------------------------------
    def raw_outputs(self, x: tf.Tensor) -> List[tf.Tensor]:
        """The inference body's maps for a letterboxed float32 batch ``(B, in_h, in_w, 3)`` in [0, 1],
        one ``(B, h, w, anchors * (5 + classes))`` float32 tensor per scale (TF ops; for export)."""
        outputs = self.inference_body(x, training=False)
        if not isinstance(outputs, (list, tuple)):
            outputs = [outputs]
        return [tf.cast(o, tf.float32) for o in outputs]

    def _decode(self, x: tf.Tensor, image_hw: tf.Tensor):
        outputs = self.raw_outputs(x)
        return yolo_eval(outputs, self.anchors, self.num_classes, image_hw, max_boxes=self.max_boxes,
                         score_threshold=self.score, iou_threshold=self.iou,
                         anchor_mask=self.anchor_mask, input_shape=self.input_hw)

    def _function(self, dtype: tf.DType, batched: bool):
        key = (dtype.name, batched)
        if key in self._fns:
            return self._fns[key]
        if batched:
            def run(images, sizes):
                def one(args):
                    image, hw = args
                    return letterbox_tf(image[:hw[0], :hw[1]], self.input_hw)
                x = tf.map_fn(one, (images, sizes),
                              fn_output_signature=tf.TensorSpec([*self.input_hw, 3], tf.float32))
                return self._decode(x, sizes)
            sig = [tf.TensorSpec([None, None, None, 3], dtype), tf.TensorSpec([None, 2], tf.int32)]
        else:
            def run(image):
                x = letterbox_tf(image, self.input_hw)[tf.newaxis]
                return self._decode(x, tf.shape(image)[:2])
            sig = [tf.TensorSpec([None, None, 3], dtype)]
        fn = tf.function(run, input_signature=sig, autograph=False)
        self._fns[key] = fn
        return fn

    @staticmethod
    def _check(image) -> np.ndarray:
        image = np.asarray(image)
        if image.ndim != 3 or image.shape[-1] != 3:
            raise ValueError(f"expected an (H, W, 3) RGB image, got shape {image.shape}")
        if image.dtype != np.uint8:
            image = image.astype(np.float32)
        return image

    # -- public API ------------------------------------------------------------------------------
    def forward(self, x: np.ndarray) -> List[np.ndarray]:
        """Raw body outputs for an already letterboxed float batch ``(B, in_h, in_w, 3)`` in [0, 1]."""
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
        fn = self._function(tf.as_dtype(image.dtype), batched=False)
        boxes, scores, classes, valid = fn(tf.convert_to_tensor(image))
        n = int(valid[0])
        return boxes[0, :n].numpy(), scores[0, :n].numpy(), classes[0, :n].numpy()

    def detect_batch(self, images: Sequence[np.ndarray]) -> List[Detections]:
        """Detect in several images of any sizes with one call; one ``(boxes, scores, classes)`` each."""
        arrays = [self._check(im) for im in images]
        if not arrays:
            return []
        dtype = np.uint8 if all(a.dtype == np.uint8 for a in arrays) else np.float32
        if dtype == np.float32:
            arrays = [a.astype(np.float32) / 255.0 if a.dtype == np.uint8 else a for a in arrays]
        hmax = max(a.shape[0] for a in arrays)
        wmax = max(a.shape[1] for a in arrays)
        batch = np.zeros((len(arrays), hmax, wmax, 3), dtype=dtype)
        for i, a in enumerate(arrays):
            batch[i, :a.shape[0], :a.shape[1]] = a
        sizes = np.array([a.shape[:2] for a in arrays], dtype=np.int32)
        boxes, scores, classes, valid = self._function(tf.as_dtype(dtype), batched=True)(batch, sizes)
        boxes, scores, classes, valid = boxes.numpy(), scores.numpy(), classes.numpy(), valid.numpy()
        return [(boxes[i, :n], scores[i, :n], classes[i, :n]) for i, n in enumerate(valid)]

    def detect_image(self, image: Image.Image) -> Image.Image:
        """Detect in a PIL image; returns a copy with boxes and labels drawn (one colour per class)."""
        from yolo3.visualize import draw_detections
        rgb = image.convert("RGB")
        boxes, scores, classes = self.detect(np.asarray(rgb))
        return draw_detections(rgb, boxes, scores, classes, self.class_names)


def with_compute_dtype(model: keras.Model, policy: str) -> keras.Model:
    """A copy of functional ``model`` whose layers use the Keras dtype ``policy`` (e.g.
    ``"mixed_bfloat16"``: float32 variables, bfloat16 computation), with the same weight values."""
    def clone(layer):
        config = layer.get_config()
        config["dtype"] = policy
        return layer.__class__.from_config(config)

    copy = keras.models.clone_model(model, clone_function=clone)
    for layer in model.layers:
        if layer.weights:
            copy.get_layer(layer.name).set_weights(layer.get_weights())
    return copy


class FoldedBatchNorm(keras.layers.Layer):
    """Identity standing in for a BatchNormalization folded into the preceding convolution."""

    def call(self, inputs, training=None, mask=None):
        return inputs


def fold_batch_norms(body: keras.Model) -> keras.Model:
    """An inference copy of ``body`` with every ``Conv2D -> BatchNormalization`` pair folded into one
    biased convolution (``w * g / sqrt(v + eps)``, ``beta + (b - mean) * g / sqrt(v + eps)``) and the
    BN layer replaced by an identity. Other layers are shared with ``body``. Outputs equal ``body``'s
    (``training=False``) up to float rounding; about 10% faster on CPU.
    """
    pairs: Dict[str, object] = {}
    for layer in body.layers:
        if not isinstance(layer, keras.layers.BatchNormalization) or len(layer._inbound_nodes) != 1:
            continue
        axis = layer.axis if isinstance(layer.axis, int) else layer.axis[0]
        src = layer._inbound_nodes[0].input_tensors[0]._keras_history.operation
        if (isinstance(src, keras.layers.Conv2D) and axis in (-1, 3) and len(src._outbound_nodes) == 1
                and len(src._inbound_nodes) == 1 and src.activation is keras.activations.linear):
            pairs[src.name] = layer
    if not pairs:
        return body
    bn_names = {bn.name for bn in pairs.values()}

    def clone(layer):
        if layer.name in pairs:
            config = layer.get_config()
            config["use_bias"] = True
            return keras.layers.Conv2D.from_config(config)
        if layer.name in bn_names:
            return FoldedBatchNorm(name=layer.name)
        return layer

    folded = keras.models.clone_model(body, clone_function=clone)
    for conv_name, bn in pairs.items():
        conv = body.get_layer(conv_name)
        weights = conv.get_weights()
        kernel = weights[0].astype(np.float64)
        bias = weights[1].astype(np.float64) if conv.use_bias else np.zeros(kernel.shape[-1])
        values = dict(zip([w.path.split("/")[-1] for w in bn.weights], bn.get_weights()))
        gamma = values.get("gamma", np.ones_like(bias))
        beta = values.get("beta", np.zeros_like(bias))
        factor = gamma / np.sqrt(values["moving_variance"].astype(np.float64) + bn.epsilon)
        folded.get_layer(conv_name).set_weights([
            (kernel * factor).astype(np.float32),
            (beta + (bias - values["moving_mean"]) * factor).astype(np.float32)])
    return folded
