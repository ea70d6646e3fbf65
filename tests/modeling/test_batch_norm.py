"""yolo3's fused BatchNormalization (yolo3.modeling.batch_norm; FusedBatchNorm here) against Keras's
layer, which it replaces in training bodies: the same outputs, moving statistics and gradients as
Keras and float64, cuDNN's minimum epsilon where a GPU is seen, mixed bfloat16, the same inference
call, weights files either way and .keras files with Keras's own layer."""
from __future__ import annotations

import keras
import numpy as np
import tensorflow as tf

from yolo3.checkpoint.saving import atomic_save_model, atomic_save_weights
from yolo3.config.specs import get_spec
from yolo3.modeling.batch_norm import (
    MIN_FUSED_EPSILON,
    has_fused_batch_norms,
    training_epsilon,
)
from yolo3.modeling.batch_norm import BatchNormalization as FusedBatchNorm
from yolo3.modeling.bodies import build_body, build_spec_body
from yolo3.modeling.graph_surgery import keras_batch_norms


def _pair(epsilon: float, momentum: float = 0.9, dtype: str = "float32", channels: int = 5):
    rng = np.random.default_rng(0)
    weights = [rng.uniform(0.5, 1.5, channels).astype("float32"),  # gamma
               rng.normal(size=channels).astype("float32"),  # beta
               rng.normal(size=channels).astype("float32"),  # moving mean
               rng.uniform(0.5, 2, channels).astype("float32")]  # moving variance
    layers = []
    for cls in (keras.layers.BatchNormalization, FusedBatchNorm):
        layer = cls(epsilon=epsilon, momentum=momentum, dtype=dtype)
        layer.build((None, 6, 7, channels))
        layer.set_weights(weights)
        layers.append(layer)
    return layers


def _batch(scale: float = 3.0, channels: int = 5):
    rng = np.random.default_rng(1)
    return tf.constant(rng.normal(1.0, scale, (4, 6, 7, channels)).astype("float32"))


def _float64_reference(x: np.ndarray, gamma, beta, epsilon):
    x = x.astype(np.float64)
    mean, variance = x.mean(axis=(0, 1, 2)), x.var(axis=(0, 1, 2))
    return (x - mean) / np.sqrt(variance + epsilon) * gamma + beta, mean, variance


