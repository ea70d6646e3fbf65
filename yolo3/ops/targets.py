"""Ground-truth boxes -> ``y_true`` per output scale (NumPy and TF versions, identical results).

Input boxes are ``(x1, y1, x2, y2, class)`` in network-input pixels; rows with ``w <= 0`` or ``h <= 0``
(including all-zero padding rows) are ignored. Each kept box is assigned to its best anchor (IoU of
shapes compared centred, among ALL anchors; the first anchor wins a tie) and, with ``assign_iou``
below 1, also to every other anchor whose shape IoU with the box exceeds ``assign_iou`` (Darknet's
``iou_thresh``, 0.213 in its YOLOv4 cfgs: more positives per object, the decoding unchanged). Each
assigned anchor's scale gets the box in the grid cell containing its centre,
``cell = floor(c / stride)`` clipped to the grid (the same as ``floor(c / input * grid)``). The
written vector is ``cx, cy, w, h`` relative to the input size, objectness 1 and the one-hot class.
When several boxes of one image land in the same cell and anchor, a best-anchor assignment wins over
an extra one, and among equals the LATER box (higher row index) wins. Boxes none of whose assigned
anchors is in a mask are dropped.

Both versions compute in float64 and round to float32 once, so they agree bit for bit.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, List, Optional, Sequence, Tuple, Union

import numpy as np

from yolo3.config.masks import default_masks, validate_masks
from yolo3.config.specs import check_input_size, strides_for
from yolo3.config.train_config import check_value
from yolo3.ops.boxes import wh_iou

if TYPE_CHECKING:  # TensorFlow is imported by the tf.data twins only, when they run
    import tensorflow as tf

Masks = Optional[Sequence[Sequence[int]]]


def wh_iou_tf(wh1, wh2):
    """TensorFlow twin of :func:`yolo3.ops.boxes.wh_iou` for the tf.data pipeline (same
    arithmetic, in the inputs' dtype): ``(N, 2)`` x ``(M, 2)`` -> ``(N, M)``, 0 where a union is
    empty or not a number (a NaN box matches nothing)."""
    import tensorflow as tf
    wh1 = tf.expand_dims(wh1, -2)
    inter = tf.reduce_prod(tf.minimum(wh1, wh2), axis=-1)
    union = tf.reduce_prod(wh1, axis=-1) + tf.reduce_prod(wh2, axis=-1) - inter
    positive = union > 0
    return tf.where(positive, inter / tf.where(positive, union, tf.ones_like(union)),
                    tf.zeros_like(union))


def _masks_and_strides(anchors, anchor_mask: Masks) -> Tuple[np.ndarray, List[List[int]], List[int]]:
    anchors = np.asarray(anchors, dtype=np.float64).reshape(-1, 2)
    masks = default_masks(len(anchors)) if anchor_mask is None else anchor_mask
    masks = validate_masks(masks, len(anchors))
    return anchors, masks, strides_for(len(masks))


def _check_assign_iou(assign_iou: float) -> float:
    return float(check_value("assign_iou", float(assign_iou)))


def _first_positions(mask: Sequence[int]) -> List[int]:
    """Positions in ``mask`` of each anchor's first occurrence (a repeated anchor is written once)."""
    return [k for k, a in enumerate(mask) if a not in mask[:k]]


def preprocess_true_boxes(true_boxes: np.ndarray, input_shape: Sequence[int], anchors: np.ndarray,
                          num_classes: int, anchor_mask: Masks = None,
                          assign_iou: float = 1.0) -> List[np.ndarray]:
    """Encode a batch of boxes into one ``y_true`` array per scale (largest stride first).

    true_boxes: ``(batch, max_boxes, 5)`` ``x1, y1, x2, y2, class`` input pixels (zero rows = padding);
    input_shape: ``(h, w)`` multiples of 32; anchors: ``(N, 2)`` pixels ``(w, h)``; assign_iou: extra
    anchors above this shape IoU are positives too (1: only the best one, keras-yolo3's rule).
    Returns float32 ``(batch, h / s, w / s, len(mask), 5 + num_classes)`` per scale (stride ``s``).
    Raises ValueError for a kept box whose class is not in ``[0, num_classes)``.
    """
    true_boxes = np.asarray(true_boxes, dtype=np.float64)
    if true_boxes.ndim != 3 or true_boxes.shape[-1] != 5:
        raise ValueError(f"true_boxes must be (batch, max_boxes, 5), got shape {true_boxes.shape}")
    h, w = check_input_size(input_shape)
    anchors, masks, strides = _masks_and_strides(anchors, anchor_mask)
    batch, max_boxes = true_boxes.shape[:2]
    flat = true_boxes.reshape(-1, 5)
    centre = (flat[:, 0:2] + flat[:, 2:4]) / 2.0
    size = flat[:, 2:4] - flat[:, 0:2]
    valid = (size[:, 0] > 0) & (size[:, 1] > 0)
    classes = np.floor(np.nan_to_num(flat[:, 4], nan=-1.0)).astype(np.int64)
    bad = valid & ((classes < 0) | (classes >= num_classes))
    if bad.any():
        raise ValueError(f"box class {flat[bad][0, 4]:g} is outside [0, {num_classes})")
    assign_iou = _check_assign_iou(assign_iou)
    iou = wh_iou(size, anchors)
    best = np.argmax(iou, axis=-1)  # first anchor wins a tie
    is_best = np.arange(len(anchors))[None, :] == best[:, None]
    assigned = is_best | (iou > assign_iou)
    image = np.repeat(np.arange(batch), max_boxes)
    vector = np.zeros((len(flat), 5 + num_classes))
    vector[:, 0] = centre[:, 0] / w
    vector[:, 1] = centre[:, 1] / h
    vector[:, 2] = size[:, 0] / w
    vector[:, 3] = size[:, 1] / h
    vector[:, 4] = 1.0
    vector[valid, 5 + classes[valid]] = 1.0
    y_true = []
    for mask, stride in zip(masks, strides):
        gh, gw = h // stride, w // stride
        out = np.zeros((batch, gh, gw, len(mask), 5 + num_classes), dtype=np.float32)
        rows, slots = [], []
        for k in _first_positions(mask):
            hit = np.flatnonzero(valid & assigned[:, mask[k]])
            rows.append(hit)
            slots.append(np.full(len(hit), k))
        rows, k = np.concatenate(rows), np.concatenate(slots)
        i = np.clip(np.floor(centre[rows, 0] / stride), 0, gw - 1).astype(np.int64)
        j = np.clip(np.floor(centre[rows, 1] / stride), 0, gh - 1).astype(np.int64)
        key = np.ravel_multi_index((image[rows], j, i, k), out.shape[:4])
        # per slot the highest priority: a best-anchor assignment, then the later box
        priority = is_best[rows, np.asarray(mask)[k]] * len(flat) + rows
        order = np.lexsort((priority, key))
        last = order[np.diff(key[order], append=-1) != 0]  # each key's last entry (keys are >= 0)
        out[image[rows[last]], j[last], i[last], k[last]] = vector[rows[last]]
        y_true.append(out)
    return y_true


def _tf_input_hw(input_hw) -> tf.Tensor:
    import tensorflow as tf
    if isinstance(input_hw, (tuple, list, np.ndarray)) and all(
            isinstance(v, (int, np.integer)) for v in input_hw):
        return tf.constant(check_input_size(input_hw), tf.int32)
    hw = tf.cast(tf.convert_to_tensor(input_hw), tf.int32)
    tf.debugging.assert_equal(hw % 32, 0, message="input shape must be multiples of 32")
    return hw


def encode_targets(boxes: Union[tf.Tensor, np.ndarray], input_shape, anchors: np.ndarray,
                   num_classes: int, anchor_mask: Masks = None,
                   assign_iou: float = 1.0) -> Tuple[tf.Tensor, ...]:
    """TF twin of :func:`preprocess_true_boxes` for ``tf.data`` (works in graph mode).

    boxes: ``(max_boxes, 5)`` for one image or ``(batch, max_boxes, 5)``; input_shape: ``(h, w)`` as
    Python ints or an int32 tensor ``(2,)`` (grid sizes may then be dynamic).
    Returns float32 ``y_true`` per scale, ``(gh, gw, A, 5 + C)`` or ``(batch, gh, gw, A, 5 + C)``.
    A kept box with a class outside ``[0, num_classes)`` fails a ``tf.debugging`` assertion.
    """
    import tensorflow as tf
    anchors_np, masks, strides = _masks_and_strides(anchors, anchor_mask)
    assign_iou = _check_assign_iou(assign_iou)
    boxes = tf.convert_to_tensor(boxes)
    single = boxes.shape.rank == 2
    if boxes.shape.rank not in (2, 3):
        raise ValueError(f"boxes must be (max_boxes, 5) or (batch, max_boxes, 5), got {boxes.shape}")
    if single:
        boxes = boxes[tf.newaxis]
    boxes = tf.cast(boxes, tf.float64)
    hw = _tf_input_hw(input_shape)
    static_hw = tf.get_static_value(hw)
    batch = tf.shape(boxes)[0]
    max_boxes = tf.shape(boxes)[1]
    flat = tf.reshape(boxes, [-1, 5])
    centre = (flat[:, 0:2] + flat[:, 2:4]) / 2.0
    size = flat[:, 2:4] - flat[:, 0:2]
    valid = (size[:, 0] > 0) & (size[:, 1] > 0)
    classes = tf.cast(tf.floor(flat[:, 4]), tf.int32)
    in_range = (classes >= 0) & (classes < num_classes)
    check = tf.debugging.assert_equal(tf.reduce_all(in_range | ~valid), True,
                                      message=f"box class outside [0, {num_classes})")
    with tf.control_dependencies([check]):
        iou = wh_iou_tf(size, tf.constant(anchors_np))  # float64, as the NumPy version
    # Deterministic argmax: the first anchor with the maximum IoU (as np.argmax).
    n = len(anchors_np)
    is_max = tf.equal(iou, tf.reduce_max(iou, axis=-1, keepdims=True))
    best = tf.reduce_min(tf.where(is_max, tf.range(n), n), axis=-1)
    is_best = tf.equal(tf.range(n)[tf.newaxis], best[:, tf.newaxis])
    assigned = is_best | (iou > assign_iou)
    image = tf.repeat(tf.range(batch), max_boxes)
    hw_f = tf.cast(hw, tf.float64)
    rel = tf.concat([centre[:, 0:1] / hw_f[1], centre[:, 1:2] / hw_f[0],
                     size[:, 0:1] / hw_f[1], size[:, 1:2] / hw_f[0]], axis=-1)
    vector = tf.cast(tf.concat([rel, tf.ones_like(rel[:, :1]),
                                tf.one_hot(classes, num_classes, dtype=tf.float64)], -1), tf.float32)
    num_rows = tf.cast(tf.shape(flat)[0], tf.int64)
    y_true = []
    for mask, stride in zip(masks, strides):
        if static_hw is not None:
            gh, gw = int(static_hw[0]) // stride, int(static_hw[1]) // stride
        else:
            gh, gw = hw[0] // stride, hw[1] // stride
        keeps, slots, bests = [], [], []
        for slot in _first_positions(mask):
            hit = tf.where(valid & assigned[:, mask[slot]])[:, 0]
            keeps.append(hit)
            slots.append(tf.fill(tf.shape(hit), slot))
            bests.append(tf.gather(is_best[:, mask[slot]], hit))
        keep, k = tf.concat(keeps, 0), tf.concat(slots, 0)
        c = tf.gather(centre, keep)
        i = tf.clip_by_value(tf.cast(tf.floor(c[:, 0] / stride), tf.int32), 0, gw - 1)
        j = tf.clip_by_value(tf.cast(tf.floor(c[:, 1] / stride), tf.int32), 0, gh - 1)
        index = tf.stack([tf.gather(image, keep), j, i, k], axis=-1)
        key = ((tf.cast(index[:, 0], tf.int64) * tf.cast(gh, tf.int64) + tf.cast(j, tf.int64))
               * tf.cast(gw, tf.int64) + tf.cast(i, tf.int64)) * len(mask) + tf.cast(k, tf.int64)
        # per slot the highest priority: a best-anchor assignment, then the later box
        priority = tf.cast(tf.concat(bests, 0), tf.int64) * num_rows + keep
        chosen = _last_unique(key, priority)
        index, rows = tf.gather(index, chosen), tf.gather(keep, chosen)
        shape = tf.stack([batch, gh, gw, len(mask), 5 + num_classes])
        out = tf.scatter_nd(index, tf.gather(vector, rows), shape)
        if static_hw is not None:
            out = tf.ensure_shape(out, [None, gh, gw, len(mask), 5 + num_classes])
        y_true.append(out[0] if single else out)
    return tuple(y_true)


def _last_unique(key: tf.Tensor, priority: tf.Tensor) -> tf.Tensor:
    """Positions of the entries to keep: for each distinct ``key``, the one with the largest
    ``priority`` (distinct within a key).

    ``scatter_nd`` would sum duplicates (and ``tensor_scatter_nd_update`` picks any one), so the
    others are removed explicitly.
    """
    import tensorflow as tf
    unique, group = tf.unique(key)
    winner = tf.math.unsorted_segment_max(priority, group, tf.size(unique))
    return tf.where(tf.equal(priority, tf.gather(winner, group)))[:, 0]
