"""YOLOv3 and tiny YOLOv3 bodies, and the keras-yolo3 public names.

Every layer has a name, so parts are reached by name, never by index:

- backbone layers start with ``backbone_``; its feature taps are ``backbone_c3`` (stride 8),
  ``backbone_c4`` (stride 16) and ``backbone_c5`` (stride 32) (tiny: ``backbone_c4``, ``backbone_c5``);
- each detection head's layers start with ``head_s32_``, ``head_s16_``, ``head_s8_``;
- the raw outputs are the 1x1 convolutions ``output_s32``, ``output_s16``, ``output_s8``.

A Darknet convolution block ``NAME`` is the layers ``NAME_pad`` (stride 2 only: Darknet pads top and
left), ``NAME_conv`` (no bias), ``NAME_bn`` (epsilon 1e-6 as in Darknet) and ``NAME_leaky`` (0.1).
Body outputs are ``(batch, h / s, w / s, A * (5 + C))`` for strides ``s`` = 32, 16, 8 (tiny: 32, 16).
"""
from __future__ import annotations

from typing import List, Optional, Sequence, Tuple

import keras
from keras import layers

from yolo3.anchors import default_masks
from yolo3.boxes import box_iou
from yolo3.decode import yolo_boxes_and_scores, yolo_correct_boxes, yolo_eval, yolo_head

__all__ = [
    "yolo_body", "tiny_yolo_body", "build_body", "yolo_head", "yolo_correct_boxes",
    "yolo_boxes_and_scores", "yolo_eval", "preprocess_true_boxes", "yolo_loss", "box_iou",
    "yolo_training_model", "BACKBONE_PREFIX", "output_layer_names",
]

BACKBONE_PREFIX = "backbone_"
BN_EPSILON = 1e-6  # Darknet's normalize_cpu epsilon
LEAKY_SLOPE = 0.1


def darknet_conv(x, filters: int, size: int, name: str, strides: int = 1, bn: bool = True):
    """Darknet ``[convolutional]``: conv (+ batch norm + leaky ReLU); stride 2 pads top/left only."""
    if strides == 2:
        x = layers.ZeroPadding2D(((1, 0), (1, 0)), name=f"{name}_pad")(x)
        padding = "valid"
    else:
        padding = "same"
    x = layers.Conv2D(filters, size, strides=strides, padding=padding, use_bias=not bn,
                      name=f"{name}_conv")(x)
    if bn:
        x = layers.BatchNormalization(epsilon=BN_EPSILON, momentum=0.99, name=f"{name}_bn")(x)
        x = layers.LeakyReLU(negative_slope=LEAKY_SLOPE, name=f"{name}_leaky")(x)
    return x


