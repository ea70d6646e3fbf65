"""The YOLOv3 loss (keras-yolo3 formulation), the YoloLoss layer and the training model.

Per scale, with ``m = y_true[..., 4:5]`` (objectness) and raw predictions ``t`` of
``(batch, gh, gw, A, 5 + C)``:

- xy: ``m * (2 - w * h) * BCE_logits(y_xy * grid - cell, t_xy)``
- wh: ``m * (2 - w * h) * 0.5 * (log(y_wh / anchor * input_wh) - t_wh) ** 2`` (the log is taken
  only where ``m``; elsewhere its argument is replaced by 1, so no ``log(0)`` reaches sums or gradients)
- confidence: ``m * BCE(m, t_o) + (1 - m) * BCE(m, t_o) * ignore``
- class: ``m * BCE(y_class, t_class)``

summed over everything and divided by the batch size. ``ignore`` is 1 where the predicted box's best
IoU with ALL ground-truth boxes of its image (from every scale's ``y_true``, as Darknet does; keras-yolo3
used only the same scale's) is below ``ignore_thresh``. Computed in float32 whatever the outputs' dtype.
"""
from __future__ import annotations

from typing import Dict, List, Optional, Sequence

import keras
import numpy as np
import tensorflow as tf

from yolo3.anchors import default_masks, strides_for, validate_masks
from yolo3.boxes import box_iou, swap_last_pair
from yolo3.decode import yolo_head

Masks = Optional[Sequence[Sequence[int]]]


def _masks(anchors: np.ndarray, anchor_mask: Masks) -> List[List[int]]:
    return validate_masks(default_masks(len(anchors)) if anchor_mask is None else anchor_mask,
                          len(anchors))


def gather_true_boxes(y_true: Sequence[tf.Tensor]) -> tf.Tensor:
    """All ground-truth boxes of each image, from every scale: ``(batch, max_true, 4)`` cxcywh.

    ``max_true`` is the largest box count in the batch (at least 1); images with fewer boxes are
    padded with zero boxes, whose IoU with anything is 0. No loop over the batch (ragged compaction).
    """
    flat = [tf.reshape(tf.cast(y, tf.float32)[..., :5], [tf.shape(y)[0], -1, 5]) for y in y_true]
    flat = tf.concat(flat, axis=1)  # (batch, cells, 5)
    present = flat[..., 4] > 0
    counts = tf.reduce_sum(tf.cast(present, tf.int64), axis=1)
    ragged = tf.RaggedTensor.from_row_lengths(tf.boolean_mask(flat[..., :4], present), counts)
    boxes = ragged.to_tensor(default_value=0.0)  # (batch, max_count, 4)
    pad = tf.zeros_like(flat[:, :1, :4])  # guarantees max_true >= 1
    return tf.concat([boxes, pad], axis=1)


