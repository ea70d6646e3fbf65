"""yolo3.modeling.blocks: one Darknet convolution block against a float64 NumPy implementation of
Darknet's arithmetic (top/left padding, convolution, batch norm with epsilon 1e-6, the
activations)."""
from __future__ import annotations

import keras
import numpy as np
import pytest

from yolo3.modeling.batch_norm import BatchNormalization as FusedTrainingBatchNorm
from yolo3.modeling.blocks import (
    ACTIVATIONS,
    BN_EPSILON,
    BN_MOMENTUM,
    LEAKY_SLOPE,
    BlockNames,
    activation_layer,
    conv_block,
)


def _np_conv(x, kernel, stride, pad_top_left):
    """x (h, w, c), kernel (k, k, c, f): Darknet's top/left zero padding, then a valid convolution."""
    if pad_top_left:
        x = np.pad(x, ((1, 0), (1, 0), (0, 0)))
    k = kernel.shape[0]
    oh, ow = (x.shape[0] - k) // stride + 1, (x.shape[1] - k) // stride + 1
    out = np.zeros((oh, ow, kernel.shape[3]))
    for i in range(oh):
        for j in range(ow):
            patch = x[i * stride:i * stride + k, j * stride:j * stride + k]
            out[i, j] = np.tensordot(patch, kernel, axes=([0, 1, 2], [0, 1, 2]))
    return out


_NP_ACTIVATIONS = {
    "leaky": lambda v: np.where(v > 0, v, LEAKY_SLOPE * v),
    "linear": lambda v: v,
    "relu": lambda v: np.maximum(v, 0),
    "mish": lambda v: v * np.tanh(np.log1p(np.exp(v))),
    "logistic": lambda v: 1 / (1 + np.exp(-v)),
}


@pytest.mark.parametrize("activation", ACTIVATIONS)
def test_stride2_block_with_batch_norm_matches_darknet(activation):
    rng = np.random.default_rng(3)
    names = BlockNames("conv_1", "bn_1", f"{activation}_1", "pad_1")
    inputs = keras.Input((9, 8, 3))
    model = keras.Model(inputs, conv_block(inputs, 4, 3, names, stride=2, padding=((1, 0), (1, 0)),
                                           activation=activation), dtype="float32")
    conv, bn = model.get_layer("conv_1"), model.get_layer("bn_1")
    assert conv.use_bias is False and bn.epsilon == BN_EPSILON == 1e-6 and bn.momentum == BN_MOMENTUM
    assert isinstance(model.get_layer("pad_1"), keras.layers.ZeroPadding2D)
    kernel = rng.normal(0, 0.3, (3, 3, 3, 4))
    gamma, beta = rng.uniform(0.5, 1.5, 4), rng.normal(0, 0.2, 4)
    mean, var = rng.normal(0, 0.3, 4), rng.uniform(0.01, 1, 4)
    conv.set_weights([kernel.astype(np.float32)])
    bn.set_weights([w.astype(np.float32) for w in (gamma, beta, mean, var)])
    x = rng.normal(0, 1, (9, 8, 3))
    got = model(x[None].astype(np.float32), training=False).numpy()[0]
    z = _np_conv(x, kernel, 2, True)
    want = _NP_ACTIVATIONS[activation]((z - mean) / np.sqrt(var + 1e-6) * gamma + beta)
    assert got.shape == want.shape == (4, 4, 4)  # (9 + 1 - 3) // 2 + 1, (8 + 1 - 3) // 2 + 1
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


def test_block_without_batch_norm_has_a_bias_and_same_padding():
    rng = np.random.default_rng(4)
    inputs = keras.Input((6, 6, 2))
    model = keras.Model(inputs, conv_block(inputs, 3, 1, BlockNames("conv_9"), batch_normalize=False,
                                           activation="linear"), dtype="float32")
    assert [layer.name for layer in model.layers[1:]] == ["conv_9"]
    kernel, bias = rng.normal(0, 1, (1, 1, 2, 3)), rng.normal(0, 1, 3)
    model.get_layer("conv_9").set_weights([kernel.astype(np.float32), bias.astype(np.float32)])
    x = rng.normal(0, 1, (6, 6, 2))
    np.testing.assert_allclose(model(x[None].astype(np.float32)).numpy()[0],
                               _np_conv(x, kernel, 1, False) + bias, rtol=1e-5, atol=1e-5)


def test_the_batch_norm_class_is_chosen_by_the_caller():
    inputs = keras.Input((8, 8, 3))
    default = keras.Model(inputs, conv_block(inputs, 2, 3, BlockNames("c2", "b2", "a2")))
    fused = keras.Model(inputs, conv_block(inputs, 2, 3, BlockNames("c3", "b3", "a3"),
                                           batch_norm=FusedTrainingBatchNorm))
    assert type(default.get_layer("b2")) is keras.layers.BatchNormalization
    assert type(fused.get_layer("b3")) is FusedTrainingBatchNorm
    assert fused.get_layer("b3").epsilon == BN_EPSILON


def test_activation_layers_and_an_unknown_one():
    assert activation_layer("linear", "x") is None
    assert activation_layer("leaky", "x").negative_slope == pytest.approx(LEAKY_SLOPE)
    with pytest.raises(ValueError, match="activation 'swish' is not one of"):
        activation_layer("swish", "x")