def _darknet_stage(x, filters: int, num_blocks: int, name: str):
    """Stride-2 downsampling conv followed by ``num_blocks`` residual blocks (1x1 f/2, 3x3 f, add)."""
    x = darknet_conv(x, filters, 3, f"{name}_down", strides=2)
    for j in range(1, num_blocks + 1):
        y = darknet_conv(x, filters // 2, 1, f"{name}_b{j}_conv1")
        y = darknet_conv(y, filters, 3, f"{name}_b{j}_conv2")
        x = layers.Add(name=f"{name}_b{j}_add")([x, y])
    return x


def darknet53(inputs):
    """Darknet-53 feature extractor; returns the taps ``(c3, c4, c5)`` at strides 8, 16, 32."""
    p = BACKBONE_PREFIX
    x = darknet_conv(inputs, 32, 3, f"{p}stem")
    x = _darknet_stage(x, 64, 1, f"{p}s1")
    x = _darknet_stage(x, 128, 2, f"{p}s2")
    x = _darknet_stage(x, 256, 8, f"{p}s3")
    c3 = layers.Identity(name=f"{p}c3")(x)
    x = _darknet_stage(c3, 512, 8, f"{p}s4")
    c4 = layers.Identity(name=f"{p}c4")(x)
    x = _darknet_stage(c4, 1024, 4, f"{p}s5")
    c5 = layers.Identity(name=f"{p}c5")(x)
    return c3, c4, c5


def _head(x, filters: int, out_filters: int, stride: int):
    """Five alternating 1x1/3x3 convs (the route tap), then 3x3 and the 1x1 output conv."""
    name = f"head_s{stride}"
    for i, (f, k) in enumerate([(filters, 1), (filters * 2, 3), (filters, 1), (filters * 2, 3),
                                (filters, 1)], start=1):
        x = darknet_conv(x, f, k, f"{name}_conv{i}")
    y = darknet_conv(x, filters * 2, 3, f"{name}_conv6")
    y = layers.Conv2D(out_filters, 1, padding="same", use_bias=True, name=f"output_s{stride}")(y)
    return x, y


def _upsample_and_merge(x, filters: int, skip, stride: int):
    """1x1 conv, 2x nearest upsampling, concatenation ``[upsampled, skip]`` (Darknet route order)."""
    name = f"head_s{stride}"
    x = darknet_conv(x, filters, 1, f"{name}_reduce")
    x = layers.UpSampling2D(2, interpolation="nearest", name=f"{name}_upsample")(x)
    return layers.Concatenate(name=f"{name}_concat")([x, skip])


def yolo_body(inputs, num_anchors: int, num_classes: int) -> keras.Model:
    """YOLOv3: Darknet-53 and three heads (keras-yolo3 signature).

    inputs: a Keras input ``(batch, h, w, 3)``, h and w multiples of 32 (or None);
    num_anchors: anchors per scale (3). Outputs ``[y32, y16, y8]``.
    """
    out_filters = num_anchors * (num_classes + 5)
    c3, c4, c5 = darknet53(inputs)
    x, y32 = _head(c5, 512, out_filters, 32)
    x = _upsample_and_merge(x, 256, c4, 16)
    x, y16 = _head(x, 256, out_filters, 16)
    x = _upsample_and_merge(x, 128, c3, 8)
    _, y8 = _head(x, 128, out_filters, 8)
    return keras.Model(inputs, [y32, y16, y8], name="yolov3_body")


def tiny_yolo_body(inputs, num_anchors: int, num_classes: int) -> keras.Model:
    """Tiny YOLOv3 (keras-yolo3 signature); outputs ``[y32, y16]``."""
    p = BACKBONE_PREFIX
    out_filters = num_anchors * (num_classes + 5)
    x = inputs
    for i, filters in enumerate([16, 32, 64, 128]):
        x = darknet_conv(x, filters, 3, f"{p}conv{i}")
        x = layers.MaxPooling2D(2, strides=2, padding="same", name=f"{p}pool{i}")(x)
    x = darknet_conv(x, 256, 3, f"{p}conv4")
    c4 = layers.Identity(name=f"{p}c4")(x)
    x = layers.MaxPooling2D(2, strides=2, padding="same", name=f"{p}pool4")(c4)
    x = darknet_conv(x, 512, 3, f"{p}conv5")
    # Darknet's size-2 stride-1 maxpool pads bottom/right only, as TF's "same" does.
    x = layers.MaxPooling2D(2, strides=1, padding="same", name=f"{p}pool5")(x)
    x = darknet_conv(x, 1024, 3, f"{p}conv6")
    c5 = layers.Identity(name=f"{p}c5")(x)
    x = darknet_conv(c5, 256, 1, "head_s32_conv1")
    y = darknet_conv(x, 512, 3, "head_s32_conv2")
    y32 = layers.Conv2D(out_filters, 1, padding="same", use_bias=True, name="output_s32")(y)
    x = darknet_conv(x, 128, 1, "head_s16_reduce")
    x = layers.UpSampling2D(2, interpolation="nearest", name="head_s16_upsample")(x)
    x = layers.Concatenate(name="head_s16_concat")([x, c4])
    y = darknet_conv(x, 256, 3, "head_s16_conv1")
    y16 = layers.Conv2D(out_filters, 1, padding="same", use_bias=True, name="output_s16")(y)
    return keras.Model(inputs, [y32, y16], name="tiny_yolov3_body")


def build_body(model: str, num_classes: int, num_anchors: int = 3,
               input_shape: Tuple[Optional[int], Optional[int]] = (None, None)) -> keras.Model:
    """Build ``'yolov3'`` or ``'tiny'`` for ``num_classes``; input ``(h, w)`` multiples of 32 or None."""
    for side in input_shape:
        if side is not None and (side <= 0 or side % 32):
            raise ValueError(f"input size {tuple(input_shape)} must be positive multiples of 32")
    inputs = keras.Input(shape=(*input_shape, 3), name="image")
    if model == "yolov3":
        return yolo_body(inputs, num_anchors, num_classes)
    if model == "tiny":
        return tiny_yolo_body(inputs, num_anchors, num_classes)
    raise ValueError(f"unknown model {model!r}: expected 'yolov3' or 'tiny'")


def output_layer_names(body: keras.Model) -> List[str]:
    """Names of the layers producing the body's outputs (``output_s32`` ...), in output order."""
    return [t._keras_history.operation.name for t in body.outputs]


def preprocess_true_boxes(true_boxes, input_shape, anchors, num_classes, anchor_mask=None):
    """See :func:`yolo3.targets.preprocess_true_boxes`."""
    from yolo3.targets import preprocess_true_boxes as impl
    return impl(true_boxes, input_shape, anchors, num_classes, anchor_mask=anchor_mask)


def yolo_loss(args, anchors, num_classes, ignore_thresh=.5, anchor_mask=None):
    """See :func:`yolo3.loss.yolo_loss`."""
    from yolo3.loss import yolo_loss as impl
    return impl(args, anchors, num_classes, ignore_thresh=ignore_thresh, anchor_mask=anchor_mask)


def yolo_training_model(body: keras.Model, anchors, num_classes: int, ignore_thresh: float = .5,
                        anchor_mask: Optional[Sequence[Sequence[int]]] = None) -> keras.Model:
    """See :func:`yolo3.loss.yolo_training_model`."""
    from yolo3.loss import yolo_training_model as impl
    return impl(body, anchors, num_classes, ignore_thresh=ignore_thresh, anchor_mask=anchor_mask)
