"""The YOLOv3 loss, the YoloLoss layer and the training model.

Per scale, with ``m = y_true[..., 4:5]`` (objectness) and raw predictions ``t`` of
``(batch, gh, gw, A, 5 + C)``, box weight ``s = 2 - w * h`` (w, h of the true box relative to the
input):

- box, ``box_loss="mse"`` (keras-yolo3's): ``m * s * BCE_logits(y_xy * grid - cell, t_xy)`` plus
  ``m * s * 0.5 * (log(y_wh / anchor * input_wh) - t_wh) ** 2`` (the log is taken only where ``m``;
  elsewhere its argument is replaced by 1, so no ``log(0)`` reaches sums or gradients);
- box, ``"giou"`` / ``"diou"`` / ``"ciou"``: ``m * s * (1 - IoU')`` of the decoded predicted box
  (``(sigmoid(t_xy) + cell) / grid``, ``exp(t_wh) * anchor``) and the true box, in input pixels, where
  ``IoU'`` is generalised IoU (``IoU - (C - U) / C``, C the enclosing box), distance IoU
  (``IoU - rho^2 / c^2``, rho the centre distance, c the enclosing diagonal) or complete IoU
  (``DIoU - alpha * v``, ``v = 4 / pi^2 (atan(w_t / h_t) - atan(w_p / h_p))^2``,
  ``alpha = v / (1 - IoU + v)`` held constant in the gradient);
- confidence: ``m * BCE(q, t_o) + (1 - m) * BCE(0, t_o) * ignore``, with the target ``q = 1``
  (``objectness="one"``, Darknet's and keras-yolo3's) or ``q = IoU`` of the decoded predicted box
  with its true box, held constant in the gradient (``"iou"``, YOLOv5's rule: the score then ranks
  detections by how well they are placed);
- class: ``m * BCE(y_class * (1 - eps) + eps / 2, t_class)`` (``eps``: label smoothing, 0 by default);

summed over everything and divided by the batch size; the box terms are multiplied by ``box_gain``
and the class term by ``class_gain`` (both 1 by default: keras-yolo3's balance). ``ignore`` is 1
where the predicted box's best IoU with ALL ground-truth boxes of its image is below
``ignore_iou`` (Darknet's ``ignore_thresh``; keras-yolo3 used only the same scale's boxes). The
ground truth is either the boxes of every scale's ``y_true`` (their count per image is
data-dependent) or, for an XLA-compilable step, the image's boxes padded to a static
``max_boxes`` (``true_boxes``). Computed in float32 whatever the outputs' dtype, in
``keras.ops``: the same on every Keras backend (the ground truth gathered from ``y_true``, whose
size is data-dependent, needs TensorFlow's ragged tensors; with ``true_boxes``, as the training
model gives them, nothing does). The options (``box_loss``, ``objectness``, the gains ...) travel
as one :class:`~yolo3.config.loss_options.LossOptions`.
"""
from __future__ import annotations

import logging
from typing import Any, Dict, List, Mapping, Optional, Sequence, Union

import keras
import numpy as np
from keras import ops

from yolo3.config.loss_options import LossOptions
from yolo3.config.masks import default_masks, validate_masks
from yolo3.config.specs import strides_for
from yolo3.ops.box_ops import box_iou, iou_variant, swap_last_pair
from yolo3.ops.decode import yolo_head
from yolo3.ops.focal import focal_bce

Masks = Optional[Sequence[Sequence[int]]]
_MAX_LOG_WH = 10.0  # exp(10) = 22026 anchor widths: caps the IoU losses' box sizes

__all__ = ["loss_terms", "yolo_loss", "YoloLoss", "identity_loss", "layer_options",
           "yolo_training_model", "gather_true_boxes", "pixel_boxes_to_cxcywh", "iou_variant"]


def _masks(anchors: np.ndarray, anchor_mask: Masks) -> List[List[int]]:
    return validate_masks(default_masks(len(anchors)) if anchor_mask is None else anchor_mask,
                          len(anchors))


def gather_true_boxes(y_true: Sequence):
    """All ground-truth boxes of each image, from every scale: ``(batch, max_true, 4)`` cxcywh.

    ``max_true`` is the largest box count in the batch (at least 1); images with fewer boxes are
    padded with zero boxes, whose IoU with anything is 0. No loop over the batch (ragged compaction:
    TensorFlow only; other backends take ``true_boxes``).
    """
    if keras.backend.backend() != "tensorflow":
        raise ValueError(f"the loss without true_boxes gathers the ground truth with TensorFlow's "
                         f"ragged tensors; on the {keras.backend.backend()} backend give "
                         "true_boxes (the padded boxes, as the training model does)")
    import tensorflow as tf  # the Keras backend is TensorFlow here
    flat = [tf.reshape(tf.cast(y, tf.float32)[..., :5], [tf.shape(y)[0], -1, 5]) for y in y_true]
    flat = tf.concat(flat, axis=1)  # (batch, cells, 5)
    present = flat[..., 4] > 0
    counts = tf.reduce_sum(tf.cast(present, tf.int64), axis=1)
    ragged = tf.RaggedTensor.from_row_lengths(tf.boolean_mask(flat[..., :4], present), counts)
    boxes = ragged.to_tensor(default_value=0.0)  # (batch, max_count, 4)
    pad = tf.zeros_like(flat[:, :1, :4])  # guarantees max_true >= 1
    return tf.concat([boxes, pad], axis=1)


