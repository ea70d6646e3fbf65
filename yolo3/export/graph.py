"""The functions every exported model is made of: network input -> raw maps (and detections).

An exported model takes images already letterboxed to its fixed input size ``(batch, in_h, in_w,
3)``: uint8 RGB 0..255, int8 RGB minus 128 (-128..127), or float32 RGB in [0, 1]. Its outputs are

- ``raw_s32``, ``raw_s16`` (, ``raw_s8``): the raw maps ``(batch, h / s, w / s, A * (5 + C))``
  (an anchor-free head's: ``4 * reg_max + C``) float32, largest stride first; hosts decode them
  with any thresholds (:mod:`yolo3.inference.runners`);
- unless exported ``raw``: ``boxes`` ``(batch, max_boxes, 4)`` float32 ``(x1, y1, x2, y2)`` in
  input pixels, ``scores`` ``(batch, max_boxes)``, ``classes`` ``(batch, max_boxes)`` int32 and
  ``count`` ``(batch,)`` int32 (rows past ``count`` are zero padding): decoding and per-class NMS
  inside, at the thresholds given when exporting.

With a fixed batch the NMS uses only built-in ops that TFLite and ONNX run
(:func:`class_aware_nms`); with a free batch, TF's ``combined_non_max_suppression``.
"""
from __future__ import annotations

from typing import Callable, Dict, List, Optional

import tensorflow as tf

from yolo3.ops.letterbox import letterbox_tf

DETECTION_KEYS = ("boxes", "scores", "classes", "count")

__all__ = ["DETECTION_KEYS", "raw_names", "model_function", "image_function", "class_aware_nms",
           "to_unit_range"]


def raw_names(detector) -> List[str]:
    """``raw_s<stride>`` for each body output, largest stride first."""
    return [f"raw_s{stride}" for stride in detector.info.strides]


def class_aware_nms(boxes: tf.Tensor, scores: tf.Tensor, max_boxes: int, iou: float, score: float):
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


def _builtin_decode(detector, outputs, batch: int):
    """The head's decoding with :func:`class_aware_nms` per image (static ``batch``)."""
    hw = detector.input_hw
    boxes, scores = detector.head.raw_boxes_and_scores(outputs, detector.num_classes,
                                                       tf.constant(hw, tf.int32), hw)
    per_image = [class_aware_nms(boxes[i], scores[i], detector.max_boxes, detector.iou,
                                 detector.score) for i in range(batch)]
    out_boxes, out_scores, out_classes, count = [tf.stack(list(t)) for t in zip(*per_image)]
    limit = tf.constant([hw[1], hw[0], hw[1], hw[0]], tf.float32)
    return tf.clip_by_value(out_boxes, 0.0, limit), out_scores, out_classes, count


def to_unit_range(images: tf.Tensor) -> tf.Tensor:
    """Exported inputs -> float32 RGB in [0, 1]: uint8 ``/ 255``, int8 ``(+ 128) / 255``, float32
    as it is."""
    if images.dtype == tf.uint8:
        return tf.cast(images, tf.float32) / 255.0
    if images.dtype == tf.int8:
        return (tf.cast(images, tf.float32) + 128.0) / 255.0
    return tf.cast(images, tf.float32)


def model_function(detector, input_dtype: tf.DType, batch: Optional[int] = None,
                   raw: bool = False) -> Callable[[tf.Tensor], Dict[str, tf.Tensor]]:
    """``images (batch, in_h, in_w, 3)`` of ``input_dtype`` (see :func:`to_unit_range`) -> the
    outputs of the module docstring. ``batch``: fixed, decoding with built-in ops only."""
    hw = detector.input_hw
    names = raw_names(detector)

    def fn(images):
        x = to_unit_range(images)
        outputs = detector.raw_outputs(x)
        result = dict(zip(names, outputs))
        if raw:
            return result
        if batch is not None:
            boxes, scores, classes, count = _builtin_decode(detector, outputs, batch)
        else:
            boxes, scores, classes, count = detector.head.decode(
                outputs, detector.num_classes, tf.constant(hw, tf.int32), hw,
                max_boxes=detector.max_boxes, score_threshold=detector.score,
                iou_threshold=detector.iou)
        result.update(boxes=boxes, scores=scores, classes=classes, count=count)
        return result

    return fn


def image_function(detector) -> Callable[[tf.Tensor], Dict[str, tf.Tensor]]:
    """``image (H, W, 3)`` uint8 of any size -> detections in its pixels (letterboxed inside with
    :func:`yolo3.ops.letterbox.letterbox_tf`, the detector's letterbox)."""
    def fn(image):
        x = letterbox_tf(image, detector.input_hw)[tf.newaxis]
        boxes, scores, classes, count = detector.head.decode(
            detector.raw_outputs(x), detector.num_classes, tf.shape(image)[:2],
            detector.input_hw, max_boxes=detector.max_boxes, score_threshold=detector.score,
            iou_threshold=detector.iou)
        return {"boxes": boxes, "scores": scores, "classes": classes, "count": count}
    return fn
