"""One model on every Keras backend (issue 47): one training step of each head (the anchor head of
tiny YOLOv3, the anchor-free head of tiny-af) gives the same loss and gradients on TensorFlow, JAX
and, where it is installed, PyTorch (tests/backend_step.py, run in a process of its own per
backend, float32).

Held to: the loss within 1e-5 relative; the loss's gradient with respect to the raw maps (its own
arithmetic: boxes, assignment, terms) within 1e-5 of the largest; the gradient of every weight of
the body within 1e-4 of its largest. The last is float32's spread through twenty convolutions,
whose libraries sum in different orders: TensorFlow against itself with oneDNN off differs by
1.8e-5 on these gradients (2026-11-26, Zen 5), JAX and PyTorch by 2.6e-5 to 2.9e-5."""
from __future__ import annotations

import importlib.util
import os
import subprocess
import sys

import numpy as np
import pytest

from locations import REPO, TESTS


@pytest.fixture(scope="module")
def steps(tmp_path_factory):
    """``{backend: {key: array}}`` of every installed backend: TensorFlow in this process (the
    suite's backend), the others each in a process of its own (TensorFlow and JAX are the test
    extra's; PyTorch only where installed)."""
    import keras

    import backend_step
    out = tmp_path_factory.mktemp("backends")
    policy = keras.config.dtype_policy()
    try:
        results = {"tensorflow": backend_step.results()}
    finally:
        keras.config.set_dtype_policy(policy)
    for backend, package in (("jax", "jax"), ("torch", "torch")):
        if importlib.util.find_spec(package) is None:
            continue
        path = out / f"{backend}.npz"
        env = dict(os.environ, KERAS_BACKEND=backend, TF_CPP_MIN_LOG_LEVEL="3")
        proc = subprocess.run([sys.executable, str(TESTS / "backend_step.py"), str(path)],
                              capture_output=True, text=True, cwd=REPO, env=env, timeout=600)
        assert proc.returncode == 0, f"{backend}: {proc.stderr[-3000:]}"
        with np.load(path) as data:
            results[backend] = {k: data[k] for k in data.files}
    return results


def _relative(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.abs(a - b).max() / max(np.abs(a).max(), 1e-12))


def _compare(steps, backend: str) -> None:
    if backend not in steps:
        pytest.skip(f"{backend} is not installed here (PyTorch is not in the test extra: its "
                    "wheels pull gigabytes of CUDA libraries; install torch to run this)")
    reference, other = steps["tensorflow"], steps[backend]
    assert set(reference) == set(other)
    for key in sorted(reference):
        error = _relative(reference[key], other[key])
        limit = 1e-4 if "|step|" in key and not key.endswith("|loss") else 1e-5
        assert error <= limit, f"{backend} {key}: {error:.2e} relative (limit {limit:g})"


def test_jax_gives_tensorflows_loss_and_gradients(steps):
    assert "jax" in steps, "JAX is in the test extra: pip install -e '.[test]'"
    _compare(steps, "jax")


def test_pytorch_gives_tensorflows_loss_and_gradients(steps):
    _compare(steps, "torch")


def test_the_comparison_has_every_weight_of_both_heads(steps):
    keys = steps["tensorflow"]
    for variant in ("tiny", "tiny-af"):
        weights = [k for k in keys if k.startswith(f"{variant}|step|") and "kernel" in k]
        assert len(weights) >= 13, (variant, len(weights))  # every convolution of the body
        assert np.isfinite(keys[f"{variant}|step|loss"]) and keys[f"{variant}|step|loss"] > 0