def pixel_boxes_to_cxcywh(boxes, input_wh):
    """``(batch, n, 5)`` ``x1, y1, x2, y2, class`` input pixels (zero rows: padding) -> ``(batch,
    n, 4)`` ``cx, cy, w, h`` relative to the input (padding stays zero: IoU 0 with anything)."""
    boxes = ops.cast(boxes, "float32")
    xy = (boxes[..., 0:2] + boxes[..., 2:4]) / 2.0 / input_wh
    wh = (boxes[..., 2:4] - boxes[..., 0:2]) / input_wh
    return ops.concatenate([xy, ops.maximum(wh, 0.0)], axis=-1)


def _bce(labels, logits):
    """Binary cross-entropy of ``logits`` against ``labels``, elementwise (TensorFlow's
    ``sigmoid_cross_entropy_with_logits`` on that backend)."""
    return ops.binary_crossentropy(labels, logits, from_logits=True)


def loss_terms(args: Sequence, anchors, num_classes: int, options: LossOptions = LossOptions(),
               *, anchor_mask: Masks = None, true_boxes=None) -> Dict[str, object]:
    """The batch-mean loss terms: ``xy`` and ``wh`` (``box_loss="mse"``) or ``box`` (IoU losses),
    ``confidence``, ``class`` (scalars summed over the scales) and ``ignored`` (predictions whose
    objectness loss the ignore mask dropped).

    args: ``[*outputs, *y_true]``; outputs raw ``(batch, gh, gw, A * (5 + C))`` largest stride first,
    y_true ``(batch, gh, gw, A, 5 + C)`` from :mod:`yolo3.ops.targets`; anchors ``(N, 2)`` pixels.
    true_boxes: ``(batch, max_boxes, 5)`` ``x1, y1, x2, y2, class`` input pixels (zero rows padding)
    for the ignore mask; default: gathered from ``y_true``. The input size is the first output's
    grid times 32. options: the loss's settings (:class:`~yolo3.config.loss_options.LossOptions`,
    checked there): ``objectness`` a positive's confidence target (module docstring), the gains
    (included in the returned terms), ``class_weights`` ``(C,)`` (each positive's box, confidence
    and class terms weighted by its true class's weight; negatives unchanged), ``focal_gamma``
    (the class term's binary cross-entropy scaled by ``|target - p| ** gamma``, Darknet's
    ``focal_loss``; 0: plain).
    """
    if not isinstance(options, LossOptions):
        raise TypeError(f"options must be a LossOptions, got {options!r} (keras-yolo3's "
                        f"signature, ignore_thresh fourth, is yolo3.model.yolo_loss)")
    options = options.for_classes(num_classes)
    box_loss, objectness = options.box_loss, options.objectness
    box_gain, class_gain = options.box_gain, options.class_gain
    anchors = np.asarray(anchors, dtype=np.float32).reshape(-1, 2)
    masks = _masks(anchors, anchor_mask)
    num_layers = len(masks)
    if len(args) != 2 * num_layers:
        raise ValueError(f"yolo_loss expects {num_layers} outputs and {num_layers} y_true tensors "
                         f"for anchor masks {masks}, got {len(args)} tensors")
    outputs = [ops.cast(t, "float32") for t in args[:num_layers]]
    y_true = [ops.cast(t, "float32") for t in args[num_layers:]]
    _, gh, gw = ops.shape(outputs[0])[:3]
    input_hw = ops.stack([gh * 32, gw * 32])
    input_wh = ops.cast(swap_last_pair(input_hw), "float32")
    batch = ops.cast(ops.shape(outputs[0])[0], "float32")
    truth = (gather_true_boxes(y_true) if true_boxes is None
             else pixel_boxes_to_cxcywh(true_boxes, input_wh))
    truth = truth[:, None, None, None]  # (b, 1, 1, 1, T, 4)
    weights = (None if options.class_weights is None
               else ops.convert_to_tensor(np.asarray(options.class_weights, np.float32)))
    keys = ("xy", "wh") if box_loss == "mse" else ("box",)
    terms = {k: ops.zeros((), "float32") for k in (*keys, "confidence", "class", "ignored")}
    for feats, y, mask in zip(outputs, y_true, masks):
        layer_anchors = ops.convert_to_tensor(anchors[mask])
        grid, raw_pred, pred_xy, pred_wh = yolo_head(feats, layer_anchors, num_classes, input_hw,
                                                     calc_loss=True)
        object_mask = y[..., 4:5]
        # each positive weighted by its class's weight (its one-hot class row times the weights)
        positive = (object_mask if weights is None
                    else object_mask * ops.sum(y[..., 5:] * weights, axis=-1, keepdims=True))
        box_loss_scale = 2.0 - y[..., 2:3] * y[..., 3:4]
        pred_box = ops.concatenate([pred_xy, pred_wh], axis=-1)
        best_iou = ops.max(box_iou(pred_box, truth), axis=-1, keepdims=True)
        ignore_mask = ops.stop_gradient(ops.cast(best_iou < options.ignore_iou, "float32"))
        if box_loss != "mse" or objectness == "iou":
            # the decoded box with its size capped (exp of a huge logit would be inf), in pixels
            capped_wh = ops.exp(ops.minimum(raw_pred[..., 2:4], _MAX_LOG_WH)) * layer_anchors
            pred_px = ops.concatenate([pred_xy * input_wh, capped_wh], axis=-1)
            true_px = ops.concatenate([y[..., 0:2] * input_wh, y[..., 2:4] * input_wh], axis=-1)

        if box_loss == "mse":
            _, fh, fw = ops.shape(feats)[:3]
            grid_wh = ops.cast(ops.stack([fw, fh]), "float32")
            has_object = object_mask > 0
            raw_true_xy = y[..., 0:2] * grid_wh - grid
            ratio = y[..., 2:4] / layer_anchors * input_wh
            safe_ratio = ops.where(ops.logical_and(has_object, ratio > 0), ratio,
                                   ops.ones_like(ratio))
            raw_true_wh = ops.log(safe_ratio)
            xy_loss = positive * box_loss_scale * _bce(raw_true_xy, raw_pred[..., 0:2])
            wh_loss = positive * box_loss_scale * 0.5 * ops.square(raw_true_wh
                                                                      - raw_pred[..., 2:4])
            terms["xy"] += box_gain * ops.sum(xy_loss) / batch
            terms["wh"] += box_gain * ops.sum(wh_loss) / batch
        else:
            quality = iou_variant(pred_px, true_px, box_loss)
            terms["box"] += box_gain * ops.sum(
                positive * box_loss_scale * (1.0 - quality)) / batch
        conf_target = object_mask
        if objectness == "iou":
            conf_target = object_mask * ops.stop_gradient(iou_variant(pred_px, true_px, "iou"))
        conf_bce = _bce(conf_target, raw_pred[..., 4:5])
        confidence_loss = positive * conf_bce + (1.0 - object_mask) * conf_bce * ignore_mask
        class_true = (y[..., 5:] * (1.0 - options.label_smoothing)
                      + 0.5 * options.label_smoothing)
        class_loss = positive * focal_bce(class_true, raw_pred[..., 5:], options.focal_gamma)
        terms["confidence"] += ops.sum(confidence_loss) / batch
        terms["class"] += class_gain * ops.sum(class_loss) / batch
        terms["ignored"] += ops.sum((1.0 - object_mask) * (1.0 - ignore_mask))
    return terms


