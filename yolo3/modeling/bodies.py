"""The Keras bodies of the registered variants, built from their architectures.

Bodies are built from :mod:`yolo3.config.architectures` by :class:`KerasNet` (the same description
the Darknet cfgs are written from), so every layer has a name and parts are reached by name, never
by index:

- backbone layers start with ``backbone_``; its feature taps are ``backbone_c3`` (stride 8),
  ``backbone_c4`` (stride 16) and ``backbone_c5`` (stride 32) (tiny: ``backbone_c4``, ``backbone_c5``);
- each detection head's layers start with ``head_s32_``, ``head_s16_``, ``head_s8_``;
- the raw outputs are the 1x1 convolutions ``output_s32``, ``output_s16``, ``output_s8``; an
  anchor-free variant's are the concatenations ``output_s32`` ... of its decoupled head's
  predictions ``head_s32_box_pred`` and ``head_s32_cls_pred`` (linear 1x1 convolutions).

A Darknet convolution block ``NAME`` is the layers ``NAME_pad`` (stride 2 only: Darknet pads top and
left), ``NAME_conv`` (no bias), ``NAME_bn`` (epsilon 1e-6 as in Darknet) and ``NAME_leaky`` (0.1).
Body outputs are ``(batch, h / s, w / s, A * (5 + C))`` for strides ``s`` = 32, 16, 8 (tiny: 32, 16);
an anchor-free variant's ``(batch, h / s, w / s, 4 * reg_max + C)``
(:mod:`yolo3.config.anchor_free_head`).
"""
from __future__ import annotations

from typing import List, Optional, Tuple

import keras
from keras import layers

from yolo3.config.architectures import PREDICTION_SUFFIX, output_name
from yolo3.config.specs import ModelSpec, get_spec
from yolo3.modeling import batch_norm
from yolo3.modeling.blocks import BlockNames, conv_block
from yolo3.modeling.keras_compat import producing_layer

__all__ = ["KerasNet", "block_names", "build_spec_body", "build_body", "yolo_body",
           "tiny_yolo_body", "output_layer_names", "prediction_layer_names"]


_TOP_LEFT = ((1, 0), (1, 0))  # Darknet pads stride-2 convolutions on the top and left only


def block_names(block: str, stride: int = 1) -> BlockNames:
    """Keras layer names of the yolo3 convolution block ``block``."""
    return BlockNames(conv=f"{block}_conv", bn=f"{block}_bn", act=f"{block}_leaky",
                      pad=f"{block}_pad" if stride == 2 else None)


class KerasNet:
    """:class:`yolo3.config.architectures.Net` building Keras layers with yolo3 names; collects
    outputs. ``batch_norm``: the batch-norm layer class (default Keras's)."""

    def __init__(self, inputs, batch_norm=None):
        self.current = inputs
        self.outputs: List = []
        self.batch_norm = batch_norm

    def conv(self, block, filters, size, stride=1):
        self.current = conv_block(self.current, filters, size, block_names(block, stride),
                                  stride=stride, padding=_TOP_LEFT if stride == 2 else "same",
                                  batch_norm=self.batch_norm)
        return self.current

    def output(self, stride, filters):
        self.current = layers.Conv2D(filters, 1, padding="same", use_bias=True,
                                     name=output_name(stride))(self.current)
        self.outputs.append(self.current)
        return self.current

    def shortcut(self, name, source):
        self.current = layers.Add(name=name)([source, self.current])
        return self.current

    def tap(self, name):
        self.current = layers.Identity(name=name)(self.current)
        return self.current

    def route(self, source):
        self.current = source
        return source

    def concat(self, name, sources):
        self.current = layers.Concatenate(name=name)(list(sources))
        return self.current

    def upsample(self, name):
        self.current = layers.UpSampling2D(2, interpolation="nearest", name=name)(self.current)
        return self.current

    def maxpool(self, name, size, stride):
        self.current = layers.MaxPooling2D(size, strides=stride, padding="same",
                                           name=name)(self.current)
        return self.current

    def predict(self, name, filters):
        self.current = layers.Conv2D(filters, 1, padding="same", use_bias=True,
                                     name=name)(self.current)
        return self.current

    def join_output(self, stride, sources):
        self.current = layers.Concatenate(name=output_name(stride))(list(sources))
        self.outputs.append(self.current)
        return self.current


def _body(spec: ModelSpec, inputs, anchors_per_scale: Optional[int], num_classes: int,
          batch_norm=None) -> keras.Model:
    net = KerasNet(inputs, batch_norm)
    spec.describe(net, spec.output_filters(num_classes, anchors_per_scale))
    return keras.Model(inputs, net.outputs, name=spec.keras_name)


def yolo_body(inputs, num_anchors: int, num_classes: int) -> keras.Model:
    """YOLOv3: Darknet-53 and three heads (keras-yolo3 signature).

    inputs: a Keras input ``(batch, h, w, 3)``, h and w multiples of 32 (or None);
    num_anchors: anchors per scale (3). Outputs ``[y32, y16, y8]``.
    """
    return _body(get_spec("yolov3"), inputs, num_anchors, num_classes)


def tiny_yolo_body(inputs, num_anchors: int, num_classes: int) -> keras.Model:
    """Tiny YOLOv3 (keras-yolo3 signature); outputs ``[y32, y16]``."""
    return _body(get_spec("tiny"), inputs, num_anchors, num_classes)


def build_spec_body(spec: ModelSpec, num_classes: int, anchors_per_scale: Optional[int] = None,
                    input_shape: Tuple[Optional[int], Optional[int]] = (None, None),
                    fused_batch_norm: bool = False) -> keras.Model:
    """The body of ``spec`` for ``num_classes``; input ``(h, w)`` multiples of the largest stride,
    or None for any size. ``anchors_per_scale`` defaults to the spec's (3; an anchor-free variant
    has none and ignores it). ``fused_batch_norm``:
    batch norms that train through one fused kernel
    (:class:`yolo3.modeling.batch_norm.BatchNormalization`; what training builds; saved files get
    Keras's layer)."""
    if any(side is not None for side in input_shape):  # None: any size
        spec.check_input_size(tuple(spec.max_stride if v is None else v for v in input_shape))
    inputs = keras.Input(shape=(*input_shape, 3), name="image")
    return _body(spec, inputs, anchors_per_scale, num_classes,
                 batch_norm.BatchNormalization if fused_batch_norm else None)


def build_body(variant, num_classes: int, num_anchors: int = 3,
               input_shape: Tuple[Optional[int], Optional[int]] = (None, None)) -> keras.Model:
    """Build ``variant`` (a name from :mod:`yolo3.config.specs`, or a spec) for ``num_classes`` with
    ``num_anchors`` anchors per scale; input ``(h, w)`` multiples of 32 or None."""
    return build_spec_body(get_spec(variant), num_classes, num_anchors, input_shape)


def output_layer_names(body: keras.Model) -> List[str]:
    """Names of the layers producing the body's outputs (``output_s32`` ...), in output order."""
    return [producing_layer(t).name for t in body.outputs]


def prediction_layer_names(stride: int) -> Tuple[str, str]:
    """The anchor-free head's prediction convolutions of ``stride``: ``(distances, classes)``."""
    return f"head_s{stride}_box{PREDICTION_SUFFIX}", f"head_s{stride}_cls{PREDICTION_SUFFIX}"
