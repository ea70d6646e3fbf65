"""Per-class non-maximum suppression of a batch in ``keras.ops`` (any Keras backend, fixed shapes:
it compiles under ``jax.jit``), the twin of TensorFlow's ``combined_non_max_suppression`` that the
TensorFlow detector runs.

The same greedy rule: candidates in descending score, a box is dropped when it overlaps a kept box
of its class by IoU > ``iou_threshold``; the first ``max_boxes`` kept are the detections. The one
difference: only the ``candidates`` best-scoring (box, class) pairs of each image enter the
suppression (fixed shapes need a bound; TensorFlow takes every pair above ``score_threshold``), so
the two agree whenever at most ``candidates`` pairs pass the threshold, as they do at a detector's
thresholds (0.3 by default; a mAP evaluation at 0.001 may pass more). On PyTorch, which runs
eagerly, only the pairs above the threshold enter (fewer when fewer pass: the same result), and
the rule runs on the shortest prefix of them that decides the first ``max_boxes`` kept.
"""
from __future__ import annotations

import keras
from keras import ops

__all__ = ["DEFAULT_CANDIDATES", "batched_nms", "pairwise_iou_xyxy", "greedy_keep"]

DEFAULT_CANDIDATES = 1000


def pairwise_iou_xyxy(boxes):
    """IoU of every pair of ``(B, K, 4)`` ``(x1, y1, x2, y2)`` boxes: ``(B, K, K)``, 0 where a
    union is empty."""
    x1, y1, x2, y2 = (boxes[..., i] for i in range(4))
    area = ops.maximum(x2 - x1, 0.0) * ops.maximum(y2 - y1, 0.0)
    iw = ops.maximum(ops.minimum(x2[:, :, None], x2[:, None, :])
                     - ops.maximum(x1[:, :, None], x1[:, None, :]), 0.0)
    ih = ops.maximum(ops.minimum(y2[:, :, None], y2[:, None, :])
                     - ops.maximum(y1[:, :, None], y1[:, None, :]), 0.0)
    inter = iw * ih
    union = area[:, :, None] + area[:, None, :] - inter
    positive = union > 0
    return ops.where(positive, inter / ops.where(positive, union, ops.ones_like(union)), 0.0)


def greedy_keep(candidates, suppresses):
    """The candidates the greedy rule keeps: ``candidates`` ``(B, k)`` 1/0 in descending score,
    ``suppresses`` ``(B, k, k)`` 1 where candidate ``j`` (row) would drop the later ``i``.

    Computed as the fixed point of "kept = a candidate that no kept earlier one suppresses",
    every candidate at once per round (a batched matrix product), rounds until nothing changes:
    after round ``t`` every candidate whose chain of suppressors is at most ``t`` long is
    final, so the fixed point is the greedy result exactly, in as many rounds as the longest
    chain (a handful at a detector's thresholds) rather than one per candidate: one compiled
    loop on JAX and TensorFlow, a few eager steps on PyTorch."""
    def round_(keep, _):
        hit = ops.squeeze(ops.matmul(ops.expand_dims(keep, 1), suppresses), 1)  # (B, k)
        new = candidates * ops.cast(hit <= 0, candidates.dtype)
        return new, ops.any(ops.not_equal(new, keep))

    keep, _ = ops.while_loop(lambda keep, changed: changed, round_,
                             (candidates, ops.convert_to_tensor(True)))
    return keep


