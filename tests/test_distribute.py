"""Strategy selection, and MirroredStrategy over 2 logical CPUs gives the 1-device gradient step."""
from __future__ import annotations

import pytest

from multidevice_helpers import run_with_devices
from yolo3.distribute import STRATEGIES, is_chief, make_strategy, num_workers


def test_make_strategy_choices(monkeypatch):
    assert make_strategy("wrapper") is None
    with pytest.raises(ValueError, match="unknown strategy"):
        make_strategy("horovod")
    monkeypatch.delenv("TF_CONFIG", raising=False)
    with pytest.raises(ValueError, match="TF_CONFIG"):
        make_strategy("multiworker")
    assert STRATEGIES == ("wrapper", "mirrored", "multiworker")


def test_chief_and_worker_count(monkeypatch):
    monkeypatch.setenv("TF_CONFIG", '{"cluster": {"worker": ["a:1", "b:2"]}, '
                                    '"task": {"type": "worker", "index": 1}}')
    assert num_workers() == 2 and not is_chief()
    monkeypatch.setenv("TF_CONFIG", '{"cluster": {"worker": ["a:1", "b:2"]}, '
                                    '"task": {"type": "worker", "index": 0}}')
    assert is_chief()


_MIRRORED = """
import numpy as np, keras
from yolo3.model import build_body
from yolo3.loss import yolo_training_model, identity_loss
from yolo3.anchors import default_anchors
from yolo3.targets import preprocess_true_boxes
anchors = default_anchors("tiny")
rng = np.random.default_rng(0)
x = rng.uniform(0, 1, (4, 64, 64, 3)).astype("float32")
boxes = np.zeros((4, 2, 5), "float32"); boxes[:, 0] = [8, 8, 40, 30, 1]
ys = [y.astype("float32") for y in preprocess_true_boxes(boxes, (64, 64), anchors, 2)]
def one_step(strategy):
    with strategy.scope():
        keras.utils.set_random_seed(1)
        body = build_body("tiny", 2, input_shape=(64, 64))
        for l in body.layers:
            if isinstance(l, keras.layers.BatchNormalization):
                l.trainable = False  # inference-mode BN: replicas see the same statistics
        model = yolo_training_model(body, anchors, 2)
        model.compile(keras.optimizers.SGD(1e-3), loss=identity_loss, jit_compile=False)
    before = [w.numpy() for w in model.trainable_weights]
    ds = tf.data.Dataset.from_tensors(((x, *ys), np.zeros(4, "float32")))
    model.fit(ds, epochs=1, verbose=0)
    return [b - w.numpy() for b, w in zip(before, model.trainable_weights)]
single = one_step(tf.distribute.OneDeviceStrategy("/cpu:0"))
mirrored = one_step(tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"]))
rel = max(float(np.linalg.norm(a - b) / max(np.linalg.norm(a), 1e-12)) for a, b in zip(single, mirrored))
result = {"rel": rel, "norm": float(sum(np.linalg.norm(a) for a in single))}
"""


def test_mirrored_two_replicas_match_single_device_update():
    r = run_with_devices(2, _MIRRORED)
    assert r["norm"] > 0
    assert r["rel"] <= 1e-4, r  # an N-times gradient bug would give rel ~ 1
