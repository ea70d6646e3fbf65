"""Batch-norm statistics recomputed for the current weights (yolo3.training.bn_statistics) and the
training callback that does it before validation and saving: against a float64 NumPy reference,
frozen layers, mixed precision, EMA weights, and inside ``train()``."""
from __future__ import annotations

import keras
import numpy as np
import pytest
import tensorflow as tf

from yolo3.modeling.keras_compat import ExactSwapEMAWeights
from yolo3.training.bn_statistics import BatchNormStatistics, trainable_batch_norms
from yolo3.training.callbacks import PreciseBatchNorm
from yolo3.training.recipe import dtype_policy

EPS = 1e-3


def _model(policy: str = "float32") -> keras.Model:
    """1x1 conv -> BN -> leaky -> 1x1 conv -> BN: the NumPy reference below computes it exactly."""
    with dtype_policy(policy):
        x = keras.Input((6, 5, 3), name="image")
        h = keras.layers.Conv2D(4, 1, name="c1")(x)
        h = keras.layers.BatchNormalization(epsilon=EPS, name="bn1")(h)
        h = keras.layers.LeakyReLU(0.1, name="act")(h)
        h = keras.layers.Conv2D(2, 1, use_bias=False, name="c2")(h)
        h = keras.layers.BatchNormalization(epsilon=EPS, name="bn2")(h)
        model = keras.Model(x, h)
    rng = np.random.default_rng(0)
    for layer in model.layers:
        if isinstance(layer, keras.layers.BatchNormalization):
            layer.set_weights([rng.uniform(0.5, 1.5, w.shape) if "gamma" in w.path else
                               rng.normal(0, 0.3, w.shape) if "beta" in w.path else
                               rng.normal(0, 1, w.shape) if "mean" in w.path else
                               rng.uniform(2, 3, w.shape) for w in layer.weights])
        elif layer.weights:
            layer.set_weights([rng.normal(0, 1, w.shape) for w in layer.weights])
    return model


def _reference(model: keras.Model, batches) -> dict:
    """Float64: each batch in training mode (BNs normalise with the batch's own biased moments);
    per BN the image-weighted average of batch means and variances."""
    w1, b1 = (np.asarray(w, np.float64) for w in model.get_layer("c1").get_weights())
    g1, be1 = (np.asarray(w, np.float64) for w in model.get_layer("bn1").get_weights()[:2])
    (w2,) = (np.asarray(w, np.float64) for w in model.get_layer("c2").get_weights())
    sums = {"bn1": [0, 0], "bn2": [0, 0]}
    total = 0
    for x in batches:
        x = np.asarray(x, np.float64)
        n = len(x)
        a = x @ w1[0, 0] + b1
        m1, v1 = a.mean(axis=(0, 1, 2)), a.var(axis=(0, 1, 2))
        h = (a - m1) / np.sqrt(v1 + EPS) * g1 + be1
        h = np.where(h > 0, h, 0.1 * h)
        c = h @ w2[0, 0]
        m2, v2 = c.mean(axis=(0, 1, 2)), c.var(axis=(0, 1, 2))
        for name, (m, v) in {"bn1": (m1, v1), "bn2": (m2, v2)}.items():
            sums[name][0] = sums[name][0] + n * m
            sums[name][1] = sums[name][1] + n * v
        total += n
    return {k: (m / total, v / total) for k, (m, v) in sums.items()}


def _batches(sizes=(4, 4, 3), seed=1):
    rng = np.random.default_rng(seed)
    return [rng.uniform(0, 1, (n, 6, 5, 3)).astype(np.float32) for n in sizes]


