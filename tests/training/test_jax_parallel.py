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


def test_replica_batch_norm_equals_each_slice_alone_averaged_by_hand(runs, count=2):
    """replica_batch_norm: the step's loss, weights and moving statistics equal each slice's own
    step on one device, averaged by hand (one flat all-reduce must not mix up any leaf)."""
    mine, hand = f"replica{count}", f"slices{count}"
    assert _relative(runs[f"{hand}|step_loss"], runs[f"{mine}|step_loss"]) <= 1e-5
    changes = [k.split("|")[1] for k in runs if k.startswith(f"{hand}|change")]
    assert len(changes) >= 20
    for key in changes:
        assert np.abs(runs[f"{hand}|{key}"]).max() > 0, f"{key}: the step changed nothing"
        assert _relative(runs[f"{hand}|{key}"], runs[f"{mine}|{key}"]) <= 1e-4, key
    # and it is not the global batch's statistics (the check above can tell the two apart)
    assert _relative(runs["one|step_loss"], runs[f"{mine}|step_loss"]) > 1e-4


def test_replica_batch_norm_leaves_frozen_layers_bit_for_bit_on_three_devices(runs):
    """A frozen layer's weights and statistics are not a mean of three equal copies (which can
    round off the last bit): the step averages changes, and theirs is zero."""
    frozen = [k.split("|")[1] for k in runs if k.startswith("frozen3|frozen") and runs[k]]
    assert len(frozen) >= 8
    for key in frozen:
        change = runs[f"frozen3|change{key[len('frozen'):]}"]
        assert not np.any(change), f"{key}: a frozen weight moved"
    trained = [k for k in runs if k.startswith("frozen3|change")
               and not runs[k.replace("|change", "|frozen")]]
    assert any(np.abs(runs[k]).max() > 0 for k in trained)  # the rest did train


def test_replica_mean_averages_every_leaf_in_one_all_reduce_per_dtype():
    """replica_mean on 1 device: every leaf back in its shape and dtype, unchanged; the
    collective count read from the lowered program."""
    import jax
    import jax.numpy as jnp
    from jax.sharding import Mesh, PartitionSpec

    from yolo3.training.jax_parallel import replica_mean
    tree = {"a": jnp.arange(6.0).reshape(2, 3), "b": [jnp.ones((4,)), jnp.float32(2.5)],
            "n": jnp.int32(7)}
    mesh = Mesh(np.array(jax.devices()[:1]), ("batch",))
    run = jax.jit(jax.shard_map(lambda t: replica_mean(t, "batch"), mesh=mesh,
                                in_specs=PartitionSpec(), out_specs=PartitionSpec(),
                                check_vma=False))
    out = run(tree)
    assert jax.tree_util.tree_structure(out) == jax.tree_util.tree_structure(tree)
    for got, want in zip(jax.tree_util.tree_leaves(out), jax.tree_util.tree_leaves(tree)):
        assert got.shape == want.shape and got.dtype == want.dtype
        np.testing.assert_array_equal(np.asarray(got), np.asarray(want))
    text = run.lower(tree).as_text()
    # the three float leaves in one all-reduce, the integer one in its own (pmax)
    assert text.count("all_reduce") == 2, text[-2000:]
