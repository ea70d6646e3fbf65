"""The warm-up + cosine learning rate (yolo3.modeling.schedules.WarmupCosine) against a float64
formula written here step by step, and its serialisation."""
from __future__ import annotations

import math

import keras
import numpy as np
import pytest

from yolo3.modeling.schedules import WarmupCosine


def _reference(step: int, lr: float, total: int, warmup: int, final: float) -> float:
    if step < warmup:  # linear from lr / warmup at step 0 to lr at step warmup - 1
        return lr * (step + 1) / warmup
    progress = min(1.0, (step - warmup) / max(1, total - warmup))
    return lr * (final + (1 - final) * (1 + math.cos(math.pi * progress)) / 2)


@pytest.mark.parametrize("lr, total, warmup, final", [(3e-3, 300, 30, 0.01), (1e-2, 50, 0, 0.1),
                                                      (1e-3, 7, 7, 0.0)])
def test_every_step_matches_the_formula(lr, total, warmup, final):
    schedule = WarmupCosine(lr, total_steps=total, warmup_steps=warmup, final=final)
    steps = np.arange(0, total + 20)
    got = np.array([float(schedule(s)) for s in steps])
    want = np.array([_reference(s, lr, total, warmup, final) for s in steps])
    np.testing.assert_allclose(got, want, rtol=2e-6, atol=1e-12)
    assert got.max() <= lr * (1 + 1e-6)
    assert got[-1] == pytest.approx(lr * final, rel=1e-6, abs=1e-12)  # held after the end


def test_degenerate_lengths_are_clamped():
    schedule = WarmupCosine(1e-2, total_steps=0, warmup_steps=-5)
    assert (schedule.total_steps, schedule.warmup_steps) == (1, 0)
    assert float(schedule(0)) == pytest.approx(1e-2)


def test_serialises_and_drives_an_optimizer():
    schedule = WarmupCosine(1e-2, total_steps=100, warmup_steps=10, final=0.1)
    restored = keras.saving.deserialize_keras_object(keras.saving.serialize_keras_object(schedule))
    assert isinstance(restored, WarmupCosine) and restored.get_config() == schedule.get_config()
    optimizer = keras.optimizers.SGD(restored)
    model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(1, use_bias=False)])
    model.compile(optimizer=optimizer, loss="mse")
    kernel = model.get_weights()[0].copy()
    x, y = np.ones((4, 3), np.float32), np.zeros((4, 1), np.float32)
    model.train_on_batch(x, y)
    # one SGD step at the step-0 rate lr / warmup: w <- w - rate * d(mean (x.w)^2)/dw = 2 (x.w) x
    expected = kernel - 1e-3 * 2 * float(np.ones(3) @ kernel[:, 0]) * np.ones((3, 1))
    np.testing.assert_allclose(model.get_weights()[0], expected, rtol=1e-5)