def batched_nms(boxes, scores, max_boxes: int, iou_threshold: float, score_threshold: float,
                candidates: int = DEFAULT_CANDIDATES):
    """Per-class greedy NMS of each image of a batch.

    boxes: ``(B, N, 4)`` ``(x1, y1, x2, y2)`` (one box per position, shared by its classes);
    scores: ``(B, N, C)``. A (box, class) pair is a candidate when its score is above
    ``score_threshold`` and among the image's ``candidates`` best.
    Returns ``boxes`` ``(B, max_boxes, 4)``, ``scores`` ``(B, max_boxes)``, ``classes``
    ``(B, max_boxes)`` int32 and ``valid`` ``(B,)`` int32, sorted by score; rows past ``valid``
    are zeros (as TensorFlow's ``combined_non_max_suppression`` pads).
    """
    boxes = ops.convert_to_tensor(boxes)
    scores = ops.cast(ops.convert_to_tensor(scores), boxes.dtype)
    n, c = scores.shape[1], scores.shape[2]
    if n is None or c is None:
        raise ValueError(f"batched_nms needs a static box count and class count, got {scores.shape}")
    batch = ops.shape(scores)[0]
    k = max(1, min(int(candidates), n * c))
    flat = ops.reshape(scores, (batch, n * c))
    if keras.backend.backend() == "torch":
        # eager: shapes may follow the data, so only the pairs above the threshold enter (the
        # others are never kept: the same detections, from a far smaller pairwise matrix)
        above = int(ops.convert_to_numpy(ops.max(ops.sum(ops.cast(
            flat > score_threshold, "int32"), axis=1))))
        k = max(1, min(k, above))
    top_scores, top_index = ops.top_k(flat, k)
    classes = top_index % c
    picked = ops.take_along_axis(boxes, ops.expand_dims(top_index // c, -1), axis=1)  # (B, k, 4)
    candidate = ops.cast(top_scores > score_threshold, boxes.dtype)
    if keras.backend.backend() == "torch":
        keep = _keep_by_prefix_eager(picked, classes, candidate, iou_threshold, max_boxes)
    else:
        order = ops.arange(k)
        later = ops.expand_dims(order, 1) < ops.expand_dims(order, 0)  # (k, k): j after i
        same_class = ops.expand_dims(classes, 2) == ops.expand_dims(classes, 1)
        suppresses = ops.cast(ops.logical_and(ops.logical_and(
            pairwise_iou_xyxy(picked) > iou_threshold, same_class), later), boxes.dtype)
        keep = greedy_keep(candidate, suppresses)

    out = min(max_boxes, k)
    ranked = ops.where(keep > 0, top_scores, -1.0)  # kept first, each in score order
    _, slots = ops.top_k(ranked, out)
    valid = ops.minimum(ops.cast(ops.sum(keep, axis=1), "int32"), out)
    filled = ops.cast(ops.expand_dims(ops.arange(out), 0) < ops.expand_dims(valid, 1),
                      boxes.dtype)
    out_boxes = ops.take_along_axis(picked, ops.expand_dims(slots, -1), axis=1) * filled[..., None]
    out_scores = ops.take_along_axis(top_scores, slots, axis=1) * filled
    out_classes = ops.cast(ops.take_along_axis(classes, slots, axis=1), "int32") * ops.cast(
        filled, "int32")
    if out < max_boxes:  # fewer (box, class) pairs than max_boxes: pad as TensorFlow does
        pad = max_boxes - out
        out_boxes = ops.pad(out_boxes, [[0, 0], [0, pad], [0, 0]])
        out_scores = ops.pad(out_scores, [[0, 0], [0, pad]])
        out_classes = ops.pad(out_classes, [[0, 0], [0, pad]])
    return out_boxes, out_scores, out_classes, valid


def _keep_by_prefix_eager(picked, classes, candidate, iou_threshold: float, max_boxes: int):
    """PyTorch, eager: :func:`greedy_keep` of the ``(B, k)`` candidates (in descending score) on
    the shortest prefix that decides the output. The greedy rule decides a candidate from the
    ones before it only, so on the first ``p`` candidates it gives their final fate; once every
    image has kept ``max_boxes`` there (or has no candidate after it), the rest cannot reach the
    output. Prefixes from ``4 * max_boxes`` (at least 256) up, doubling to ``k``: ``p``²
    pairs instead of ``k``² where detections are plenty, at most a third more work where
    they are not. Returns ``(B, k)`` 1/0 (0 after the prefix)."""
    import torch
    k = candidate.shape[1]
    p = min(k, max(4 * max_boxes, 256))
    while True:
        keep = _greedy_keep_eager(candidate[:, :p], _suppression_eager(
            picked[:, :p], classes[:, :p], iou_threshold))
        decided = (keep.sum(1) >= max_boxes) | ~(candidate[:, p:] > 0).any(1)
        if p == k or bool(decided.all()):
            return torch.nn.functional.pad(keep, (0, k - p))
        p = min(k, 2 * p)


def _suppression_eager(picked, classes, iou_threshold: float):
    """PyTorch, eager: :func:`batched_nms`'s ``(B, k, k)`` float matrix (1 where ``j`` scores
    higher than ``i``, is of its class and overlaps it by IoU > ``iou_threshold``) in fewer
    passes over the ``k x k`` pairs: the same arithmetic in the same order, in place; an empty
    union's 0/0 is not above any threshold, as :func:`pairwise_iou_xyxy`'s 0 is not."""
    import torch
    x1, y1, x2, y2 = picked.unbind(-1)  # (B, k) each
    area = torch.clamp(x2 - x1, min=0.0) * torch.clamp(y2 - y1, min=0.0)
    iw = torch.minimum(x2[:, :, None], x2[:, None, :]).sub_(
        torch.maximum(x1[:, :, None], x1[:, None, :])).clamp_(min=0.0)
    ih = torch.minimum(y2[:, :, None], y2[:, None, :]).sub_(
        torch.maximum(y1[:, :, None], y1[:, None, :])).clamp_(min=0.0)
    inter = iw.mul_(ih)
    union = (area[:, :, None] + area[:, None, :]).sub_(inter)
    suppresses = inter.div_(union) > iou_threshold
    suppresses &= classes[:, :, None] == classes[:, None, :]
    return torch.triu(suppresses, diagonal=1).to(picked.dtype)


def _greedy_keep_eager(candidates, suppresses):
    """:func:`greedy_keep`'s rounds as plain PyTorch calls (eager: Keras's op dispatch cost as
    much as the rounds' products)."""
    import torch
    keep = candidates
    while True:
        hit = torch.bmm(keep[:, None, :], suppresses)[:, 0]
        new = candidates * (hit <= 0).to(candidates.dtype)
        if torch.equal(new, keep):
            return keep
        keep = new
