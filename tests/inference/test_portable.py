"""yolo3.inference.portable: the detector's compiled call on JAX (a subprocess: the suite runs
TensorFlow) computes the body's output, compiles once, and takes changed weights without
compiling again; on TensorFlow it is refused (the detector compiles a tf.function there)."""
from __future__ import annotations

import importlib.util
import os
import subprocess
import sys

import pytest
from locations import REPO

SCRIPT = r"""
import numpy as np, keras
from yolo3.inference.portable import compiled_call
inputs = keras.Input((8, 8, 3))
body = keras.Model(inputs, [keras.layers.Conv2D(4, 3, padding="same", name="c")(inputs),
                            keras.layers.Conv2D(2, 1, dtype="bfloat16", name="d")(inputs)])
traces = []
def after(maps, scale):
    traces.append(1)
    assert all(m.dtype == "float32" for m in maps)
    return maps[0] * scale
run = compiled_call(body, after)
x = np.random.default_rng(0).uniform(0, 1, (2, 8, 8, 3)).astype("float32")
first = np.asarray(run(x, np.float32(2.0)))
np.testing.assert_allclose(first, 2 * np.asarray(body(x)[0]), rtol=1e-5, atol=1e-6)
kernel, bias = body.get_layer("c").get_weights()
body.get_layer("c").set_weights([kernel * 3, bias + 1])
second = np.asarray(run(x, np.float32(2.0)))
np.testing.assert_allclose(second, 2 * np.asarray(body(x)[0]), rtol=1e-5, atol=1e-6)
assert np.abs(second - first).max() > 0.1
assert len(traces) == 1, traces
print("ok")
"""


@pytest.mark.skipif(importlib.util.find_spec("jax") is None, reason="JAX is in the test extra")
def test_compiled_once_on_jax_and_takes_new_weights():
    env = dict(os.environ, KERAS_BACKEND="jax", TF_CPP_MIN_LOG_LEVEL="3")
    proc = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True,
                          cwd=REPO, env=env, timeout=300)
    assert proc.returncode == 0 and proc.stdout.strip().endswith("ok"), proc.stderr[-3000:]


def test_tensorflow_is_refused_naming_its_own_path():
    from yolo3.inference.portable import compiled_call, float_maps
    with pytest.raises(ValueError, match="tf.function"):
        compiled_call(None, lambda maps: maps)
    import keras
    import numpy as np
    maps = float_maps(np.ones((1, 2, 2, 3), np.float16))
    assert len(maps) == 1 and keras.backend.standardize_dtype(maps[0].dtype) == "float32"
