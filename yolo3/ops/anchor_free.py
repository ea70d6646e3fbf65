"""The anchor-free head in TensorFlow: decoding its raw maps, and its training targets and loss.

Raw maps (:mod:`yolo3.config.anchor_free_head`): per cell of stride ``s``, ``4 x reg_max`` distance
logits (left, top, right, bottom) then ``C`` class logits. A side's distance is the expectation of
the softmax of its ``reg_max`` logits over ``0 .. reg_max - 1``, in strides; the box is the cell's
centre ``p`` minus (left, top) and plus (right, bottom) times ``s``: ``x1, y1, x2, y2`` input
pixels. A class's score is the sigmoid of its logit.

Training (YOLOv8's loss with PP-YOLOE's task-aligned assignment):

- **assignment** (:func:`task_aligned_assign`): a cell is a candidate for a true box when its
  centre lies inside the box; its alignment with the box is ``score^alpha * IoU^beta`` (the
  predicted score of the box's class and the CIoU of its predicted box with the true one, clamped
  at 0); each box takes its ``topk`` best-aligned candidates, and a cell taken by several boxes
  keeps the one it overlaps most. A positive's class target is its alignment normalised so that
  each box's best positive gets that box's best IoU: a soft target that ranks by placement.
- **loss** (:func:`loss_terms`): ``box = sum w (1 - CIoU)``, ``dfl = sum w DFL``, ``class = sum
  BCE(target, logit)`` over every cell and class, divided by the batch size, where ``w`` is a
  positive's class target; DFL is the cross-entropy of each side's logits with the two bins around
  its true distance, weighted by nearness (the distribution focal loss of GFL). The terms are
  multiplied by ``box_gain`` (box and DFL) and ``class_gain`` on top of YOLOv8's balance (7.5, 1.5
  and 1.0 for the classes, measured). YOLOv8 divides by the batch's sum of class targets instead of
  its size: a factor common to the batch's terms, but not a sum over images, so N replicas would
  not add up to one device; as a sum over images (the anchor head's loss is one too) the replica
  wrapper's share-weighted sum is exactly the whole batch's loss.

All in float32; the true boxes are the pipeline's padded ``(batch, max_boxes, 5)`` ``x1, y1, x2,
y2, class`` in input pixels (zero rows: padding), so every shape is static.
"""
from __future__ import annotations

from typing import Dict, Sequence, Tuple

import tensorflow as tf

from yolo3.config.anchor_free_head import AnchorFreeHead
from yolo3.ops.box_ops import corners_to_cxcywh, iou_variant

# PP-YOLOE's task-aligned assignment: 13 candidates per box, alignment score^1 * IoU^6
TOPK, ALPHA, BETA = 13, 1.0, 6.0
# YOLOv8's balance of the box, DFL and class terms (class measured at 1.0 against its 0.5: README)
BOX_WEIGHT, DFL_WEIGHT, CLASS_WEIGHT = 7.5, 1.5, 1.0

__all__ = ["TOPK", "ALPHA", "BETA", "flatten_outputs", "cell_centres", "expected_distances",
           "distances_to_corners", "decode_outputs", "task_aligned_assign", "distance_targets",
           "dfl", "loss_terms"]


def flatten_outputs(outputs: Sequence[tf.Tensor], head: AnchorFreeHead, num_classes: int
                    ) -> Tuple[tf.Tensor, tf.Tensor]:
    """Raw maps ``(batch, h / s, w / s, 4 * reg_max + C)`` per stride -> distance logits ``(batch,
    N, 4, reg_max)`` and class logits ``(batch, N, C)``, float32, cells in :func:`cell_centres`
    order."""
    channels = head.channels(num_classes)
    flat = tf.concat([tf.reshape(tf.cast(o, tf.float32), [tf.shape(o)[0], -1, channels])
                      for o in outputs], axis=1)
    distances = tf.reshape(flat[..., :head.box_channels], [tf.shape(flat)[0], -1, 4, head.reg_max])
    return distances, flat[..., head.box_channels:]


def expected_distances(logits: tf.Tensor) -> tf.Tensor:
    """``(..., 4, reg_max)`` distance logits -> ``(..., 4)`` expected distances in strides."""
    bins = tf.range(tf.shape(logits)[-1], dtype=logits.dtype)
    return tf.reduce_sum(tf.nn.softmax(logits, axis=-1) * bins, axis=-1)