def loss_terms(args: Sequence, anchors, num_classes: int, ignore_thresh: float = .5, *,
               anchor_mask: Masks = None) -> Dict[str, tf.Tensor]:
    """The batch-mean loss terms: ``xy``, ``wh``, ``confidence``, ``class`` (scalars summed over the
    scales) and ``ignored`` (predictions whose objectness loss the ignore mask dropped).

    args: ``[*outputs, *y_true]``; outputs raw ``(batch, gh, gw, A * (5 + C))`` largest stride first,
    y_true ``(batch, gh, gw, A, 5 + C)`` from :mod:`yolo3.targets`; anchors ``(N, 2)`` pixels.
    The input size is the first output's grid times 32.
    """
    anchors = np.asarray(anchors, dtype=np.float32).reshape(-1, 2)
    masks = _masks(anchors, anchor_mask)
    num_layers = len(masks)
    if len(args) != 2 * num_layers:
        raise ValueError(f"yolo_loss expects {num_layers} outputs and {num_layers} y_true tensors "
                         f"for anchor masks {masks}, got {len(args)} tensors")
    outputs = [tf.cast(t, tf.float32) for t in args[:num_layers]]
    y_true = [tf.cast(t, tf.float32) for t in args[num_layers:]]
    input_hw = tf.shape(outputs[0])[1:3] * 32
    input_wh = tf.cast(swap_last_pair(input_hw), tf.float32)
    batch = tf.cast(tf.shape(outputs[0])[0], tf.float32)
    true_boxes = gather_true_boxes(y_true)[:, tf.newaxis, tf.newaxis, tf.newaxis]  # (b,1,1,1,T,4)
    bce = tf.nn.sigmoid_cross_entropy_with_logits
    terms = {k: tf.constant(0.0, tf.float32) for k in ("xy", "wh", "confidence", "class", "ignored")}
    for feats, y, mask in zip(outputs, y_true, masks):
        layer_anchors = anchors[mask]
        grid, raw_pred, pred_xy, pred_wh = yolo_head(feats, layer_anchors, num_classes, input_hw,
                                                     calc_loss=True)
        grid_wh = tf.cast(swap_last_pair(tf.shape(feats)[1:3]), tf.float32)
        object_mask = y[..., 4:5]
        has_object = object_mask > 0
        raw_true_xy = y[..., 0:2] * grid_wh - grid
        ratio = y[..., 2:4] / layer_anchors * input_wh
        safe_ratio = tf.where(has_object & (ratio > 0), ratio, tf.ones_like(ratio))
        raw_true_wh = tf.math.log(safe_ratio)
        box_loss_scale = 2.0 - y[..., 2:3] * y[..., 3:4]

        pred_box = tf.concat([pred_xy, pred_wh], axis=-1)
        best_iou = tf.reduce_max(box_iou(pred_box, true_boxes), axis=-1, keepdims=True)
        ignore_mask = tf.stop_gradient(tf.cast(best_iou < ignore_thresh, tf.float32))

        xy_loss = object_mask * box_loss_scale * bce(raw_true_xy, raw_pred[..., 0:2])
        wh_loss = object_mask * box_loss_scale * 0.5 * tf.square(raw_true_wh - raw_pred[..., 2:4])
        conf_bce = bce(object_mask, raw_pred[..., 4:5])
        confidence_loss = object_mask * conf_bce + (1.0 - object_mask) * conf_bce * ignore_mask
        class_loss = object_mask * bce(y[..., 5:], raw_pred[..., 5:])
        terms["xy"] += tf.reduce_sum(xy_loss) / batch
        terms["wh"] += tf.reduce_sum(wh_loss) / batch
        terms["confidence"] += tf.reduce_sum(confidence_loss) / batch
        terms["class"] += tf.reduce_sum(class_loss) / batch
        terms["ignored"] += tf.reduce_sum((1.0 - object_mask) * (1.0 - ignore_mask))
    return terms


def yolo_loss(args: Sequence, anchors, num_classes: int, ignore_thresh: float = .5,
              print_loss: bool = False, *, anchor_mask: Masks = None) -> tf.Tensor:
    """Scalar batch-mean loss: the sum of :func:`loss_terms` (``xy + wh + confidence + class``).

    keras-yolo3's argument order (``print_loss`` prints the total and the terms with ``tf.print``);
    ``anchor_mask`` defaults to :func:`yolo3.anchors.default_masks` (keras-yolo3's own masks are
    the default of :func:`yolo3.keras_yolo3.yolo_loss`, i.e. ``yolo3.model.yolo_loss``).
    """
    terms = loss_terms(args, anchors, num_classes, ignore_thresh, anchor_mask=anchor_mask)
    total = terms["xy"] + terms["wh"] + terms["confidence"] + terms["class"]
    if print_loss:
        tf.print("loss:", total, terms["xy"], terms["wh"], terms["confidence"], terms["class"],
                 terms["ignored"])
    return total