def test_training_call_equals_keras_and_float64(rng):
    keras_bn, fused = _pair(epsilon=1e-3)
    x = _batch()
    y_keras = keras_bn(x, training=True).numpy()
    y_fused = fused(x, training=True).numpy()
    gamma, beta = keras_bn.get_weights()[:2]
    want, mean, variance = _float64_reference(x.numpy(), gamma, beta, 1e-3)
    np.testing.assert_allclose(y_fused, want, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(y_fused, y_keras, rtol=1e-5, atol=1e-5)
    # moving averages: momentum 0.9 towards the batch mean and the biased batch variance
    start_mean, start_variance = _pair(1e-3)[0].get_weights()[2:]  # what both started from
    for layer in (keras_bn, fused):
        np.testing.assert_allclose(layer.moving_mean.numpy(), 0.9 * start_mean + 0.1 * mean,
                                   rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(layer.moving_variance.numpy(),
                                   0.9 * start_variance + 0.1 * variance, rtol=1e-5)


def test_gradients_equal_keras():
    keras_bn, fused = _pair(epsilon=1e-3)
    x = _batch()
    upstream = tf.constant(np.random.default_rng(2).normal(size=x.shape).astype("float32"))
    grads = []
    for layer in (keras_bn, fused):
        with tf.GradientTape() as tape:
            tape.watch(x)
            loss = tf.reduce_sum(layer(x, training=True) * upstream)
        grads.append([g.numpy() for g in tape.gradient(loss, [x, layer.gamma, layer.beta])])
    for a, b in zip(*grads):
        np.testing.assert_allclose(b, a, rtol=1e-4, atol=1e-5)


def test_where_a_gpu_is_seen_training_normalises_with_cudnns_minimum_epsilon(monkeypatch):
    keras_bn, fused = _pair(epsilon=1e-6)  # Darknet's epsilon, the bodies' own
    x = _batch(scale=1e-3)  # a channel variance near epsilon makes the difference visible
    # inference uses the layer's own epsilon, exactly as Keras's layer does
    np.testing.assert_array_equal(fused(x, training=False).numpy(),
                                  keras_bn(x, training=False).numpy())
    gamma, beta = keras_bn.get_weights()[:2]
    cpu = fused(x, training=True).numpy()  # no GPU here: the layer's own epsilon
    np.testing.assert_allclose(cpu, _float64_reference(x.numpy(), gamma, beta, 1e-6)[0],
                               rtol=1e-4, atol=1e-4)
    assert training_epsilon(1e-6) == 1e-6 and training_epsilon(1e-3) == 1e-3
    monkeypatch.setattr(tf.config, "list_physical_devices",
                        lambda kind=None: ["/physical_device:GPU:0"] if kind == "GPU" else [])
    assert training_epsilon(1e-6) == MIN_FUSED_EPSILON and training_epsilon(1e-3) == 1e-3
    gpu = fused(x, training=True).numpy()  # traced anew: the raised epsilon, computed here on CPU
    np.testing.assert_allclose(gpu, _float64_reference(x.numpy(), gamma, beta,
                                                       MIN_FUSED_EPSILON)[0], rtol=1e-4, atol=1e-4)
    assert np.abs(gpu - cpu).max() > 1e-3


def test_mixed_bfloat16_output_dtype_and_error():
    keras_bn, fused = _pair(epsilon=1e-3, dtype="mixed_bfloat16")
    x = _batch()
    y_keras, y_fused = keras_bn(x, training=True), fused(x, training=True)
    assert y_fused.dtype == tf.bfloat16 == y_keras.dtype
    np.testing.assert_allclose(tf.cast(y_fused, tf.float32).numpy(),
                               tf.cast(y_keras, tf.float32).numpy(), rtol=2e-2, atol=2e-2)
    assert fused.moving_mean.dtype == "float32"
    np.testing.assert_allclose(fused.moving_mean.numpy(), keras_bn.moving_mean.numpy(),
                               rtol=1e-2, atol=1e-2)


def test_frozen_and_masked_calls_take_keras_path():
    keras_bn, fused = _pair(epsilon=1e-6)
    fused.trainable = keras_bn.trainable = False  # Keras runs a frozen batch norm in inference mode
    x = _batch()
    np.testing.assert_array_equal(fused(x, training=True).numpy(),
                                  keras_bn(x, training=True).numpy())
    flat = FusedBatchNorm(epsilon=1e-3)  # 2-D input: not fusable, Keras's call
    np.testing.assert_allclose(flat(tf.ones((3, 4)), training=True).numpy(), np.zeros((3, 4)),
                               atol=1e-6)


def test_files_hold_keras_batch_norms(tmp_path):
    spec = get_spec("tiny")
    body = build_spec_body(spec, 2, input_shape=(64, 64), fused_batch_norm=True)
    assert has_fused_batch_norms(body) and not has_fused_batch_norms(build_body("tiny", 2))
    rng = np.random.default_rng(3)
    body.set_weights([rng.normal(size=w.shape).astype("float32") for w in body.get_weights()])
    plain = keras_batch_norms(body)
    assert not has_fused_batch_norms(plain) and keras_batch_norms(plain) is plain
    for a, b in zip(plain.get_weights(), body.get_weights()):
        np.testing.assert_array_equal(a, b)
    atomic_save_weights(body, tmp_path / "b.weights.h5")
    atomic_save_model(body, tmp_path / "b.keras")
    other = build_body("tiny", 2, input_shape=(64, 64))  # Keras's layers load the weights file
    other.load_weights(tmp_path / "b.weights.h5")
    loaded = keras.models.load_model(tmp_path / "b.keras", compile=False)
    assert not has_fused_batch_norms(loaded)
    image = rng.uniform(0, 1, (1, 64, 64, 3)).astype("float32")
    want = body.predict(image, verbose=0)
    for model in (other, loaded):
        for a, b in zip(model.predict(image, verbose=0), want):
            np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5)
    fresh = build_spec_body(spec, 2, input_shape=(64, 64), fused_batch_norm=True)
    fresh.load_weights(tmp_path / "b.weights.h5")  # and back into a fused body
    other.save_weights(tmp_path / "plain.weights.h5")  # Keras's own save of either body
    body.save_weights(tmp_path / "fused.weights.h5")
    build_body("tiny", 2, input_shape=(64, 64)).load_weights(tmp_path / "fused.weights.h5")
    fresh.load_weights(tmp_path / "plain.weights.h5")
    for a, b in zip(fresh.get_weights(), body.get_weights()):
        np.testing.assert_allclose(a, b, rtol=1e-6)


def test_config_round_trip():
    layer = FusedBatchNorm(epsilon=1e-6, momentum=0.97, name="x_bn")
    restored = keras.saving.deserialize_keras_object(keras.saving.serialize_keras_object(layer))
    assert isinstance(restored, FusedBatchNorm)
    assert (restored.epsilon, restored.momentum, restored.name) == (1e-6, 0.97, "x_bn")


def test_training_steps_of_a_fused_body_match_keras():
    """Two optimiser steps of a tiny body from the same start: the fused layers and Keras's give
    the same losses and weights to float32 rounding."""
    keras.utils.set_random_seed(0)
    body = build_spec_body(get_spec("tiny"), 2, input_shape=(64, 64), fused_batch_norm=True)
    reference = build_body("tiny", 2, input_shape=(64, 64))
    reference.set_weights(body.get_weights())
    x = np.random.default_rng(4).uniform(0, 1, (4, 64, 64, 3)).astype("float32")
    targets = [np.zeros(o.shape, "float32") for o in reference.predict(x, verbose=0)]
    losses = []
    for model in (body, reference):
        model.compile(keras.optimizers.SGD(0.01), loss=["mse", "mse"])
        losses.append([model.train_on_batch(x, targets)[0] for _ in range(2)])
    np.testing.assert_allclose(losses[0], losses[1], rtol=1e-4)
    for a, b in zip(body.get_weights(), reference.get_weights()):
        np.testing.assert_allclose(a, b, rtol=1e-3, atol=1e-5)
