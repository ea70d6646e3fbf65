"""The anchor-free head's loss layer and training model (the maths: :mod:`yolo3.ops.anchor_free`).

The training model of an anchor-free body takes ``[image, true_boxes]`` (the pipeline's padded
boxes, ``(max_boxes, 5)`` ``x1, y1, x2, y2, class`` input pixels) and outputs the batch loss
``(1,)``, as the anchor head's :func:`yolo3.modeling.loss.yolo_training_model` does: the same
``identity_loss``, replica wrapper, strategies and checkpoints train it. Every shape is static, so
the step compiles with XLA.
"""
from __future__ import annotations

from typing import Any, Mapping, Union

import keras
from keras import ops

from yolo3.config.anchor_free_head import AnchorFreeHead
from yolo3.config.loss_options import LossOptions
from yolo3.modeling.loss import layer_options
from yolo3.ops import anchor_free

__all__ = ["AnchorFreeLoss", "anchor_free_training_model"]


@keras.saving.register_keras_serializable(package="yolo3")
class AnchorFreeLoss(keras.layers.Layer):
    """``[*outputs, true_boxes]`` -> the batch loss ``(1,)`` float32 (the sum of
    :func:`yolo3.ops.anchor_free.loss_terms` but the positive count); ``options`` a
    :class:`~yolo3.config.loss_options.LossOptions` or its config dict (0.x files' separate
    keywords are read too: :func:`yolo3.modeling.loss.layer_options`)."""

    def __init__(self, strides, reg_max: int, num_classes: int,
                 options: Union[LossOptions, Mapping[str, Any], None] = None, **kwargs):
        kwargs.setdefault("dtype", "float32")  # the loss stays float32 under mixed precision
        self.num_classes = int(num_classes)
        self.options = layer_options(options, kwargs, self.num_classes)
        super().__init__(**kwargs)
        self.head = AnchorFreeHead(tuple(strides), int(reg_max))
        self.supports_jit = True

    def call(self, inputs):
        inputs = list(inputs)
        true_boxes = inputs.pop()
        terms = anchor_free.loss_terms(inputs, true_boxes, self.head, self.num_classes,
                                       self.options)
        total = terms["box"] + terms["dfl"] + terms["class"]
        return ops.reshape(total, [1])

    def compute_output_shape(self, input_shape):
        return (1,)

    def get_config(self) -> dict:
        config = super().get_config()
        config.update(strides=list(self.head.strides), reg_max=self.head.reg_max,
                      num_classes=self.num_classes, options=self.options.to_config())
        return config


def anchor_free_training_model(body: keras.Model, head: AnchorFreeHead, num_classes: int,
                               max_boxes: int,
                               options: LossOptions = LossOptions()) -> keras.Model:
    """Wrap the anchor-free ``body`` into a model ``[image, true_boxes] -> loss (1,)`` (compile
    with ``identity_loss``); training it trains ``body``'s layers."""
    channels = head.channels(num_classes)
    if len(body.outputs) != head.num_scales:
        raise ValueError(f"the body has {len(body.outputs)} outputs, the head {head.num_scales} "
                         f"strides {list(head.strides)}")
    for output, stride in zip(body.outputs, head.strides):
        if output.shape[-1] is not None and output.shape[-1] != channels:
            raise ValueError(f"body output of stride {stride} has {output.shape[-1]} channels, "
                             f"expected 4 x {head.reg_max} distance logits + {num_classes} "
                             f"classes = {channels}")
    image = keras.Input(shape=body.input_shape[1:], name="image")
    boxes = keras.Input(shape=(max_boxes, 5), name="true_boxes")
    outputs = body(image)
    if not isinstance(outputs, (list, tuple)):
        outputs = [outputs]
    loss = AnchorFreeLoss(head.strides, head.reg_max, num_classes, options,
                          name="anchor_free_loss")([*outputs, boxes])
    return keras.Model([image, boxes], loss, name=f"{body.name}_training")
