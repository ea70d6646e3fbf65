"""Decoding raw YOLO outputs into boxes, batched, corners in x-first order (what the detector and
the exported models run). keras-yolo3's one-image, y-first versions under its own names
(``yolo_eval``, ``yolo_correct_boxes``, ``yolo_boxes_and_scores``) are in
:mod:`yolo3.compat.keras_yolo3`.

Raw output of one scale: ``(batch, gh, gw, A * (5 + C))`` logits ``tx, ty, tw, th, to, classes...``
per anchor. Decoded box centres are ``(sigmoid(t_xy) + cell) / grid`` and sizes
``exp(t_wh) * anchor / input_wh``, both relative to the network input. An anchor-free head's maps
(``head``, :mod:`yolo3.config.heads`) are decoded by
:func:`yolo3.ops.anchor_free.decode_outputs`; both then go through the same letterbox correction and
NMS. Everything here is ``keras.ops`` (any backend, inside ``tf.function`` or ``jax.jit``) but
the NMS on TensorFlow (its own kernel; :mod:`yolo3.ops.nms` elsewhere).
"""
from __future__ import annotations

from typing import List, Optional, Sequence, Tuple

import keras
import numpy as np
from keras import ops

from yolo3.config.heads import Head, head_of
from yolo3.ops import anchor_free
from yolo3.ops.box_ops import corners_to_cxcywh, swap_last_pair
from yolo3.ops.letterbox import geometry_ops
from yolo3.ops.nms import batched_nms


def yolo_head(feats, anchors, num_classes: int, input_shape, calc_loss: bool = False):
    """Decode one output scale (``keras.ops``: any backend).

    feats: ``(batch, gh, gw, A * (5 + C))``; anchors: ``(A, 2)`` pixels ``(w, h)`` of this scale;
    input_shape: ``(h, w)`` of the network input (int tensor or pair).
    Returns ``box_xy, box_wh`` ``(batch, gh, gw, A, 2)`` relative to the input, ``box_confidence``
    ``(..., A, 1)`` and ``box_class_probs`` ``(..., A, C)``; with ``calc_loss=True`` returns
    ``grid`` ``(gh, gw, 1, 2)`` as ``(x, y)``, ``feats`` reshaped to ``(batch, gh, gw, A, 5 + C)``,
    ``box_xy`` and ``box_wh``.
    """
    feats = ops.convert_to_tensor(feats)
    anchors = ops.reshape(ops.cast(anchors, feats.dtype), [1, 1, 1, -1, 2])
    num_anchors = anchors.shape[3]
    _, gh, gw = ops.shape(feats)[:3]  # ints, or scalar tensors where the graph's size is open
    gy, gx = ops.meshgrid(ops.arange(gh), ops.arange(gw), indexing="ij")
    grid = ops.cast(ops.stack([gx, gy], axis=-1)[:, :, None, :], feats.dtype)  # (gh, gw, 1, 2)
    feats = ops.reshape(feats, [-1, gh, gw, num_anchors, num_classes + 5])
    grid_wh = ops.cast(ops.stack([gw, gh]), feats.dtype)
    input_wh = ops.cast(swap_last_pair(input_shape), feats.dtype)
    box_xy = (ops.sigmoid(feats[..., :2]) + grid) / grid_wh
    box_wh = ops.exp(feats[..., 2:4]) * anchors / input_wh
    if calc_loss:
        return grid, feats, box_xy, box_wh
    box_confidence = ops.sigmoid(feats[..., 4:5])
    box_class_probs = ops.sigmoid(feats[..., 5:])
    return box_xy, box_wh, box_confidence, box_class_probs


def correct_boxes(box_xy, box_wh, input_shape, image_shape):
    """Map input-relative ``(cx, cy)``/``(w, h)`` to ``(x1, y1, x2, y2)`` pixels of the original image.

    box_xy, box_wh: ``(batch, ..., 2)``; input_shape: ``(h, w)``; image_shape: ``(h, w)`` shared by the
    batch or ``(batch, 2)`` per image. Undoes the letterbox of :mod:`yolo3.ops.letterbox`.
    """
    box_xy = ops.convert_to_tensor(box_xy)
    dtype = box_xy.dtype
    _, offset_hw, scale_hw = geometry_ops(image_shape, input_shape)
    offset_wh = ops.cast(swap_last_pair(offset_hw), dtype)
    scale_wh = ops.cast(swap_last_pair(scale_hw), dtype)
    input_wh = ops.cast(swap_last_pair(ops.cast(input_shape, "float32")), dtype)
    if len(offset_wh.shape) == 2:  # per image: (batch, 2) -> (batch, 1, ..., 1, 2)
        keep = (-1,) + (1,) * (len(box_xy.shape) - 2) + (2,)
        offset_wh = ops.reshape(offset_wh, keep)
        scale_wh = ops.reshape(scale_wh, keep)
    centre = (box_xy * input_wh - offset_wh) / scale_wh
    half = box_wh * input_wh / scale_wh / 2.0
    return ops.concatenate([centre - half, centre + half], axis=-1)


