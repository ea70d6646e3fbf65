"""Export a detector as a SavedModel or TFLite model with decoding and NMS inside.

The exported models are letterbox-free: they take images already at the fixed input size
``(batch, in_h, in_w, 3)`` (the caller resizes) and return

- ``boxes`` ``(batch, max_boxes, 4)`` float32 ``(x1, y1, x2, y2)`` in input pixels,
- ``scores`` ``(batch, max_boxes)`` float32, ``classes`` ``(batch, max_boxes)`` int32,
- ``count`` ``(batch,)`` int32: the number of valid rows (the rest is zero padding).

SavedModel signatures: ``serving_default`` takes uint8 RGB 0..255, ``serve_float`` float32 RGB in [0, 1];
``serve_image`` takes one uint8 image of any size, letterboxes it inside (:mod:`yolo3.letterbox`, the
detector's and the training pipeline's letterbox) and returns boxes in that image's pixels.
TFLite models take uint8 (default) or float32 with a fixed batch (default 1);
:meth:`TFLiteDetector.detect_image` letterboxes an image of any size for them.
"""
from __future__ import annotations

import os
from typing import Dict, Optional, Tuple

import numpy as np
import tensorflow as tf

from yolo3.decode import boxes_and_scores, decode_detections
from yolo3.errors import PathLike
from yolo3.letterbox import boxes_to_image_np, letterbox_np, letterbox_tf

OUTPUT_KEYS = ("boxes", "scores", "classes", "count")


def _class_aware_nms(boxes: tf.Tensor, scores: tf.Tensor, max_boxes: int, iou: float, score: float):
    """Per-class NMS of one image with TFLite built-in ops only (WHERE, GATHER, NMS V5).

    boxes ``(N, 4)``, scores ``(N, C)``. Every (box, class) pair above ``score`` is a candidate; boxes
    of class ``k`` are shifted by ``k * span`` so that classes never overlap, and one greedy NMS in
    score order keeps the same set as per-class NMS followed by the overall top ``max_boxes``
    (``tf.image.combined_non_max_suppression``). Returns padded boxes, scores, classes and the count.
    """
    idx = tf.where(scores > score)                              # (K, 2): box, class
    # One dummy candidate at the end keeps every gather in bounds when K == 0.
    cand_scores = tf.concat([tf.gather_nd(scores, idx), [-1.0]], 0)
    cand_boxes = tf.concat([tf.gather(boxes, idx[:, 0]), tf.zeros([1, 4])], 0)
    cand_classes = tf.concat([tf.cast(idx[:, 1], tf.int32), [0]], 0)
    span = tf.reduce_max(tf.abs(cand_boxes)) * 2.0 + 1.0
    shifted = cand_boxes + tf.cast(cand_classes, tf.float32)[:, tf.newaxis] * span
    keep, _, count = tf.raw_ops.NonMaxSuppressionV5(
        boxes=shifted, scores=cand_scores, max_output_size=max_boxes, iou_threshold=iou,
        score_threshold=score, soft_nms_sigma=0.0, pad_to_max_output_size=True)
    valid = tf.range(max_boxes) < count
    out_boxes = tf.where(valid[:, tf.newaxis], tf.gather(cand_boxes, keep), 0.0)
    out_scores = tf.where(valid, tf.gather(cand_scores, keep), 0.0)
    out_classes = tf.where(valid, tf.gather(cand_classes, keep), 0)
    return out_boxes, out_scores, out_classes, count


def _builtin_eval(detector, outputs, batch: int):
    """decode_detections's decoding with :func:`_class_aware_nms` per image (static ``batch``)."""
    hw = detector.input_hw
    boxes_all, scores_all = [], []
    for feats, mask in zip(outputs, detector.anchor_mask):
        b, s = boxes_and_scores(tf.cast(feats, tf.float32), detector.anchors[mask],
                                     detector.num_classes, hw, tf.constant(hw, tf.int32))
        boxes_all.append(b)
        scores_all.append(s)
    boxes = tf.concat(boxes_all, axis=1)
    scores = tf.concat(scores_all, axis=1)
    per_image = [_class_aware_nms(boxes[i], scores[i], detector.max_boxes, detector.iou,
                                  detector.score) for i in range(batch)]
    out_boxes, out_scores, out_classes, count = [tf.stack(list(t)) for t in zip(*per_image)]
    limit = tf.constant([hw[1], hw[0], hw[1], hw[0]], tf.float32)
    out_boxes = tf.clip_by_value(out_boxes, 0.0, limit)
    return out_boxes, out_scores, out_classes, count


def _detection_fn(detector, dtype: tf.DType, builtin_batch: Optional[int] = None):
    """``images (B, in_h, in_w, 3)`` of ``dtype`` -> dict of boxes, scores, classes, count.

    ``builtin_batch``: decode with TFLite built-in ops only, for a fixed batch size.
    """
    hw = detector.input_hw
    scale = 1.0 / 255.0 if dtype == tf.uint8 else 1.0

    def fn(images):
        x = tf.cast(images, tf.float32) * scale
        outputs = detector.raw_outputs(x)
        if builtin_batch is not None:
            boxes, scores, classes, count = _builtin_eval(detector, outputs, builtin_batch)
            return {"boxes": boxes, "scores": scores, "classes": classes, "count": count}
        boxes, scores, classes, count = decode_detections(
            outputs, detector.anchors, detector.num_classes, tf.constant(hw, tf.int32),
            max_boxes=detector.max_boxes, score_threshold=detector.score,
            iou_threshold=detector.iou, anchor_mask=detector.anchor_mask, input_shape=hw)
        return {"boxes": boxes, "scores": scores, "classes": classes, "count": count}

    return fn