def distances_to_corners(distances: tf.Tensor, points: tf.Tensor, strides: tf.Tensor
                         ) -> tf.Tensor:
    """``(..., N, 4)`` left, top, right, bottom in strides at cells ``points`` ``(N, 2)`` pixels of
    ``strides`` ``(N, 1)`` -> ``(..., N, 4)`` ``x1, y1, x2, y2`` pixels."""
    pixels = distances * strides
    return tf.concat([points - pixels[..., 0:2], points + pixels[..., 2:4]], axis=-1)


def cell_centres(outputs: Sequence[tf.Tensor], strides: Sequence[int]
                 ) -> Tuple[tf.Tensor, tf.Tensor]:
    """The cells of ``outputs`` (one map per stride, largest first) in the order
    :func:`flatten_outputs` gives them (row-major per output): centres ``(N, 2)`` ``(x, y)`` input
    pixels and strides ``(N, 1)``, float32 (any map size: multi-scale training)."""
    centres, cell_strides = [], []
    for output, stride in zip(outputs, strides):
        shape = tf.shape(output)
        y, x = tf.meshgrid(tf.range(shape[1]), tf.range(shape[2]), indexing="ij")
        xy = tf.cast(tf.reshape(tf.stack([x, y], axis=-1), [-1, 2]), tf.float32)
        centres.append((xy + 0.5) * float(stride))
        cell_strides.append(tf.fill([tf.shape(xy)[0], 1], float(stride)))
    return tf.concat(centres, axis=0), tf.concat(cell_strides, axis=0)


def decode_outputs(outputs: Sequence[tf.Tensor], head: AnchorFreeHead, num_classes: int
                   ) -> Tuple[tf.Tensor, tf.Tensor]:
    """Raw maps of a batch -> boxes ``(batch, N, 4)`` ``x1, y1, x2, y2`` input pixels and class
    scores ``(batch, N, C)`` in [0, 1]."""
    distances, classes = flatten_outputs(outputs, head, num_classes)
    points, strides = cell_centres(outputs, head.strides)
    return distances_to_corners(expected_distances(distances), points, strides), tf.sigmoid(classes)


def _ciou(a: tf.Tensor, b: tf.Tensor) -> tf.Tensor:
    """CIoU of ``x1, y1, x2, y2`` boxes (broadcast), ``(...)``."""
    return iou_variant(corners_to_cxcywh(a), corners_to_cxcywh(b), "ciou")[..., 0]


def task_aligned_assign(scores: tf.Tensor, boxes: tf.Tensor, points: tf.Tensor,
                        true_boxes: tf.Tensor, num_classes: int, topk: int = TOPK,
                        alpha: float = ALPHA, beta: float = BETA
                        ) -> Tuple[tf.Tensor, tf.Tensor, tf.Tensor]:
    """Task-aligned assignment (see the module docstring).

    scores ``(B, N, C)`` predicted class scores, boxes ``(B, N, 4)`` predicted corners, points
    ``(N, 2)`` cell centres (pixels), true_boxes ``(B, M, 5)`` padded ``x1, y1, x2, y2, class``.
    Returns the target boxes ``(B, N, 4)`` (a positive's true box; meaningless elsewhere), the
    class targets ``(B, N, C)`` (zero off the positives) and the positives ``(B, N)`` bool. No
    gradient flows through it.
    """
    scores, boxes = tf.stop_gradient(scores), tf.stop_gradient(boxes)
    true_boxes = tf.cast(true_boxes, tf.float32)
    corners, classes = true_boxes[..., :4], tf.cast(true_boxes[..., 4], tf.int32)
    present = (corners[..., 2] > corners[..., 0]) & (corners[..., 3] > corners[..., 1])  # (B, M)
    centres = points[tf.newaxis, tf.newaxis]  # (1, 1, N, 2)
    margins = tf.concat([centres - corners[:, :, tf.newaxis, :2],
                         corners[:, :, tf.newaxis, 2:] - centres], axis=-1)
    candidate = (tf.reduce_min(margins, axis=-1) > 1e-9) & present[..., tf.newaxis]  # (B, M, N)
    overlaps = tf.where(candidate, tf.maximum(_ciou(corners[:, :, tf.newaxis],
                                                    boxes[:, tf.newaxis]), 0.0), 0.0)
    class_scores = tf.gather(tf.transpose(scores, [0, 2, 1]),
                             tf.clip_by_value(classes, 0, num_classes - 1), batch_dims=1)
    alignment = tf.where(candidate, tf.pow(class_scores, alpha) * tf.pow(overlaps, beta), 0.0)
    num_cells = tf.shape(alignment)[-1]
    _, best = tf.math.top_k(alignment, k=tf.minimum(topk, num_cells))  # (B, M, k)
    chosen = tf.reduce_max(tf.one_hot(best, num_cells, dtype=tf.float32), axis=-2) > 0
    positive = chosen & candidate  # (B, M, N)
    # a cell taken by several boxes keeps the one it overlaps most
    most = tf.argmax(tf.where(positive, overlaps, -1.0), axis=1, output_type=tf.int32)  # (B, N)
    keep = tf.transpose(tf.one_hot(most, tf.shape(alignment)[1], dtype=tf.float32), [0, 2, 1]) > 0
    positive = positive & keep
    foreground = tf.reduce_any(positive, axis=1)  # (B, N)
    owner = tf.argmax(tf.cast(positive, tf.int32), axis=1, output_type=tf.int32)
    target_boxes = tf.gather(corners, owner, batch_dims=1)
    target_classes = tf.gather(classes, owner, batch_dims=1)
    mask = tf.cast(positive, tf.float32)
    alignment *= mask
    best_alignment = tf.reduce_max(alignment, axis=-1, keepdims=True)  # (B, M, 1)
    best_overlap = tf.reduce_max(overlaps * mask, axis=-1, keepdims=True)
    quality = tf.reduce_max(alignment * best_overlap / (best_alignment + 1e-9), axis=1)  # (B, N)
    target_scores = (tf.one_hot(target_classes, num_classes, dtype=tf.float32)
                     * (quality * tf.cast(foreground, tf.float32))[..., tf.newaxis])
    return (tf.stop_gradient(target_boxes), tf.stop_gradient(target_scores),
            tf.stop_gradient(foreground))


