"""yolo3.modeling.graph_surgery: copies of a body - batch norms folded into convolutions (against
the float64 formula), refolded after training, another compute dtype - that leave the body itself
unchanged."""
from __future__ import annotations

import keras
import numpy as np
import pytest

from yolo3.modeling.graph_surgery import (
    FoldedBatchNorm,
    fold_batch_norms,
    refold_batch_norms,
    with_compute_dtype,
)


def _model(rng) -> keras.Model:
    """conv (no bias) -> BN -> leaky; conv (bias) -> BN; a conv whose output also feeds an add
    beside its BN (two consumers: not foldable); a conv with its own activation before a BN."""
    x = inputs = keras.Input((8, 8, 3))
    x = keras.layers.Conv2D(4, 3, padding="same", use_bias=False, name="c1")(x)
    x = keras.layers.BatchNormalization(epsilon=1e-6, name="b1")(x)
    x = keras.layers.LeakyReLU(0.1, name="a1")(x)
    x = keras.layers.Conv2D(4, 1, name="c2")(x)
    x = keras.layers.BatchNormalization(epsilon=1e-3, name="b2")(x)
    shared = keras.layers.Conv2D(4, 1, name="c3")(x)
    x = keras.layers.Add(name="add")([keras.layers.BatchNormalization(name="b3")(shared), shared])
    x = keras.layers.Conv2D(4, 1, activation="relu", name="c4")(x)
    x = keras.layers.BatchNormalization(name="b4")(x)
    model = keras.Model(inputs, x, dtype="float32")
    for layer in model.layers:
        if isinstance(layer, keras.layers.BatchNormalization):
            layer.set_weights([rng.uniform(0.5, 1.5, 4), rng.normal(0, 0.2, 4),
                               rng.normal(0, 0.3, 4), rng.uniform(0.05, 1.0, 4)])
        elif isinstance(layer, keras.layers.Conv2D):
            layer.set_weights([rng.normal(0, 0.3, w.shape) for w in layer.get_weights()])
    return model


def _weights(model):
    return {w.path: np.array(w.numpy()) for w in model.weights}


def test_folding_follows_the_formula_and_keeps_outputs():
    rng = np.random.default_rng(0)
    body = _model(rng)
    before = _weights(body)
    folded = fold_batch_norms(body)
    kinds = {layer.name: type(layer) for layer in folded.layers}
    assert kinds["b1"] is FoldedBatchNorm and kinds["b2"] is FoldedBatchNorm
    assert kinds["b3"] is keras.layers.BatchNormalization  # its conv feeds the add too
    assert kinds["b4"] is keras.layers.BatchNormalization  # its conv has an activation
    for conv, bn in (("c1", "b1"), ("c2", "b2")):
        weights = [w.astype(np.float64) for w in body.get_layer(conv).get_weights()]
        kernel, bias = weights[0], weights[1] if len(weights) > 1 else 0.0
        gamma, beta, mean, var = (w.astype(np.float64) for w in body.get_layer(bn).get_weights())
        factor = gamma / np.sqrt(var + body.get_layer(bn).epsilon)
        got_kernel, got_bias = folded.get_layer(conv).get_weights()
        np.testing.assert_allclose(got_kernel, kernel * factor, rtol=1e-6)
        np.testing.assert_allclose(got_bias, beta + (bias - mean) * factor, rtol=1e-6, atol=1e-7)
    x = rng.normal(0, 1, (2, 8, 8, 3)).astype(np.float32)
    np.testing.assert_allclose(folded(x).numpy(), body(x, training=False).numpy(),
                               rtol=1e-4, atol=1e-5)
    after = _weights(body)
    assert before.keys() == after.keys()
    assert all(np.array_equal(before[k], after[k]) for k in before)  # the body is unchanged


def test_refold_follows_the_body_and_a_body_without_pairs_is_its_own_fold():
    rng = np.random.default_rng(1)
    body = _model(rng)
    folded = fold_batch_norms(body)
    body.get_layer("b1").set_weights([w * 1.3 + 0.1 for w in body.get_layer("b1").get_weights()])
    body.get_layer("c2").set_weights([w - 0.05 for w in body.get_layer("c2").get_weights()])
    x = rng.normal(0, 1, (1, 8, 8, 3)).astype(np.float32)
    assert not np.allclose(folded(x).numpy(), body(x, training=False).numpy(), atol=1e-3)
    refold_batch_norms(body, folded)
    np.testing.assert_allclose(folded(x).numpy(), body(x, training=False).numpy(),
                               rtol=1e-4, atol=1e-5)
    inputs = keras.Input((4, 4, 2))
    plain = keras.Model(inputs, keras.layers.Conv2D(2, 1)(inputs))
    assert fold_batch_norms(plain) is plain
    refold_batch_norms(plain, plain)  # nothing to do, no error


@pytest.mark.parametrize("policy, compute", [("mixed_bfloat16", "bfloat16"),
                                             ("float32", "float32")])
