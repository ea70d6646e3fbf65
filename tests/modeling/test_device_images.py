"""yolo3.modeling.device_images: the canvases read from the images kept on the device equal the
float64 canvas of the draws alone (tests/window_reference.py), wherever in the buffer an image
lies (past 2**24 pixels too, where a float32 position is no longer whole); the model ``fit``
runs shares the template's variables, the buffer is never one of them; JAX compiles it too."""
from __future__ import annotations

import os
import subprocess
import sys

import keras
import numpy as np
import pytest
from locations import REPO, TESTS
from window_reference import canvas_from_draws

from yolo3.data.image_ops import mosaic_regions
from yolo3.data.planner import AugmentDraw
from yolo3.data.window_pack import image_plan
from yolo3.modeling.device_images import DeviceImages, with_device_images

H, W = 48, 64
FAR = 2 ** 24 + 3  # the last image's first pixel: past float32's whole numbers


def kept_batch(seed: int = 0, far: int = FAR, hw=(H, W)):
    """A buffer of five noise images (the last from pixel ``far``), a batch of three elements
    (a single image, two mosaics) on ``hw`` canvases as the host sends it, and each element's
    float64 canvas."""
    H, W = hw
    rng = np.random.default_rng(seed)
    images = [rng.integers(0, 256, (*rng.integers(20, 90, 2), 3), dtype=np.uint8)
              for _ in range(5)]
    starts = [0]
    for image in images[:-1]:
        starts.append(starts[-1] + image.shape[0] * image.shape[1])
    starts[-1] = max(far, starts[-1])
    buffer = np.zeros((starts[-1] + images[-1].shape[0] * images[-1].shape[1], 3), np.uint8)
    for image, start in zip(images, starts):
        buffer[start:start + image.shape[0] * image.shape[1]] = image.reshape(-1, 3)
    plans, firsts, colours, wants = [], [], [], []
    for b in range(3):
        picks = [4, 0, 1, 2] if b else [4]
        split = (int(rng.integers(1, H)), int(rng.integers(1, W))) if b else (H, W)
        regions = mosaic_regions(split, (H, W)) if b else [(0, H, 0, W)]
        draws = [AugmentDraw((int(rng.integers(20, 120)), int(rng.integers(20, 120))),
                             (int(rng.integers(-20, H)), int(rng.integers(-20, W))),
                             bool(rng.integers(2)), 0.0, 1.0, 1.0) for _ in picks]
        plan = np.zeros((4, 11), np.float32)
        first = np.zeros(4, np.int32)
        for k, (i, draw, region) in enumerate(zip(picks, draws, regions)):
            plan[k] = image_plan(images[i], draw, (H, W), region, 0)
            first[k] = starts[i]
        plans.append(plan)
        firsts.append(first)
        colours.append([*split] + [0.0, 1.0, 1.0] * 4)
        wants.append(canvas_from_draws([(images[i], d) for i, d in zip(picks, draws)], regions,
                                       (H, W)))
    return (buffer, np.zeros((3, H, W, 0), np.uint8), np.array(plans), np.array(firsts),
            np.array(colours, np.float32), np.array(wants))


def _close(got, want) -> None:
    diff = np.abs(np.asarray(got) - np.round(want))
    assert diff.max() <= 1 and (diff == 0).mean() > 0.995, (diff.max(), (diff == 0).mean())


def test_the_canvases_are_the_draws_read_from_the_kept_images():
    buffer, canvas, plans, firsts, colours, want = kept_batch()
    got = DeviceImages(buffer)(canvas, plans, firsts, colours)
    assert got.shape == (3, H, W, 3)
    _close(got, want)


def test_the_model_fit_runs_shares_the_templates_variables_not_the_buffer():
    buffer, canvas, plans, firsts, colours, want = kept_batch(1, far=0)
    image = keras.Input((H, W, 3))
    template = keras.Model(image, keras.layers.Dense(2)(image))
    kept = DeviceImages(buffer)
    fed = with_device_images(template, kept)
    assert [v.path for v in fed.trainable_variables] == [v.path for v in
                                                          template.trainable_variables]
    assert template.non_trainable_variables == [] and len(fed.non_trainable_variables) == 1
    assert fed.non_trainable_variables[0].dtype == "uint8"
    got = fed.predict([canvas, plans, firsts, colours], verbose=0, batch_size=3)
    np.testing.assert_allclose(got, template.predict(np.round(want) / 255.0, verbose=0),
                               atol=0.05)  # a level or two apart at ties
    again = with_device_images(template, kept)  # a later stage: the same buffer
    assert again.non_trainable_variables[0] is fed.non_trainable_variables[0]
    assert '"pixels": %d' % len(buffer) in fed.to_json()  # described, e.g. for TensorBoard
    with pytest.raises(ValueError, match="not saved with a model"):
        DeviceImages.from_config(kept.get_config())


def test_a_buffer_that_is_not_uint8_rgb_is_refused():
    with pytest.raises(ValueError, match=r"uint8 \(pixels, 3\), got float32 \(4, 3\)"):
        DeviceImages(np.zeros((4, 3), np.float32))
    with pytest.raises(ValueError, match=r"got uint8 \(4, 4\)"):
        DeviceImages(np.zeros((4, 4), np.uint8))


@pytest.mark.skipif(sys.platform == "win32", reason="the child's environment")
def test_jax_compiles_it_to_the_same_canvases(tmp_path):
    """The suite runs TensorFlow; JAX, in a process of its own, compiles the layer (XLA) and
    reads the same canvases, at each size the batches give (multi-scale: one model)."""
    code = ("import sys, numpy as np, keras; sys.path[:0] = sys.argv[1:];"
            "import test_device_images as t;"
            "ins = [keras.Input((None, None, 0), dtype='uint8'), keras.Input((4, 11)),"
            " keras.Input((4,), dtype='int32'), keras.Input((14,))];"
            "b, c, p, f, col, want = t.kept_batch();"
            "m = keras.Model(ins, t.DeviceImages(b)(*ins));"
            "t._close(m.predict([c, p, f, col], verbose=0, batch_size=3), want);"
            "b2, c, p, f, col, want = t.kept_batch(hw=(32, 96));"
            "assert (b2 == b).all();"  # the same buffer: the same model
            "t._close(m.predict([c, p, f, col], verbose=0, batch_size=3), want); print('ok')")
    env = dict(os.environ, KERAS_BACKEND="jax", TF_CPP_MIN_LOG_LEVEL="3")
    done = subprocess.run([sys.executable, "-c", code, str(TESTS / "modeling"), str(TESTS)],
                          capture_output=True, text=True, cwd=REPO, env=env, timeout=300)
    assert done.returncode == 0 and done.stdout.strip().endswith("ok"), done.stderr[-3000:]
