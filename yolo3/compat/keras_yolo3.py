"""keras-yolo3's public contracts under keras-yolo3's names (``yolo3.model`` re-exports them): a
compatibility face that nothing inside yolo3 imports.

keras-yolo3 users' scripts call these with keras-yolo3's arguments, defaults and return values:

- :func:`yolo_eval`: the outputs of ONE image -> ``(boxes (N, 4) y1, x1, y2, x2 image pixels,
  scores (N,), classes (N,))``, at most ``max_boxes`` per class, score >= ``score_threshold``;
- :func:`yolo_correct_boxes`: input-relative centres/sizes -> ``(..., 4)`` ``y1, x1, y2, x2`` pixels;
- :func:`yolo_boxes_and_scores`: one scale -> ``(N, 4)`` y-first boxes and ``(N, C)`` scores, the
  batch flattened;
- :func:`yolo_loss`: ``(args, anchors, num_classes, ignore_thresh=.5, print_loss=False)``;
- :func:`preprocess_true_boxes`: ``(true_boxes, input_shape, anchors, num_classes)``;

all with keras-yolo3's default anchor masks: ``[[6, 7, 8], [3, 4, 5], [0, 1, 2]]`` for 9 anchors
and ``[[3, 4, 5], [1, 2, 3]]`` for 6 (:func:`keras_yolo3_masks`). ``anchor_mask`` is an extra,
keyword-only argument. The numbers are yolo3's: the letterbox geometry of :mod:`yolo3.ops.letterbox`
(offsets floored, as the letterbox places the image), exact box centres (keras-yolo3 floored them
to whole pixels), and an ignore mask against the ground truth of every scale (as Darknet).
The batched, x-first versions the detector runs are :mod:`yolo3.ops.decode`'s.
"""
from __future__ import annotations

from typing import List, Optional, Sequence

import numpy as np
import tensorflow as tf

from yolo3.config.loss_options import LossOptions
from yolo3.config.masks import keras_yolo3_masks
from yolo3.inference.keras_yolo3_args import KERAS_YOLO3_DEFAULTS
from yolo3.modeling.loss import yolo_loss as _yolo3_loss
from yolo3.ops.decode import correct_boxes, yolo_head
from yolo3.ops.targets import preprocess_true_boxes as _encode

Masks = Optional[Sequence[Sequence[int]]]

__all__ = ["keras_yolo3_masks", "yolo_eval", "yolo_correct_boxes", "yolo_boxes_and_scores",
           "yolo_loss", "preprocess_true_boxes", "KERAS_YOLO3_DEFAULTS"]

def _yx(boxes: tf.Tensor) -> tf.Tensor:
    """``(..., 4)`` x1, y1, x2, y2 -> y1, x1, y2, x2."""
    return tf.gather(boxes, [1, 0, 3, 2], axis=-1)


def yolo_correct_boxes(box_xy, box_wh, input_shape, image_shape) -> tf.Tensor:
    """``(..., 2)`` input-relative ``(cx, cy)`` and ``(w, h)`` -> ``(..., 4)`` ``y1, x1, y2, x2``
    pixels of the original image of size ``image_shape`` ``(h, w)`` (undoing the letterbox)."""
    return _yx(correct_boxes(box_xy, box_wh, input_shape, image_shape))


def yolo_boxes_and_scores(feats, anchors, num_classes: int, input_shape, image_shape):
    """One scale's raw output -> boxes ``(N, 4)`` y1, x1, y2, x2 pixels and scores ``(N, C)``
    (objectness x class probability), every cell and anchor of the batch in one list."""
    box_xy, box_wh, box_confidence, box_class_probs = yolo_head(feats, anchors, num_classes,
                                                                input_shape)
    boxes = tf.reshape(yolo_correct_boxes(box_xy, box_wh, input_shape, image_shape), [-1, 4])
    scores = tf.reshape(box_confidence * box_class_probs, [-1, num_classes])
    return boxes, scores