def test_another_compute_dtype_keeps_the_values(policy, compute):
    rng = np.random.default_rng(2)
    body = _model(rng)
    before = _weights(body)
    copy = with_compute_dtype(body, policy)
    assert copy is not body
    for layer in copy.layers[1:]:
        assert layer.compute_dtype == compute and layer.variable_dtype == "float32"
    copied = {w.path: np.array(w.numpy()) for w in copy.weights}
    assert copied.keys() == before.keys()
    assert all(np.array_equal(copied[k], before[k]) for k in before)
    assert all(layer.compute_dtype == "float32" for layer in body.layers[1:])
    x = rng.normal(0, 1, (1, 8, 8, 3)).astype(np.float32)
    tolerance = 5e-2 if compute == "bfloat16" else 1e-6
    np.testing.assert_allclose(np.asarray(copy(x, training=False), np.float32),
                               body(x, training=False).numpy(), rtol=tolerance, atol=tolerance)


# ------------------------------------------------------------------- the channels-first twin


def _conv_reference(x: np.ndarray, kernel: np.ndarray, bias: np.ndarray, stride: int) -> np.ndarray:
    """float64 'valid' convolution of NHWC ``x`` with a ``(kh, kw, in, out)`` kernel."""
    kh, kw = kernel.shape[:2]
    h = (x.shape[1] - kh) // stride + 1
    w = (x.shape[2] - kw) // stride + 1
    out = np.zeros((x.shape[0], h, w, kernel.shape[3]))
    for i in range(h):
        for j in range(w):
            patch = x[:, i * stride:i * stride + kh, j * stride:j * stride + kw, :]
            out[:, i, j, :] = np.einsum("bhwc,hwco->bo", patch, kernel)
    return out + bias


def test_the_channels_first_convolution_is_a_convolution():
    from yolo3.modeling.graph_surgery import ChannelsFirstConv2D
    rng = np.random.default_rng(0)
    conv = keras.layers.Conv2D(5, 3, strides=2, padding="valid", name="c")
    x = rng.normal(size=(2, 9, 11, 4)).astype(np.float32)
    conv(x)
    conv.set_weights([rng.normal(size=(3, 3, 4, 5)).astype(np.float32),
                      rng.normal(size=5).astype(np.float32)])
    twin = ChannelsFirstConv2D.from_conv_config(conv.get_config())
    twin.build((None, 4, 9, 11))
    twin.load(conv)
    assert tuple(twin.kernel.shape) == (5, 3, 3, 4)  # PyTorch's, in channels-last order
    out = np.transpose(np.asarray(twin(np.transpose(x, (0, 3, 1, 2)))), (0, 2, 3, 1))
    expected = _conv_reference(x.astype(np.float64), *[w.astype(np.float64)
                                                       for w in conv.get_weights()], 2)
    np.testing.assert_allclose(out, expected, rtol=1e-4, atol=1e-4)
    with pytest.raises(ValueError, match="linear convolutions"):
        ChannelsFirstConv2D.from_conv_config(keras.layers.Conv2D(2, 1, activation="relu",
                                                                 name="r").get_config())


@pytest.mark.parametrize("variant, shape", [("tiny", (None, None)), ("tiny-af", (64, 96)),
                                            pytest.param("yolov3-spp", (None, None),
                                                         marks=pytest.mark.slow)])
def test_the_channels_first_twin_gives_the_folded_bodys_maps(variant, shape):
    from yolo3.config.specs import get_spec
    from yolo3.modeling.bodies import build_spec_body
    from yolo3.modeling.graph_surgery import channels_first_twin, copy_weights
    keras.utils.set_random_seed(1)
    spec = get_spec(variant)
    folded = fold_batch_norms(build_spec_body(spec, 3, spec.default_head().anchors_per_scale,
                                              shape))
    twin = channels_first_twin(folded)
    x = np.random.default_rng(2).uniform(0, 1, (2, 64, 96, 3)).astype(np.float32)
    kinds = [type(layer).__name__ for layer in twin.layers]
    assert "LeakyReLU" not in kinds and "FoldedBatchNorm" not in kinds  # fused, left out
    assert kinds.count("ChannelsFirstConv2D") == sum(
        isinstance(layer, keras.layers.Conv2D) for layer in folded.layers)
    assert len(twin.layers) < len(folded.layers) * 0.6

    def maps(model):
        return [np.asarray(keras.ops.convert_to_numpy(o)) for o in model(x, training=False)]
    for a, b in zip(maps(folded), maps(twin)):
        assert a.shape == b.shape  # channels-last maps out
        np.testing.assert_allclose(b, a, rtol=1e-4, atol=1e-4)
    for layer in folded.layers:  # new weights reach the twin through copy_weights
        if layer.weights:
            layer.set_weights([w * 0.5 for w in layer.get_weights()])
    copy_weights(folded, twin)
    for a, b in zip(maps(folded), maps(twin)):
        np.testing.assert_allclose(b, a, rtol=1e-4, atol=1e-4)


def test_the_twin_refuses_a_layer_it_cannot_lay_out_naming_it():
    from yolo3.modeling.graph_surgery import channels_first_twin
    image = keras.Input((8, 8, 3))
    flat = keras.layers.Flatten(name="flat")(keras.layers.Conv2D(2, 1, name="c")(image))
    with pytest.raises(ValueError, match="'flat' \\(Flatten\\)"):
        channels_first_twin(keras.Model(image, flat))
    joined = keras.layers.Concatenate(axis=1, name="rows")([image, image])
    with pytest.raises(ValueError, match="'rows': it works on axis 1"):
        channels_first_twin(keras.Model(image, joined))
