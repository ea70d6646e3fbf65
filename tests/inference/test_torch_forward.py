"""yolo3.inference.torch_forward: a channels-first twin run as plain PyTorch calls gives the Keras
body's maps (the bodies of every layout the twin takes, and a model holding every layer kind it
maps, with the odd "same" paddings that fall back to Keras's call), follows new weights without
a rebuild, and refuses what it cannot run (bfloat16 layers, training, another backend). PyTorch
runs in a process of its own (the suite runs TensorFlow)."""
from __future__ import annotations

import importlib.util
import os
import subprocess
import sys

import keras
import pytest
from locations import REPO

SCRIPT = r"""
import numpy as np, keras
from yolo3.config.specs import get_spec
from yolo3.modeling.bodies import build_spec_body
from yolo3.modeling.graph_surgery import (channels_first_twin, copy_weights, fold_batch_norms,
                                          with_compute_dtype)
from yolo3.inference.torch_forward import TorchForward

def numpy(outputs):
    items = outputs if isinstance(outputs, (list, tuple)) else [outputs]
    return [np.asarray(keras.ops.convert_to_numpy(o)) for o in items]

def same_maps(model, forward, x):
    want, got = numpy(model(x, training=False)), numpy(forward(x))
    assert len(want) == len(got)
    for a, b in zip(want, got):
        assert a.shape == b.shape, (a.shape, b.shape)
        np.testing.assert_allclose(b, a, rtol=1e-4, atol=1e-4)
    return got

keras.utils.set_random_seed(1)
x = np.random.default_rng(2).uniform(0, 1, (2, 64, 96, 3)).astype(np.float32)
for variant, shape in (("tiny-af", (64, 96)), ("yolov3-spp", (None, None)), ("tiny", (64, 96))):
    spec = get_spec(variant)
    folded = fold_batch_norms(build_spec_body(spec, 3, spec.default_head().anchors_per_scale,
                                              shape))
    twin = channels_first_twin(folded)
    forward = TorchForward(twin)
    first = same_maps(folded, forward, x)
    for layer in folded.layers:  # new weights: copied into the twin, read on the next call
        if layer.weights:
            layer.set_weights([w * 0.5 for w in layer.get_weights()])
    copy_weights(folded, twin)
    second = same_maps(folded, forward, x)
    assert max(np.abs(a - b).max() for a, b in zip(first, second)) > 1e-3

# every layer kind it maps, "same" paddings that differ from side to side, and one it does not
# map (a sigmoid: Keras's own call)
inputs = keras.Input((None, None, 3))
a = keras.layers.ZeroPadding2D(((1, 0), (2, 1)))(inputs)
a = keras.layers.Conv2D(8, 3, strides=2, name="c_valid")(a)
a = keras.layers.LeakyReLU(0.1)(a)
b = keras.layers.Conv2D(8, 3, dilation_rate=2, padding="same", name="c_dilated")(a)
c = keras.layers.Conv2D(8, 2, padding="same", name="c_even")(a)  # pads one side more
d = keras.layers.Conv2D(8, 3, strides=2, padding="same", name="c_strided")(a)
d = keras.layers.UpSampling2D(2)(d)
e = keras.layers.Add()([b, c])
e = keras.layers.LeakyReLU(0.2)(e)
f = keras.layers.MaxPooling2D(3, strides=1, padding="same")(e)
g = keras.layers.MaxPooling2D(2, strides=2, padding="same")(f)
g = keras.layers.UpSampling2D(2)(g)
h = keras.layers.Concatenate()([e, f])
out1 = keras.layers.Activation("sigmoid")(keras.layers.Conv2D(4, 1, name="head1")(h))
out2 = keras.layers.Conv2D(5, 1, name="head2")(keras.layers.MaxPooling2D(2)(g))
model = keras.Model(inputs, [out1, out2, d])
odd = np.random.default_rng(3).uniform(-1, 1, (1, 30, 44, 3)).astype(np.float32)
forward = TorchForward(channels_first_twin(model))
same_maps(model, forward, odd)
same_maps(model, TorchForward(model), odd)  # channels-last layers: their Keras calls

for bad, match in ((lambda: TorchForward(with_compute_dtype(model, "mixed_bfloat16")),
                    "computes in bfloat16"),
                   (lambda: forward(odd, training=True), "inference")):
    try:
        bad()
    except ValueError as error:
        assert match in str(error), str(error)
    else:
        raise AssertionError(f"no ValueError ({match})")
print("ok")
"""


@pytest.mark.skipif(importlib.util.find_spec("torch") is None,
                    reason="PyTorch is not installed here (not in the test extra: 5 more minutes of "
                           "suite on CI's 2 cores); install torch to run this")
def test_plain_pytorch_calls_give_the_keras_bodys_maps():
    env = dict(os.environ, KERAS_BACKEND="torch", TF_CPP_MIN_LOG_LEVEL="3")
    proc = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True,
                          cwd=REPO, env=env, timeout=600)
    assert proc.returncode == 0 and proc.stdout.strip().endswith("ok"), (
        proc.stdout[-2000:] + proc.stderr[-3000:])


def test_another_backend_is_refused_naming_it():
    from yolo3.inference.torch_forward import TorchForward
    inputs = keras.Input((8, 8, 3))
    with pytest.raises(ValueError, match="PyTorch backend, not 'tensorflow'"):
        TorchForward(keras.Model(inputs, keras.layers.Conv2D(2, 1)(inputs)))
