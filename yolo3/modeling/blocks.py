"""Keras building blocks with Darknet's numerics, shared by the yolo3 bodies and the converter.

A Darknet ``[convolutional]`` block is an optional ``ZeroPadding2D``, a ``Conv2D`` (no bias when
batch-normalised), ``BatchNormalization`` with Darknet's epsilon 1e-6 (``normalize_cpu``; Keras's
default 1e-3 drifts about 1% from Darknet on YOLOv3) and the activation (leaky ReLU slope 0.1).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

BN_EPSILON = 1e-6  # Darknet's normalize_cpu epsilon
BN_MOMENTUM = 0.99
LEAKY_SLOPE = 0.1
ACTIVATIONS = ("leaky", "linear", "relu", "mish", "logistic")


@dataclass(frozen=True)
class BlockNames:
    """Keras layer names of one convolution block (``pad`` and ``act`` used only when present)."""
    conv: str
    bn: Optional[str] = None
    act: Optional[str] = None
    pad: Optional[str] = None


def activation_layer(kind: str, name: str):
    """The Keras layer for Darknet activation ``kind`` (None for ``linear``)."""
    from keras import layers
    if kind == "leaky":
        return layers.LeakyReLU(negative_slope=LEAKY_SLOPE, name=name)
    if kind == "relu":
        return layers.ReLU(name=name)
    if kind == "mish":
        return layers.Activation("mish", name=name)
    if kind == "logistic":
        return layers.Activation("sigmoid", name=name)
    if kind == "linear":
        return None
    raise ValueError(f"activation {kind!r} is not one of {ACTIVATIONS}")


def conv_block(x, filters: int, size: int, names: BlockNames, stride: int = 1,
               padding="same", batch_normalize: bool = True, activation: str = "leaky",
               kernel_initializer: str = "glorot_uniform", batch_norm=None):
    """One Darknet convolution on tensor ``x``.

    ``batch_norm``: the batch-norm layer class (default ``keras.layers.BatchNormalization``;
    training bodies use :class:`yolo3.modeling.batch_norm.BatchNormalization`).

    ``padding``: ``"same"`` or ``"valid"`` (Keras's), or a ``ZeroPadding2D`` argument (e.g.
    ``((1, 0), (1, 0))``: Darknet's top/left padding of stride-2 convolutions) for a padding layer
    ``names.pad`` followed by a ``"valid"`` convolution.
    """
    from keras import layers
    if not isinstance(padding, str):
        x = layers.ZeroPadding2D(padding, name=names.pad)(x)
        padding = "valid"
    x = layers.Conv2D(filters, size, strides=stride, padding=padding,
                      use_bias=not batch_normalize, kernel_initializer=kernel_initializer,
                      name=names.conv)(x)
    if batch_normalize:
        x = (batch_norm or layers.BatchNormalization)(epsilon=BN_EPSILON, momentum=BN_MOMENTUM,
                                                      name=names.bn)(x)
    act = activation_layer(activation, names.act)
    return act(x) if act is not None else x