def test_recompute_matches_a_float64_reference():
    model = _model()
    batches = _batches()
    others = {w.path: w.numpy().copy() for w in model.weights if "moving" not in w.path}
    expected = _reference(model, batches)
    assert BatchNormStatistics(model, batches).recompute() == 11
    for name, (mean, variance) in expected.items():
        layer = model.get_layer(name)
        np.testing.assert_allclose(layer.moving_mean.numpy(), mean, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(layer.moving_variance.numpy(), variance, rtol=1e-5)
    for w in model.weights:  # only the moving statistics change
        if "moving" not in w.path:
            np.testing.assert_array_equal(w.numpy(), others[w.path])


def test_recompute_follows_the_current_weights_and_is_idempotent():
    model = _model()
    batches = _batches()
    stats = BatchNormStatistics(model, batches)
    stats.recompute()
    first = model.get_layer("bn2").moving_variance.numpy().copy()
    stats.recompute()  # same weights: same statistics (the private copy is refreshed each time)
    np.testing.assert_allclose(model.get_layer("bn2").moving_variance.numpy(), first, rtol=1e-6)
    kernel = model.get_layer("c2").get_weights()[0]
    model.get_layer("c2").set_weights([kernel * 2.0])  # the next layer's inputs double
    stats.recompute()
    np.testing.assert_allclose(model.get_layer("bn2").moving_variance.numpy(), 4 * first, rtol=1e-5)
    expected = _reference(model, batches)
    np.testing.assert_allclose(model.get_layer("bn2").moving_mean.numpy(), expected["bn2"][0],
                               rtol=1e-5, atol=1e-6)


def test_frozen_batch_norms_keep_their_statistics():
    model = _model()
    model.get_layer("bn1").trainable = False
    assert [layer.name for layer in trainable_batch_norms(model)] == ["bn2"]
    before = [v.numpy().copy() for v in model.get_layer("bn1").weights]
    batches = _batches()
    BatchNormStatistics(model, batches).recompute()
    for v, b in zip(model.get_layer("bn1").weights, before):
        np.testing.assert_array_equal(v.numpy(), b)
    # bn2's input came from bn1 in inference mode: the reference with bn1's moving statistics
    w1, b1 = model.get_layer("c1").get_weights()
    g, be, m, v = model.get_layer("bn1").get_weights()
    (w2,) = model.get_layer("c2").get_weights()
    means = []
    for x in batches:
        h = (x.astype(np.float64) @ w1[0, 0] + b1 - m) / np.sqrt(v + EPS) * g + be
        means.append(len(x) * (np.where(h > 0, h, 0.1 * h) @ w2[0, 0]).mean(axis=(0, 1, 2)))
    np.testing.assert_allclose(model.get_layer("bn2").moving_mean.numpy(), sum(means) / 11,
                               rtol=1e-5, atol=1e-6)


def test_mixed_bfloat16_body_gets_float32_statistics_close_to_the_float32_ones():
    mixed, full = _model("mixed_bfloat16"), _model("float32")
    batches = _batches(seed=3)
    BatchNormStatistics(mixed, batches).recompute()
    BatchNormStatistics(full, batches).recompute()
    for name in ("bn1", "bn2"):
        a, b = mixed.get_layer(name), full.get_layer(name)
        assert a.moving_variance.dtype == "float32"
        np.testing.assert_allclose(a.moving_mean.numpy(), b.moving_mean.numpy(), rtol=0.05, atol=0.05)
        np.testing.assert_allclose(a.moving_variance.numpy(), b.moving_variance.numpy(), rtol=0.05)


def test_nothing_to_do_without_images_or_batch_norms():
    model = _model()
    before = model.get_layer("bn1").moving_mean.numpy().copy()
    assert BatchNormStatistics(model, []).recompute() == 0
    np.testing.assert_array_equal(model.get_layer("bn1").moving_mean.numpy(), before)
    plain = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    assert BatchNormStatistics(plain, _batches()).recompute() == 0


def test_callback_pairs_the_ema_weights_with_their_statistics():
    """fit with EMA: at the end of every epoch (after validation) the model holds the averaged
    weights and batch-norm statistics of exactly those weights; the validation loss was computed
    with them too."""
    keras.utils.set_random_seed(0)
    model = _model()
    batches = _batches((4, 4, 4, 4))
    x = np.concatenate(batches)
    y = np.zeros((len(x), 6, 5, 2), np.float32)
    model.compile(keras.optimizers.Adam(0.05, use_ema=True, ema_momentum=0.5), loss="mse")
    stats = BatchNormStatistics(model, batches)
    seen = []

    class Check(keras.callbacks.Callback):
        def on_test_end(self, logs=None):  # inside fit's validation, EMA weights in the model
            seen.append(("test", [v.numpy().copy() for v in model.get_layer("bn2").weights]))

        def on_epoch_end(self, epoch, logs=None):
            bn = [v.numpy().copy() for v in model.get_layer("bn2").weights]
            fresh = _reference(model, batches)["bn2"]
            seen.append(("epoch", bn, fresh, logs["val_loss"],
                         model.evaluate(x, y, batch_size=16, verbose=0)))

    model.fit(x, y, batch_size=4, epochs=3, validation_data=(x, y), verbose=0,
              callbacks=[ExactSwapEMAWeights(swap_on_epoch=True), PreciseBatchNorm(stats),
                         Check()])
    epochs = [s for s in seen if s[0] == "epoch"]
    assert len(epochs) == 3
    for _, (gamma, beta, mean, variance), (ref_mean, ref_var), val_loss, evaluated in epochs:
        np.testing.assert_allclose(mean, ref_mean, rtol=1e-4, atol=1e-5)
        np.testing.assert_allclose(variance, ref_var, rtol=1e-4)
        # the validation loss is the loss of the model as it is evaluated and saved
        assert val_loss == pytest.approx(evaluated, rel=1e-4)


def test_callback_recomputes_at_epoch_end_when_no_validation_ran():
    model = _model()
    model.compile(keras.optimizers.SGD(0.01), loss="mse")
    batches = _batches((4, 4))
    x = np.concatenate(batches)
    calls = []

    class Counting(BatchNormStatistics):
        def recompute(self):
            calls.append(1)
            return super().recompute()

    model.fit(x, np.zeros((8, 6, 5, 2), np.float32), batch_size=4, epochs=2, verbose=0,
              callbacks=[PreciseBatchNorm(Counting(model, batches))])
    assert len(calls) == 2
    np.testing.assert_allclose(model.get_layer("bn2").moving_mean.numpy(),
                               _reference(model, batches)["bn2"][0], rtol=1e-4, atol=1e-5)


def test_dataset_batches_are_accepted():
    model = _model()
    images = np.concatenate(_batches())
    ds = tf.data.Dataset.from_tensor_slices((images, np.zeros(len(images)))).batch(4).cache()
    assert BatchNormStatistics(model, ds).recompute() == 11
    expected = _reference(model, [images[:4], images[4:8], images[8:]])
    np.testing.assert_allclose(model.get_layer("bn1").moving_variance.numpy(), expected["bn1"][1],
                               rtol=1e-5)
