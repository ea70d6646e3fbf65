"""Model files written by yolo3 before its renovation into folders (tests/fixtures/release_0_2, made
by its make.py at commit fef8968, when every module lay flat in yolo3/) load unchanged and compute what
they computed then: every Keras object yolo3 registers (FoldedBatchNorm, YoloLoss, identity_loss,
WarmupCosine, AnchorFreeLoss) is found under its registered name wherever its module now lives."""
from __future__ import annotations

import keras
import numpy as np
import pytest
from locations import FIXTURES

from yolo3.checkpoint.saving import load_keras_model

DATA = FIXTURES / "release_0_2"


@pytest.fixture(scope="module")
def expected():
    with np.load(DATA / "expected.npz") as data:
        return {k: data[k] for k in data.files}


def test_a_body_with_its_facts_loads_and_computes_the_same(expected):
    body, info = load_keras_model(DATA / "body.keras")
    assert info.class_names == ["cat", "dog"] and info.masks == [[2, 3], [0, 1]]
    assert info.input_size == (64, 64)
    out = body(expected["image"])
    np.testing.assert_allclose(out[0], expected["out_s32"], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(out[1], expected["out_s16"], rtol=1e-5, atol=1e-6)
    assert any(type(layer).__name__ == "FoldedBatchNorm" for layer in body.layers)


def test_a_compiled_training_model_loads_with_its_loss_and_schedule(expected):
    import yolo3.checkpoint.saving  # noqa: F401 - registers yolo3's Keras objects
    model = keras.models.load_model(DATA / "training.keras")
    loss = model([expected["image"], expected["y_true_s32"], expected["y_true_s16"],
                  expected["true_boxes"]])
    np.testing.assert_allclose(loss, expected["loss"], rtol=1e-5)
    schedule = keras.optimizers.schedules.deserialize(
        model.optimizer.get_config()["learning_rate"])
    assert type(schedule).__name__ == "WarmupCosine"
    np.testing.assert_allclose(float(schedule(50)), float(expected["lr_at_50"]), rtol=1e-6)
    assert model.loss.__name__ == "identity_loss"


def test_an_anchor_free_training_model_loads_and_computes_the_same(expected):
    import yolo3.checkpoint.saving  # noqa: F401 - registers yolo3's Keras objects
    model = keras.models.load_model(DATA / "anchor_free_training.keras", compile=False)
    loss = model([expected["raw_s32"], expected["raw_s16"], expected["true_boxes"]])
    np.testing.assert_allclose(loss, expected["anchor_free_loss"], rtol=1e-5)
