"""The training recipe's pieces (yolo3.training.recipe, yolo3.config.precision's training choice),
each against a float64 NumPy reference or its documented rule."""
from __future__ import annotations

import math

import keras
import numpy as np
import pytest

from yolo3.training.recipe import (
    NO_DECAY,
    SGD_MOMENTUM,
    auto_ema_momentum,
    auto_eval_every,
    dtype_policy,
    learning_rate,
    make_optimizer,
    use_jit,
)


def _conv_bn_model():
    x = keras.Input((6, 6, 2))
    y = keras.layers.Conv2D(3, 3, use_bias=True, name="conv")(x)
    y = keras.layers.BatchNormalization(name="bn")(y)
    return keras.Model(x, y)


def _variables(model):
    return {v.path: v for v in model.trainable_variables}


@pytest.mark.parametrize("name", ["adam", "sgd"])
def test_weight_decay_is_decoupled_and_skips_batch_norm_and_biases(name):
    model = _conv_bn_model()
    before = {k: v.numpy().astype(np.float64) for k, v in _variables(model).items()}
    lr, wd = 0.1, 0.05
    optimizer = make_optimizer(name, lr, weight_decay=wd)
    variables = model.trainable_variables
    optimizer.apply([np.zeros(v.shape, np.float32) for v in variables], variables)  # no gradient
    for path, variable in _variables(model).items():
        decayed = not any(part in path.split("/")[-1] for part in NO_DECAY)
        expected = before[path] * (1 - lr * wd) if decayed else before[path]
        np.testing.assert_allclose(variable.numpy(), expected, rtol=1e-6, atol=1e-7, err_msg=path)
    assert any("kernel" in p for p in before) and any("gamma" in p for p in before)


def test_sgd_has_nesterov_momentum_and_its_own_default_lr():
    sgd = make_optimizer("sgd", learning_rate("sgd"))
    assert isinstance(sgd, keras.optimizers.SGD) and sgd.nesterov
    assert sgd.momentum == pytest.approx(SGD_MOMENTUM)
    assert float(sgd.learning_rate) == pytest.approx(1e-2)
    assert learning_rate("adam") == 3e-3 and learning_rate("sgd") == 1e-2
    assert learning_rate("sgd", 0.5) == 0.5
    with pytest.raises(ValueError, match="optimizer must be one of"):
        learning_rate("rmsprop")


def test_ema_follows_the_float64_average_of_the_weights():
    model = _conv_bn_model()
    momentum = 0.8
    optimizer = make_optimizer("adam", 0.01, ema=True, ema_momentum=momentum)
    variables = model.trainable_variables
    rng = np.random.default_rng(0)
    reference = None
    for _ in range(5):
        optimizer.apply([rng.normal(size=v.shape).astype(np.float32) for v in variables], variables)
        current = [v.numpy().astype(np.float64) for v in variables]
        reference = current if reference is None else [
            momentum * r + (1 - momentum) * c for r, c in zip(reference, current)]
    for average, expected in zip(optimizer._model_variables_moving_average, reference):
        np.testing.assert_allclose(average.numpy(), expected, rtol=1e-5, atol=1e-6)


def test_auto_ema_momentum_averages_over_about_five_percent_of_the_run():
    assert auto_ema_momentum(2000) == pytest.approx(1 - 1 / 100)
    assert auto_ema_momentum(10) == pytest.approx(0.9)  # at least 10 steps
    assert auto_ema_momentum(10 ** 9) == pytest.approx(0.9999)


def test_eval_interval_keeps_evaluation_cheap():
    assert auto_eval_every(120, 480) == 1
    assert auto_eval_every(500, 10) == 1  # small validation sets: every epoch
    assert auto_eval_every(5000, 118000) == 1  # COCO: 1.4% of an epoch
    # 3000 validation images on 2000 training images: half an epoch's cost -> every 5 epochs
    assert auto_eval_every(3000, 2000) == 5
    assert math.ceil(3000 / (3 * 2000) / 0.1) == 5


def test_jit_choice():
    assert use_jit("auto", on_gpu=True) and not use_jit("auto", on_gpu=False)
    assert use_jit("on", on_gpu=False) and not use_jit("off", on_gpu=True)
    with pytest.raises(ValueError):
        use_jit("yes", on_gpu=False)


def test_dtype_policy_is_restored():
    before = keras.config.dtype_policy().name
    with dtype_policy("mixed_bfloat16"):
        layer = keras.layers.Dense(2)
        assert keras.config.dtype_policy().name == "mixed_bfloat16"
    assert layer.dtype_policy.name == "mixed_bfloat16" and layer.compute_dtype == "bfloat16"
    assert keras.config.dtype_policy().name == before
    with pytest.raises(RuntimeError):
        with dtype_policy("mixed_float16"):
            raise RuntimeError("boom")
    assert keras.config.dtype_policy().name == before