@keras.saving.register_keras_serializable(package="yolo3")
class YoloLoss(keras.layers.Layer):
    """``[*outputs, *y_true]`` -> batch-mean loss of shape ``(1,)`` (float32).

    Shape ``(1,)`` rather than ``()``: through :func:`identity_loss`, a ``()`` output gets gradients
    N times too large under a MirroredStrategy with N replicas.
    Not XLA-compilable (the per-image true-box count is data-dependent), so ``supports_jit`` is False:
    Keras's ``jit_compile="auto"`` then trains without XLA on GPUs instead of failing.
    """

    def __init__(self, anchors, num_classes: int, ignore_thresh: float = .5,
                 anchor_mask: Masks = None, **kwargs):
        kwargs.setdefault("dtype", "float32")  # the loss stays float32 under mixed precision
        super().__init__(**kwargs)
        self.anchors = np.asarray(anchors, dtype=np.float32).reshape(-1, 2)
        self.num_classes = int(num_classes)
        self.ignore_thresh = float(ignore_thresh)
        self.anchor_mask = _masks(self.anchors, anchor_mask)
        self.supports_jit = False

    def call(self, inputs):
        loss = yolo_loss(list(inputs), self.anchors, self.num_classes, self.ignore_thresh,
                         anchor_mask=self.anchor_mask)
        return tf.reshape(loss, [1])

    def compute_output_shape(self, input_shape):
        return (1,)

    def get_config(self) -> dict:
        config = super().get_config()
        config.update(anchors=self.anchors.tolist(), num_classes=self.num_classes,
                      ignore_thresh=self.ignore_thresh, anchor_mask=[list(m) for m in self.anchor_mask])
        return config


@keras.saving.register_keras_serializable(package="yolo3")
def identity_loss(y_true, y_pred):
    """Loss function for the training model: its output already is the loss (``y_true`` unused)."""
    return y_pred


def yolo_training_model(body: keras.Model, anchors, num_classes: int, ignore_thresh: float = .5,
                        anchor_mask: Masks = None) -> keras.Model:
    """Wrap ``body`` into a model ``[image, *y_true] -> loss (1,)`` (compile with ``identity_loss``).

    The body is called as a nested model, so training this model trains ``body``'s layers.
    Inputs: ``image`` with the body's input shape, then ``y_true_s32``, ``y_true_s16``, ``y_true_s8``
    ``(gh, gw, A, 5 + C)`` (grid static when the body's input size is static, else None).
    """
    anchors = np.asarray(anchors, dtype=np.float32).reshape(-1, 2)
    masks = _masks(anchors, anchor_mask)
    num_outputs = len(body.outputs)
    if len(masks) != num_outputs:
        raise ValueError(f"the body has {num_outputs} outputs but the anchor masks {masks} "
                         f"describe {len(masks)} scales")
    strides = strides_for(num_outputs)
    height, width = body.input_shape[1:3]
    image = keras.Input(shape=body.input_shape[1:], name="image")
    y_true = []
    for output, mask, stride in zip(body.outputs, masks, strides):
        channels = output.shape[-1]
        if channels is not None and channels != len(mask) * (5 + num_classes):
            raise ValueError(f"body output of stride {stride} has {channels} channels, expected "
                             f"{len(mask)} anchors x (5 + {num_classes} classes) = "
                             f"{len(mask) * (5 + num_classes)}")
        gh = None if height is None else height // stride
        gw = None if width is None else width // stride
        y_true.append(keras.Input(shape=(gh, gw, len(mask), 5 + num_classes), name=f"y_true_s{stride}"))
    outputs = body(image)
    if not isinstance(outputs, (list, tuple)):
        outputs = [outputs]
    loss = YoloLoss(anchors, num_classes, ignore_thresh, masks, name="yolo_loss")([*outputs, *y_true])
    return keras.Model([image, *y_true], loss, name=f"{body.name}_training")