def layer_options(options: Union[LossOptions, Mapping[str, Any], None], kwargs: Dict[str, Any],
                  num_classes: int) -> LossOptions:
    """A loss layer's options: ``options`` (a LossOptions, or its :meth:`~LossOptions.to_config`
    dict as a saved config gives it), or the separate keywords a 0.x model file's config holds
    (taken out of ``kwargs``, the layer's base keywords); checked for ``num_classes``. TypeError
    when both are given or ``options`` is neither."""
    keywords = LossOptions.split_keywords(kwargs)
    if isinstance(options, LossOptions):
        if keywords:
            raise TypeError(f"loss options given twice: options and {sorted(keywords)}")
        return options.for_classes(num_classes)
    if options is not None and not isinstance(options, Mapping):
        raise TypeError(f"options must be a LossOptions (or its config dict), got {options!r}")
    return LossOptions.from_config({**dict(options or {}), **keywords}).for_classes(num_classes)


def yolo_loss(args: Sequence, anchors, num_classes: int, options: LossOptions = LossOptions(),
              print_loss: bool = False, *, anchor_mask: Masks = None, true_boxes=None):
    """Scalar batch-mean loss: the sum of :func:`loss_terms` (all but ``ignored``).

    ``print_loss`` prints the total and the terms as they are computed (``keras.ops.print`` where
    the backend has it); ``anchor_mask`` defaults to :func:`yolo3.config.masks.default_masks`
    (keras-yolo3's signature, ``ignore_thresh`` fourth and its own masks, is
    :func:`yolo3.compat.keras_yolo3.yolo_loss`, i.e. ``yolo3.model.yolo_loss``).
    """
    terms = loss_terms(args, anchors, num_classes, options, anchor_mask=anchor_mask,
                       true_boxes=true_boxes)
    total = sum(v for k, v in terms.items() if k != "ignored")
    if print_loss:
        _print("loss:", total, *[terms[k] for k in terms if k != "ignored"], terms["ignored"])
    return total


