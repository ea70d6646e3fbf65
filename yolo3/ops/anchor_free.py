"""The anchor-free head in ``keras.ops`` (the same on every Keras backend): decoding its raw maps,
and its training targets and loss.

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

import numpy as np
from keras import ops

from yolo3.config.anchor_free_head import AnchorFreeHead
from yolo3.config.loss_options import LossOptions
from yolo3.ops.box_ops import corners_to_cxcywh, iou_variant
from yolo3.ops.focal import focal_bce

# PP-YOLOE's task-aligned assignment: 13 candidates per box, alignment score^1 * IoU^6
TOPK, ALPHA, BETA = 13, 1.0, 6.0
# YOLOv8's balance of the box, DFL and class terms (class 1.0 against its 0.5: docs/benchmarks.md,
# "Anchor-free variants")
BOX_WEIGHT, DFL_WEIGHT, CLASS_WEIGHT = 7.5, 1.5, 1.0

__all__ = ["TOPK", "ALPHA", "BETA", "flatten_outputs", "cell_centres", "expected_distances",
           "distances_to_corners", "decode_outputs", "task_aligned_assign", "distance_targets",
           "dfl", "loss_terms"]


def flatten_outputs(outputs: Sequence, head: AnchorFreeHead, num_classes: int) -> Tuple:
    """Raw maps ``(batch, h / s, w / s, 4 * reg_max + C)`` per stride -> distance logits ``(batch,
    N, 4, reg_max)`` and class logits ``(batch, N, C)``, float32, cells in :func:`cell_centres`
    order."""
    channels = head.channels(num_classes)
    flat = ops.concatenate([ops.reshape(ops.cast(o, "float32"), [ops.shape(o)[0], -1, channels])
                            for o in outputs], axis=1)
    distances = ops.reshape(flat[..., :head.box_channels],
                            [ops.shape(flat)[0], -1, 4, head.reg_max])
    return distances, flat[..., head.box_channels:]


def expected_distances(logits):
    """``(..., 4, reg_max)`` distance logits -> ``(..., 4)`` expected distances in strides."""
    bins = ops.arange(logits.shape[-1], dtype=logits.dtype)
    return ops.sum(ops.softmax(logits, axis=-1) * bins, axis=-1)


def distances_to_corners(distances, points, strides):
    """``(..., N, 4)`` left, top, right, bottom in strides at cells ``points`` ``(N, 2)`` pixels of
    ``strides`` ``(N, 1)`` -> ``(..., N, 4)`` ``x1, y1, x2, y2`` pixels."""
    pixels = distances * strides
    return ops.concatenate([points - pixels[..., 0:2], points + pixels[..., 2:4]], axis=-1)


def cell_centres(outputs: Sequence, strides: Sequence[int]) -> Tuple:
    """The cells of ``outputs`` (one map per stride, largest first) in the order
    :func:`flatten_outputs` gives them (row-major per output): centres ``(N, 2)`` ``(x, y)`` input
    pixels and strides ``(N, 1)``, float32 (any map size: multi-scale training)."""
    centres, cell_strides = [], []
    for output, stride in zip(outputs, strides):
        _, h, w = ops.shape(output)[:3]
        y, x = ops.meshgrid(ops.arange(h), ops.arange(w), indexing="ij")
        xy = ops.cast(ops.reshape(ops.stack([x, y], axis=-1), [-1, 2]), "float32")
        centres.append((xy + 0.5) * float(stride))
        cell_strides.append(ops.full_like(xy[:, :1], float(stride)))
    return ops.concatenate(centres, axis=0), ops.concatenate(cell_strides, axis=0)


def decode_outputs(outputs: Sequence, head: AnchorFreeHead, num_classes: int) -> Tuple:
    """Raw maps of a batch -> boxes ``(batch, N, 4)`` ``x1, y1, x2, y2`` input pixels and class
    scores ``(batch, N, C)`` in [0, 1]."""
    distances, classes = flatten_outputs(outputs, head, num_classes)
    points, strides = cell_centres(outputs, head.strides)
    return (distances_to_corners(expected_distances(distances), points, strides),
            ops.sigmoid(classes))


def _ciou(a, b):
    """CIoU of ``x1, y1, x2, y2`` boxes (broadcast), ``(...)``."""
    return iou_variant(corners_to_cxcywh(a), corners_to_cxcywh(b), "ciou")[..., 0]


def _gather_rows(values, index):
    """``values`` ``(B, K, ...)`` at ``index`` ``(B, M)`` along axis 1 -> ``(B, M, ...)``
    (``tf.gather(..., batch_dims=1)``)."""
    extra = values.shape[2:]
    index = ops.reshape(index, [*ops.shape(index), *([1] * len(extra))])
    index = ops.broadcast_to(index, [*ops.shape(index)[:2], *ops.shape(values)[2:]])
    return ops.take_along_axis(values, index, axis=1)


def task_aligned_assign(scores, boxes, points, true_boxes, num_classes: int, topk: int = TOPK,
                        alpha: float = ALPHA, beta: float = BETA) -> Tuple:
    """Task-aligned assignment (see the module docstring).

    scores ``(B, N, C)`` predicted class scores, boxes ``(B, N, 4)`` predicted corners, points
    ``(N, 2)`` cell centres (pixels), true_boxes ``(B, M, 5)`` padded ``x1, y1, x2, y2, class``.
    Returns the target boxes ``(B, N, 4)`` (a positive's true box; meaningless elsewhere), the
    class targets ``(B, N, C)`` (zero off the positives) and the positives ``(B, N)`` bool. No
    gradient flows through it. ``topk`` is capped at the cell count where that is known; an open
    map size (multi-scale under TensorFlow) has at least 21 cells at the smallest input.
    """
    scores, boxes = ops.stop_gradient(scores), ops.stop_gradient(boxes)
    true_boxes = ops.cast(true_boxes, "float32")
    corners, classes = true_boxes[..., :4], ops.cast(true_boxes[..., 4], "int32")
    present = ops.logical_and(corners[..., 2] > corners[..., 0],
                              corners[..., 3] > corners[..., 1])  # (B, M)
    centres = points[None, None]  # (1, 1, N, 2)
    margins = ops.concatenate([centres - corners[:, :, None, :2],
                               corners[:, :, None, 2:] - centres], axis=-1)
    candidate = ops.logical_and(ops.min(margins, axis=-1) > 1e-9, present[..., None])  # (B, M, N)
    overlaps = ops.where(candidate, ops.maximum(_ciou(corners[:, :, None],
                                                      boxes[:, None]), 0.0), 0.0)
    class_scores = _gather_rows(ops.transpose(scores, [0, 2, 1]),
                                ops.clip(classes, 0, num_classes - 1))  # (B, M, N)
    alignment = ops.where(candidate, ops.power(class_scores, alpha) * ops.power(overlaps, beta),
                          0.0)
    num_cells = ops.shape(alignment)[-1]
    k = min(topk, num_cells) if isinstance(num_cells, int) else topk
    _, best = ops.top_k(alignment, k=k)  # (B, M, k)
    chosen = ops.max(ops.one_hot(best, num_cells, dtype="float32"), axis=-2) > 0
    positive = ops.logical_and(chosen, candidate)  # (B, M, N)
    # a cell taken by several boxes keeps the one it overlaps most
    most = ops.argmax(ops.where(positive, overlaps, -1.0), axis=1)  # (B, N)
    keep = ops.transpose(ops.one_hot(most, ops.shape(alignment)[1], dtype="float32"),
                         [0, 2, 1]) > 0
    positive = ops.logical_and(positive, keep)
    foreground = ops.any(positive, axis=1)  # (B, N)
    owner = ops.argmax(ops.cast(positive, "int32"), axis=1)
    target_boxes = _gather_rows(corners, owner)
    target_classes = _gather_rows(classes, owner)
    mask = ops.cast(positive, "float32")
    alignment = alignment * mask
    best_alignment = ops.max(alignment, axis=-1, keepdims=True)  # (B, M, 1)
    best_overlap = ops.max(overlaps * mask, axis=-1, keepdims=True)
    quality = ops.max(alignment * best_overlap / (best_alignment + 1e-9), axis=1)  # (B, N)
    target_scores = (ops.one_hot(target_classes, num_classes, dtype="float32")
                     * (quality * ops.cast(foreground, "float32"))[..., None])
    return (ops.stop_gradient(target_boxes), ops.stop_gradient(target_scores),
            ops.stop_gradient(foreground))


def distance_targets(target_boxes, points, strides, reg_max: int):
    """True boxes ``(..., N, 4)`` corners seen from each cell -> left, top, right, bottom in strides,
    clipped to ``[0, reg_max - 1.01]`` (so both bins around each lie in range)."""
    sides = ops.concatenate([points - target_boxes[..., 0:2], target_boxes[..., 2:4] - points],
                            axis=-1)
    return ops.clip(sides / strides, 0.0, reg_max - 1.01)


def dfl(logits, targets):
    """Distribution focal loss: ``(..., 4, reg_max)`` logits and ``(..., 4)`` distances -> ``(...)``,
    the mean over the four sides of ``-(l + 1 - t) log p_l - (t - l) log p_(l+1)``, ``l =
    floor(t)``."""
    reg_max = logits.shape[-1]
    log_p = ops.log_softmax(logits, axis=-1)
    low = ops.floor(targets)
    low_i = ops.cast(low, "int32")
    near_low = low + 1.0 - targets
    log_low = ops.sum(ops.one_hot(low_i, reg_max, dtype=log_p.dtype) * log_p, axis=-1)
    log_high = ops.sum(ops.one_hot(low_i + 1, reg_max, dtype=log_p.dtype) * log_p, axis=-1)
    return ops.mean(-(near_low * log_low + (1.0 - near_low) * log_high), axis=-1)


def loss_terms(outputs: Sequence, true_boxes, head: AnchorFreeHead, num_classes: int,
               options: LossOptions = LossOptions()) -> Dict[str, object]:
    """The batch's loss terms ``box``, ``dfl`` and ``class`` (scalars, gains included) and
    ``positives`` (the count). outputs: raw maps, largest stride first; true_boxes ``(B, M, 5)``.
    options (:class:`~yolo3.config.loss_options.LossOptions`; this head reads four):
    ``box_gain`` (box and DFL) and ``class_gain``; ``class_weights`` ``(C,)``, a positive cell's
    box, distribution and class terms weighted by its assigned box's class weight (others 1);
    ``focal_gamma``, each class cross-entropy scaled by ``|target - p| ** gamma`` (quality focal
    loss; 0: plain)."""
    options = options.for_classes(num_classes)
    class_weights = options.class_weights
    distance_logits, class_logits = flatten_outputs(outputs, head, num_classes)
    points, strides = cell_centres(outputs, head.strides)
    boxes = distances_to_corners(expected_distances(distance_logits), points, strides)
    target_boxes, target_scores, foreground = task_aligned_assign(
        ops.sigmoid(class_logits), boxes, points, true_boxes, num_classes)
    weight = ops.sum(target_scores, axis=-1)  # (B, N): zero off the positives
    per_cell = ops.ones_like(weight)
    if class_weights is not None:
        w = ops.convert_to_tensor(np.asarray(class_weights, np.float32).reshape(-1))
        # a positive's class: its target row's non-zero entry (the row is one-hot times quality)
        owner = ops.cast(target_scores > 0, "float32")
        known = ops.logical_and(foreground, ops.sum(owner, axis=-1) > 0)
        per_cell = ops.where(known, ops.sum(owner * w, axis=-1), 1.0)
        weight = weight * per_cell
    scale = 1.0 / ops.cast(ops.shape(class_logits)[0], "float32")
    box = ops.sum(weight * (1.0 - _ciou(boxes, target_boxes)))
    sides = distance_targets(target_boxes, points, strides, head.reg_max)
    distribution = ops.sum(weight * dfl(distance_logits, sides))
    classes = ops.sum(per_cell[..., None] * focal_bce(target_scores, class_logits,
                                                        options.focal_gamma))
    return {"box": options.box_gain * BOX_WEIGHT * box * scale,
            "dfl": options.box_gain * DFL_WEIGHT * distribution * scale,
            "class": options.class_gain * CLASS_WEIGHT * classes * scale,
            "positives": ops.sum(ops.cast(foreground, "float32"))}