def yolo_eval(yolo_outputs, anchors, num_classes: int, image_shape, max_boxes: int = 20,
              score_threshold: float = .6, iou_threshold: float = .5, *,
              anchor_mask: Masks = None):
    """Raw outputs of one image (largest stride first) -> ``(boxes, scores, classes)``.

    boxes ``(N, 4)`` float32 ``y1, x1, y2, x2`` in the pixels of the image of size ``image_shape``
    ``(h, w)`` (not clipped to it, as in keras-yolo3); scores ``(N,)``; classes ``(N,)`` int32;
    grouped by class, each class NMS-filtered (``iou_threshold``) to at most ``max_boxes``.
    The input size is the first output's grid times 32.
    """
    anchors = np.asarray(anchors, np.float32).reshape(-1, 2)
    masks = keras_yolo3_masks(len(yolo_outputs)) if anchor_mask is None else anchor_mask
    input_shape = tf.shape(yolo_outputs[0])[1:3] * 32
    boxes, scores = [], []
    for feats, mask in zip(yolo_outputs, masks):
        b, s = yolo_boxes_and_scores(tf.cast(feats, tf.float32), anchors[list(mask)], num_classes,
                                     input_shape, image_shape)
        boxes.append(b)
        scores.append(s)
    boxes = tf.concat(boxes, axis=0)
    scores = tf.concat(scores, axis=0)
    keep = scores >= score_threshold
    out_boxes, out_scores, out_classes = [], [], []
    for c in range(num_classes):
        class_boxes = tf.boolean_mask(boxes, keep[:, c])
        class_scores = tf.boolean_mask(scores[:, c], keep[:, c])
        chosen = tf.image.non_max_suppression(class_boxes, class_scores, max_boxes,
                                              iou_threshold=iou_threshold)
        class_scores = tf.gather(class_scores, chosen)
        out_boxes.append(tf.gather(class_boxes, chosen))
        out_scores.append(class_scores)
        out_classes.append(tf.fill(tf.shape(class_scores), c))
    return (tf.concat(out_boxes, 0), tf.concat(out_scores, 0),
            tf.cast(tf.concat(out_classes, 0), tf.int32))


def yolo_loss(args, anchors, num_classes: int, ignore_thresh: float = .5, print_loss: bool = False,
              *, anchor_mask: Masks = None) -> tf.Tensor:
    """keras-yolo3's loss signature: ``args = [*yolo_outputs, *y_true]``; the number of output
    layers is ``len(anchors) // 3`` and the masks keras-yolo3's unless ``anchor_mask`` is given.
    Returns the batch-mean loss (a scalar). See :func:`yolo3.modeling.loss.yolo_loss`."""
    anchors = np.asarray(anchors, np.float32).reshape(-1, 2)
    masks = keras_yolo3_masks(len(anchors) // 3) if anchor_mask is None else anchor_mask
    options = LossOptions(ignore_iou=ignore_thresh)
    return _yolo3_loss(args, anchors, num_classes, options, print_loss, anchor_mask=masks)


def preprocess_true_boxes(true_boxes, input_shape, anchors, num_classes: int, *,
                          anchor_mask: Masks = None) -> List[np.ndarray]:
    """keras-yolo3's signature: ``true_boxes (m, T, 5)`` ``x1, y1, x2, y2, class`` input pixels ->
    ``y_true`` per scale, with keras-yolo3's masks (``len(anchors) // 3`` scales) unless
    ``anchor_mask`` is given. See :func:`yolo3.ops.targets.preprocess_true_boxes`."""
    anchors = np.asarray(anchors, np.float32).reshape(-1, 2)
    masks = keras_yolo3_masks(len(anchors) // 3) if anchor_mask is None else anchor_mask
    return _encode(true_boxes, input_shape, anchors, num_classes, anchor_mask=masks)
