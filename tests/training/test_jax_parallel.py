"""The loss-summing wrapper's contract on JAX (Keras's distribution API): on 2 and 3 logical CPU
devices the template's loss and gradients equal one device's, and one SGD step through the wrapper
changes the template's weights (and moving statistics) as one device does
(tests/jax_wrapper_step.py, in a process of its own: the device count is set before JAX starts)."""
from __future__ import annotations

import importlib.util
import os
import subprocess
import sys

import numpy as np
import pytest
from locations import REPO, TESTS

pytestmark = pytest.mark.skipif(importlib.util.find_spec("jax") is None,
                                reason="JAX is in the test extra: pip install -e '.[test]'")


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    path = tmp_path_factory.mktemp("jax_wrapper") / "runs.npz"
    env = dict(os.environ, KERAS_BACKEND="jax", TF_CPP_MIN_LOG_LEVEL="3",
               XLA_FLAGS="--xla_force_host_platform_device_count=3")
    proc = subprocess.run([sys.executable, str(TESTS / "jax_wrapper_step.py"), str(path)],
                          capture_output=True, text=True, cwd=REPO, env=env, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    with np.load(path) as data:
        return {k: data[k] for k in data.files}


def _relative(a, b) -> float:
    return float(np.abs(a - b).max() / max(np.abs(a).max(), 1e-12))


@pytest.mark.parametrize("devices, name", [(2, "two"), (3, "three")])
def test_the_wrapper_equals_one_device(runs, devices, name):
    assert int(runs[f"{name}|spanned"]) == devices  # the batch really was split
    assert _relative(runs["one|loss"], runs[f"{name}|loss"]) <= 1e-5
    assert _relative(runs["one|step_loss"], runs[f"{name}|step_loss"]) <= 1e-5
    grads = [k.split("|")[1] for k in runs if k.startswith("one|grad")]
    changes = [k.split("|")[1] for k in runs if k.startswith("one|change")]
    assert len(grads) >= 20 and len(changes) > len(grads)  # every weight, statistics too
    for key in grads:
        assert _relative(runs[f"one|{key}"], runs[f"{name}|{key}"]) <= 1e-5, key
    for key in changes:  # a difference of two float32 weights: 1e-4 of the step
        assert np.abs(runs[f"one|{key}"]).max() > 0, f"{key}: the step changed nothing"
        assert _relative(runs[f"one|{key}"], runs[f"{name}|{key}"]) <= 1e-4, key


def test_uneven_batches_and_unknown_devices_are_refused_with_the_reason():
    from yolo3.training.jax_parallel import check_global_batch, jax_devices
    check_global_batch(12, 3)
    with pytest.raises(ValueError, match="16 images cannot be split evenly over 3 devices"):
        check_global_batch(16, 3)
    with pytest.raises(ValueError, match="do not exist.*xla_force_host_platform_device_count"):
        jax_devices(devices=["/cpu:0", "/cpu:7"])
    with pytest.raises(ValueError, match="repeated device"):
        jax_devices(devices=["/cpu:0", "cpu:0"])
    with pytest.raises(ValueError, match="expected e.g."):
        jax_devices(devices=["cpu0", "cpu:1"])
    with pytest.raises(ValueError, match="gpus >= 2"):
        jax_devices(gpus=1)