def _image_fn(detector):
    """``image (H, W, 3)`` uint8 of any size -> boxes in its pixels (letterboxed inside)."""
    def fn(image):
        x = letterbox_tf(image, detector.input_hw)[tf.newaxis]
        boxes, scores, classes, count = decode_detections(
            detector.raw_outputs(x), detector.anchors, detector.num_classes, tf.shape(image)[:2],
            max_boxes=detector.max_boxes, score_threshold=detector.score,
            iou_threshold=detector.iou, anchor_mask=detector.anchor_mask,
            input_shape=detector.input_hw)
        return {"boxes": boxes, "scores": scores, "classes": classes, "count": count}
    return fn


def export_saved_model(detector, out_dir: PathLike) -> str:
    """Write a SavedModel of ``detector`` (a :class:`yolo3.detector.YOLO`) to ``out_dir``."""
    import keras

    h, w = detector.input_hw
    archive = keras.export.ExportArchive()
    archive.track(detector.inference_body)
    archive.add_endpoint("serving_default", _detection_fn(detector, tf.uint8),
                         input_signature=[tf.TensorSpec([None, h, w, 3], tf.uint8, name="images")])
    archive.add_endpoint("serve_float", _detection_fn(detector, tf.float32),
                         input_signature=[tf.TensorSpec([None, h, w, 3], tf.float32, name="images")])
    archive.add_endpoint("serve_image", _image_fn(detector),
                         input_signature=[tf.TensorSpec([None, None, 3], tf.uint8, name="image")])
    out_dir = os.fspath(out_dir)
    archive.write_out(out_dir, verbose=False)
    return out_dir


def export_tflite(detector, out_path: PathLike, input_dtype: str = "uint8", batch: int = 1) -> str:
    """Convert ``detector`` to a TFLite flatbuffer at ``out_path``.

    Built-in ops only (per-class NMS by :func:`_class_aware_nms`, since combined NMS would need the
    Flex delegate, which the ``tensorflow`` pip package's interpreter lacks). Returns ``out_path``.
    The detector must compute in float32 (TFLite quantises on its own terms).
    """
    if detector.precision != "float32":
        raise ValueError(f"TFLite export needs a float32 detector, got precision={detector.precision!r}")
    import tempfile

    import keras

    h, w = detector.input_hw
    dtype = tf.as_dtype(input_dtype)
    # Through a SavedModel: the converter then keeps the signature's input/output names and freezes
    # the Keras variables correctly (from_concrete_functions with the body as trackable does not).
    archive = keras.export.ExportArchive()
    archive.track(detector.inference_body)
    archive.add_endpoint("serving_default", _detection_fn(detector, dtype, builtin_batch=batch),
                         input_signature=[tf.TensorSpec([batch, h, w, 3], dtype, name="images")])
    with tempfile.TemporaryDirectory(prefix="yolo3_tflite_") as tmp:
        archive.write_out(tmp, verbose=False)
        converter = tf.lite.TFLiteConverter.from_saved_model(tmp, signature_keys=["serving_default"])
        converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS]
        flatbuffer = converter.convert()
    out_path = os.fspath(out_path)
    folder = os.path.dirname(os.path.abspath(out_path))
    os.makedirs(folder, exist_ok=True)
    with open(out_path, "wb") as f:
        f.write(flatbuffer)
    return out_path


class TFLiteDetector:
    """Run an exported TFLite model: ``detect(images)`` -> dict of NumPy outputs (see module doc)."""

    def __init__(self, path: PathLike, num_threads: Optional[int] = None):
        import warnings

        with warnings.catch_warnings():  # tf.lite.Interpreter's deprecation notice (LiteRT)
            warnings.simplefilter("ignore", UserWarning)
            self.interpreter = tf.lite.Interpreter(model_path=os.fspath(path), num_threads=num_threads)
        self.runner = self.interpreter.get_signature_runner()
        details = self.interpreter.get_input_details()[0]
        self.input_shape: Tuple[int, ...] = tuple(int(v) for v in details["shape"])
        self.input_dtype = np.dtype(details["dtype"])

    def detect(self, images: np.ndarray) -> Dict[str, np.ndarray]:
        images = np.asarray(images, dtype=self.input_dtype)
        if images.ndim == 3:
            images = images[None]
        if images.shape != self.input_shape:
            raise ValueError(f"TFLite model takes images of shape {self.input_shape}, got {images.shape}")
        out = self.runner(images=images)
        return {k: np.asarray(out[k]) for k in OUTPUT_KEYS}

    def prepare(self, image: np.ndarray) -> np.ndarray:
        """One ``(H, W, 3)`` image (uint8, or float in [0, 1]) letterboxed to the model's input:
        float32 in [0, 1] (:func:`yolo3.letterbox.letterbox_np`)."""
        return letterbox_np(image, self.input_shape[1:3])

    def detect_image(self, image: np.ndarray):
        """Detect in one image of any size: ``(boxes (N, 4) x1, y1, x2, y2 image pixels, scores,
        classes)`` (letterboxed like the Keras detector; a uint8 model gets the letterboxed
        pixels rounded back to 0..255)."""
        if self.input_shape[0] != 1:
            raise ValueError(f"detect_image runs one image; this model takes batches of "
                             f"{self.input_shape[0]}")
        x = self.prepare(image)
        if self.input_dtype == np.uint8:
            x = np.clip(np.round(x * 255.0), 0, 255)
        out = self.detect(x.astype(self.input_dtype))
        n = int(out["count"][0])
        boxes = boxes_to_image_np(out["boxes"][0, :n], np.shape(image)[:2], self.input_shape[1:3])
        return boxes, out["scores"][0, :n], out["classes"][0, :n]