def boxes_and_scores(feats, anchors, num_classes: int, input_shape, image_shape):
    """Boxes ``(batch, N, 4)`` xyxy image pixels and scores ``(batch, N, C)`` of one output scale."""
    box_xy, box_wh, box_confidence, box_class_probs = yolo_head(feats, anchors, num_classes, input_shape)
    boxes = correct_boxes(box_xy, box_wh, input_shape, image_shape)
    batch = ops.shape(feats)[0]
    boxes = ops.reshape(boxes, [batch, -1, 4])
    scores = ops.reshape(box_confidence * box_class_probs, [batch, -1, num_classes])
    return boxes, scores


def network_input_hw(outputs: Sequence, input_hw=None):
    """``(h, w)`` of the network input: ``input_hw`` when given, else the first (stride-32)
    output's grid x 32."""
    if input_hw is not None:
        return input_hw
    grid_h, grid_w = ops.shape(ops.convert_to_tensor(outputs[0]))[1:3]
    return ops.stack([grid_h * 32, grid_w * 32]) if not isinstance(grid_h, int) else (
        grid_h * 32, grid_w * 32)


def anchor_boxes_and_scores(outputs: Sequence, anchors, masks: Sequence[Sequence[int]],
                            num_classes: int, input_hw, image_hw) -> Tuple:
    """An anchor head's candidates: boxes ``(batch, N, 4)`` ``x1, y1, x2, y2`` original-image
    pixels (unclipped) and scores ``(batch, N, C)`` (objectness x class) of every output, largest
    stride first; ``anchors`` ``(N, 2)`` pixels, ``masks`` the anchor indices of each output."""
    anchors = np.asarray(anchors, dtype=np.float32).reshape(-1, 2)
    boxes_all: List = []
    scores_all: List = []
    for feats, mask in zip(outputs, masks):
        feats = ops.cast(feats, "float32")
        b, s = boxes_and_scores(feats, anchors[list(mask)], num_classes, input_hw, image_hw)
        boxes_all.append(b)
        scores_all.append(s)
    return ops.concatenate(boxes_all, axis=1), ops.concatenate(scores_all, axis=1)


def anchor_free_boxes_and_scores(outputs: Sequence, head, num_classes: int, input_hw,
                                 image_hw) -> Tuple:
    """An anchor-free head's candidates (``head``: its strides and ``reg_max``): boxes as
    :func:`anchor_boxes_and_scores` gives them and class scores ``(batch, N, C)``."""
    corners, scores = anchor_free.decode_outputs(outputs, head, num_classes)
    input_wh = ops.cast(swap_last_pair(ops.cast(input_hw, "float32")), "float32")
    boxes = corners_to_cxcywh(corners) / ops.tile(input_wh, [2])
    return correct_boxes(boxes[..., :2], boxes[..., 2:], input_hw, image_hw), scores


def raw_boxes_and_scores(yolo_outputs: Sequence, anchors, num_classes: int, image_shape,
                         anchor_mask: Optional[Sequence[Sequence[int]]] = None, input_shape=None,
                         head: Optional[Head] = None):
    """Every scale's boxes ``(batch, N, 4)`` ``x1, y1, x2, y2`` pixels of the original images
    (unclipped) and scores ``(batch, N, C)`` (objectness x class, or an anchor-free head's class
    scores), before any threshold. Arguments as :func:`decode_detections`. yolo3's own code asks
    the head (:meth:`yolo3.heads.base.Head.raw_boxes_and_scores`); this is the function of
    yolo3 0.6 and earlier, which takes a head's facts."""
    input_shape = network_input_hw(yolo_outputs, input_shape)
    head = head_of(anchors, anchor_mask, head)  # 0.6's keywords
    decode = _DECODERS_OF_0_6.get(head.kind)
    if decode is None:
        raise ValueError(f"yolo3 0.6's decoding reads its two head kinds (anchor, anchor_free); "
                         f"a {head.kind!r} head decodes itself: head.raw_boxes_and_scores")
    return decode(yolo_outputs, head, num_classes, input_shape, image_shape)


