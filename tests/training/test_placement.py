"""yolo3.training.placement: replicas and the global batch, the steps per epoch, the training
precision and XLA on this machine."""
from __future__ import annotations

import dataclasses

import pytest

from yolo3.config.train_config import ConfigError
from yolo3.training.placement import (
    on_gpu,
    pick_strategy,
    sharing,
    training_precision,
    use_xla,
)


def test_one_device_takes_the_whole_batch_and_a_pass_over_the_data(step_config):
    placement = pick_strategy(step_config(batch_size=2), 9)
    assert (placement.replicas, placement.global_batch, placement.steps) == (1, 2, 4)
    assert placement.strategy is None
    assert not placement.uses_wrapper and placement.describe("wrapper") == "one device"
    assert pick_strategy(step_config(batch_size=2, steps_per_epoch=7), 9).steps == 7
    with placement.scope():  # no strategy: a scope that does nothing
        pass


def test_fewer_images_than_one_global_batch_are_refused_naming_the_batch(step_config):
    with pytest.raises(ConfigError, match="fewer than one global batch") as caught:
        pick_strategy(step_config(batch_size=16), 9)
    assert caught.value.settings == ("batch_size",)


def test_two_replicas_use_the_wrapper_and_never_xla(step_config):
    two = dataclasses.replace(pick_strategy(step_config(), 9), devices=["/cpu:0", "/cpu:1"],
                              replicas=2)
    assert two.uses_wrapper and two.describe("wrapper") == "wrapper"
    assert use_xla(step_config(jit="on"), two) is False  # the wrapper keeps its placement
    assert use_xla(step_config(jit="on"), pick_strategy(step_config(), 9)) is True
    assert use_xla(step_config(jit="off"), pick_strategy(step_config(), 9)) is False


def test_cpu_replicas_never_count_as_gpus_and_a_named_precision_is_kept(step_config):
    config = step_config(cpu_replicas=2, precision="auto")
    assert on_gpu(config) is False
    assert training_precision(config) in ("float32", "mixed_bfloat16")
    assert training_precision(step_config(precision="float32")) == "float32"
    assert training_precision(step_config(precision="mixed_float16")) == "mixed_float16"


def test_one_process_shares_nothing(step_config):
    assert sharing(pick_strategy(step_config(), 9)) is None


@pytest.mark.parametrize("settings, named", [
    (dict(cpu_replicas=2), ("cpu_replicas",)), (dict(gpus=2), ("gpus",)),
    (dict(strategy="mirrored"), ("strategy",)),
    (dict(gpus=2, strategy="multiworker"), ("gpus", "strategy"))])
def test_replicas_on_pytorch_are_refused_naming_the_settings(step_config, monkeypatch,
                                                            settings, named):
    import keras
    monkeypatch.setattr(keras.backend, "backend", lambda: "torch")
    with pytest.raises(ConfigError, match="on the torch backend it trains on one device") as caught:
        pick_strategy(step_config(**settings), 9)
    assert caught.value.settings == named


@pytest.mark.parametrize("strategy", ["mirrored", "multiworker"])
def test_tf_distribute_on_jax_is_refused_naming_the_strategy(step_config, monkeypatch, strategy):
    import keras
    monkeypatch.setattr(keras.backend, "backend", lambda: "jax")
    with pytest.raises(ConfigError, match=f"strategy {strategy}: tf.distribute runs on "
                                          "TensorFlow") as caught:
        pick_strategy(step_config(strategy=strategy), 9)
    assert caught.value.settings == ("strategy",)


def test_replicas_on_jax_are_checked_against_the_devices_jax_sees(step_config, monkeypatch):
    """This process's JAX has one CPU device: two replicas are refused with JAX's advice (the
    wrapper training through them: tests/features/test_backends.py)."""
    import keras
    pytest.importorskip("jax")
    monkeypatch.setattr(keras.backend, "backend", lambda: "jax")
    with pytest.raises(ConfigError, match="cpu_replicas 2: .*xla_force_host_platform_device_count"
                       ) as caught:
        pick_strategy(step_config(cpu_replicas=2), 9)
    assert caught.value.settings == ("cpu_replicas",)
    with pytest.raises(ConfigError, match="either gpus or cpu_replicas"):
        pick_strategy(step_config(cpu_replicas=2, gpus=2), 9)


def test_one_device_off_tensorflow_is_placed_as_on_tensorflow(step_config, monkeypatch):
    import keras
    monkeypatch.setattr(keras.backend, "backend", lambda: "torch")
    placement = pick_strategy(step_config(batch_size=2, cpu_replicas=1), 9)
    assert (placement.replicas, placement.global_batch, placement.strategy) == (1, 2, None)


@pytest.mark.parametrize("backend, jit, expected", [
    ("jax", "auto", True), ("jax", "on", True), ("jax", "off", False),
    ("torch", "auto", False), ("torch", "on", True)])
def test_jax_compiles_its_step_unless_told_not_to(step_config, monkeypatch, backend, jit,
                                                  expected):
    """JAX without XLA runs a step op by op (many times slower); PyTorch compiles only when asked
    (torch.compile)."""
    import keras
    monkeypatch.setattr(keras.backend, "backend", lambda: backend)
    config = step_config(jit=jit)
    assert use_xla(config, pick_strategy(config, 9)) is expected