def distance_targets(target_boxes: tf.Tensor, points: tf.Tensor, strides: tf.Tensor,
                     reg_max: int) -> tf.Tensor:
    """True boxes ``(..., N, 4)`` corners seen from each cell -> left, top, right, bottom in strides,
    clipped to ``[0, reg_max - 1.01]`` (so both bins around each lie in range)."""
    sides = tf.concat([points - target_boxes[..., 0:2], target_boxes[..., 2:4] - points], axis=-1)
    return tf.clip_by_value(sides / strides, 0.0, reg_max - 1.01)


def dfl(logits: tf.Tensor, targets: tf.Tensor) -> tf.Tensor:
    """Distribution focal loss: ``(..., 4, reg_max)`` logits and ``(..., 4)`` distances -> ``(...)``,
    the mean over the four sides of ``-(l + 1 - t) log p_l - (t - l) log p_(l+1)``, ``l =
    floor(t)``."""
    reg_max = tf.shape(logits)[-1]
    log_p = tf.nn.log_softmax(logits, axis=-1)
    low = tf.floor(targets)
    low_i = tf.cast(low, tf.int32)
    near_low = low + 1.0 - targets
    log_low = tf.reduce_sum(tf.one_hot(low_i, reg_max) * log_p, axis=-1)
    log_high = tf.reduce_sum(tf.one_hot(low_i + 1, reg_max) * log_p, axis=-1)
    return tf.reduce_mean(-(near_low * log_low + (1.0 - near_low) * log_high), axis=-1)


def loss_terms(outputs: Sequence[tf.Tensor], true_boxes: tf.Tensor, head: AnchorFreeHead,
               num_classes: int, box_gain: float = 1.0, class_gain: float = 1.0
               ) -> Dict[str, tf.Tensor]:
    """The batch's loss terms ``box``, ``dfl`` and ``class`` (scalars, gains included) and
    ``positives`` (the count). outputs: raw maps, largest stride first; true_boxes ``(B, M, 5)``."""
    distance_logits, class_logits = flatten_outputs(outputs, head, num_classes)
    points, strides = cell_centres(outputs, head.strides)
    boxes = distances_to_corners(expected_distances(distance_logits), points, strides)
    target_boxes, target_scores, foreground = task_aligned_assign(
        tf.sigmoid(class_logits), boxes, points, true_boxes, num_classes)
    weight = tf.reduce_sum(target_scores, axis=-1)  # (B, N): zero off the positives
    scale = 1.0 / tf.cast(tf.shape(class_logits)[0], tf.float32)
    box = tf.reduce_sum(weight * (1.0 - _ciou(boxes, target_boxes)))
    sides = distance_targets(target_boxes, points, strides, head.reg_max)
    distribution = tf.reduce_sum(weight * dfl(distance_logits, sides))
    classes = tf.reduce_sum(tf.nn.sigmoid_cross_entropy_with_logits(target_scores, class_logits))
    return {"box": box_gain * BOX_WEIGHT * box * scale,
            "dfl": box_gain * DFL_WEIGHT * distribution * scale,
            "class": class_gain * CLASS_WEIGHT * classes * scale,
            "positives": tf.reduce_sum(tf.cast(foreground, tf.float32))}