def _anchor_head_boxes_and_scores(outputs: Sequence, head, num_classes: int, input_hw,
                                  image_hw) -> Tuple:
    """:func:`anchor_boxes_and_scores` of an anchor head's facts."""
    return anchor_boxes_and_scores(outputs, head.anchor_array(), head.mask_lists(), num_classes,
                                   input_hw, image_hw)


# yolo3 0.6's decode functions take a head's facts, which have no behaviour (yolo3.heads is the
# floor above): its two kinds by name. yolo3's own code asks the head itself.
_DECODERS_OF_0_6 = {"anchor": _anchor_head_boxes_and_scores,
                    "anchor_free": anchor_free_boxes_and_scores}


def decode_detections(yolo_outputs: Sequence, anchors, num_classes: int, image_shape,
                      max_boxes: int = 20, score_threshold: float = .6, iou_threshold: float = .5,
                      anchor_mask: Optional[Sequence[Sequence[int]]] = None, input_shape=None,
                      head: Optional[Head] = None) -> Tuple:
    """Raw outputs of a batch -> detections after score threshold and per-class NMS.

    yolo_outputs: list of ``(batch, gh, gw, A * (5 + C))`` tensors, largest stride first;
    anchors: ``(N, 2)`` pixels; image_shape: ``(h, w)`` of the original images, shared or
    ``(batch, 2)``; input_shape defaults to the first output's grid times 32. ``head``: the
    head of the outputs (:mod:`yolo3.config.heads`; then ``anchors`` and ``anchor_mask`` are
    unused), None: the anchor head of ``anchors`` and ``anchor_mask``. Masks default to
    :func:`yolo3.config.masks.default_masks`. Returns :func:`select_detections`'. yolo3's own
    code asks the head (:meth:`yolo3.heads.base.Head.decode`).
    """
    boxes, scores = raw_boxes_and_scores(yolo_outputs, anchors, num_classes, image_shape,
                                         anchor_mask, input_shape, head)
    return select_detections(boxes, scores, image_shape, max_boxes, score_threshold,
                             iou_threshold)


def select_detections(boxes, scores, image_shape, max_boxes: int = 20,
                      score_threshold: float = .6, iou_threshold: float = .5) -> Tuple:
    """Candidates -> detections: score threshold and per-class NMS, boxes clipped to the image.

    boxes ``(batch, N, 4)`` ``x1, y1, x2, y2`` original-image pixels, scores ``(batch, N, C)``;
    image_shape ``(h, w)`` shared or ``(batch, 2)``. Returns ``boxes`` ``(batch, max_boxes, 4)``,
    ``scores`` ``(batch, max_boxes)``, ``classes`` ``(batch, max_boxes)`` int32 and
    ``num_valid`` ``(batch,)`` int32; rows past ``num_valid`` are zero padding. The NMS is
    TensorFlow's ``combined_non_max_suppression`` on the TensorFlow backend (every candidate),
    elsewhere :func:`yolo3.ops.nms.batched_nms` (the same rule over the best
    :data:`~yolo3.ops.nms.DEFAULT_CANDIDATES` (box, class) pairs of each image).
    """
    if keras.backend.backend() == "tensorflow":
        import tensorflow as tf
        nms_boxes, nms_scores, nms_classes, valid = tf.image.combined_non_max_suppression(
            boxes[:, :, tf.newaxis, :], scores, max_output_size_per_class=max_boxes,
            max_total_size=max_boxes, iou_threshold=iou_threshold,
            score_threshold=score_threshold, clip_boxes=False)
    else:
        nms_boxes, nms_scores, nms_classes, valid = batched_nms(
            boxes, scores, max_boxes, iou_threshold, score_threshold)
    image_hw = ops.cast(image_shape, "float32")
    if len(image_hw.shape) == 1:
        image_hw = ops.broadcast_to(image_hw, [ops.shape(boxes)[0], 2])
    limit = ops.expand_dims(ops.tile(swap_last_pair(image_hw), [1, 2]), 1)
    nms_boxes = ops.minimum(ops.maximum(nms_boxes, 0.0), limit)
    return nms_boxes, nms_scores, ops.cast(nms_classes, "int32"), ops.cast(valid, "int32")