def _print(*values) -> None:
    """Print values as the step runs, inside a compiled graph too (keras-yolo3's
    ``print_loss``): ``tf.print`` on TensorFlow, ``jax.debug.print`` on JAX, the log elsewhere."""
    backend = keras.backend.backend()
    if backend == "tensorflow":
        import tensorflow as tf  # the Keras backend is TensorFlow here
        tf.print(*values)
    elif backend == "jax":
        import jax  # the Keras backend is JAX here
        jax.debug.print(" ".join("{}" for _ in values), *values)
    else:
        logging.getLogger(__name__).info(" ".join(str(ops.convert_to_numpy(v)) for v in values))


@keras.saving.register_keras_serializable(package="yolo3")
class YoloLoss(keras.layers.Layer):
    """``[*outputs, *y_true]`` (and, with ``true_boxes=True``, the padded boxes ``(batch,
    max_boxes, 5)`` last) -> batch-mean loss of shape ``(1,)`` (float32).

    Shape ``(1,)`` rather than ``()``: through :func:`identity_loss`, a ``()`` output gets gradients
    N times too large under a MirroredStrategy with N replicas. With the padded boxes every shape
    is static and the layer compiles with XLA (``supports_jit``); without them the per-image box
    count is data-dependent, so ``supports_jit`` is False and Keras's ``jit_compile="auto"`` trains
    without XLA instead of failing.
    """

    def __init__(self, anchors, num_classes: int,
                 options: Union[LossOptions, Mapping[str, Any], None] = None,
                 anchor_mask: Masks = None, true_boxes: bool = False, **kwargs):
        kwargs.setdefault("dtype", "float32")  # the loss stays float32 under mixed precision
        self.num_classes = int(num_classes)
        self.options = layer_options(options, kwargs, self.num_classes)
        super().__init__(**kwargs)
        self.anchors = np.asarray(anchors, dtype=np.float32).reshape(-1, 2)
        self.anchor_mask = _masks(self.anchors, anchor_mask)
        self.true_boxes = bool(true_boxes)
        self.supports_jit = self.true_boxes

    def call(self, inputs):
        inputs = list(inputs)
        boxes = inputs.pop() if self.true_boxes else None
        loss = yolo_loss(inputs, self.anchors, self.num_classes, self.options,
                         anchor_mask=self.anchor_mask, true_boxes=boxes)
        return ops.reshape(loss, [1])

    def compute_output_shape(self, input_shape):
        return (1,)

    def get_config(self) -> dict:
        config = super().get_config()
        config.update(anchors=self.anchors.tolist(), num_classes=self.num_classes,
                      options=self.options.to_config(),
                      anchor_mask=[list(m) for m in self.anchor_mask],
                      true_boxes=self.true_boxes)
        return config


@keras.saving.register_keras_serializable(package="yolo3")
def identity_loss(y_true, y_pred):
    """Loss function for the training model: its output already is the loss (``y_true`` unused)."""
    return y_pred


def yolo_training_model(body: keras.Model, anchors, num_classes: int,
                        options: LossOptions = LossOptions(), anchor_mask: Masks = None,
                        max_boxes: Optional[int] = None) -> keras.Model:
    """Wrap ``body`` into a model ``[image, *y_true(, true_boxes)] -> loss (1,)`` (compile with
    ``identity_loss``).

    The body is called as a nested model, so training this model trains ``body``'s layers.
    Inputs: ``image`` with the body's input shape, then ``y_true_s32``, ``y_true_s16``, ``y_true_s8``
    ``(gh, gw, A, 5 + C)`` (grid static when the body's input size is static, else None), and with
    ``max_boxes`` the padded boxes ``true_boxes`` ``(max_boxes, 5)`` (pixels ``x1, y1, x2, y2,
    class``, as the pipeline yields them): the static shapes of an XLA-compilable step.
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
    extra = [keras.Input(shape=(max_boxes, 5), name="true_boxes")] if max_boxes else []
    outputs = body(image)
    if not isinstance(outputs, (list, tuple)):
        outputs = [outputs]
    loss = YoloLoss(anchors, num_classes, options, masks, true_boxes=bool(max_boxes),
                    name="yolo_loss")([*outputs, *y_true, *extra])
    return keras.Model([image, *y_true, *extra], loss, name=f"{body.name}_training")
