"""Every ``auto`` choice, asserted under each CPU the project's machines come with (simulated flags,
see cpu_profiles.py), so that the suite checks the same rules on every machine.

The ``auto`` choices: the detector's precision (detect, evaluate, the API), the training dtype
policy, XLA for the training step, and what the benchmarks' machine line reports. Tests that
compare numbers exactly pin ``float32`` instead (never ``auto``).
"""
from __future__ import annotations

import pytest
from cpu_profiles import PROFILES

from yolo3.config import precision as precision_module
from yolo3.core.errors import ArgumentError
from yolo3.training.recipe import use_jit

CPUS = sorted(PROFILES)


@pytest.fixture(params=CPUS)
def cpu(request, monkeypatch):
    """Simulate one CPU: its flags, and no GPU."""
    profile = PROFILES[request.param]
    monkeypatch.setattr(precision_module, "cpu_flags", lambda: set(profile.flags))
    monkeypatch.setattr(precision_module, "cpu_vendor", lambda: profile.vendor)
    monkeypatch.setattr(precision_module, "_backend_sees_a_gpu", lambda: False)
    return profile


def test_profiles_are_the_cpus_named_in_the_guide():
    assert not PROFILES["zen3"].flags & {"avx512f", "avx512_bf16", "amx_bf16"}
    assert {"avx2", "fma"} <= PROFILES["zen3"].flags
    assert {"avx512f", "avx512_bf16"} <= PROFILES["zen4"].flags
    assert not {"amx_bf16", "amx_tile"} & PROFILES["zen4"].flags
    assert {"avx512_bf16", "avx_vnni"} <= PROFILES["zen5"].flags
    assert not {"amx_bf16", "amx_tile", "avx512_fp16"} & PROFILES["zen5"].flags
    assert {"avx512_bf16", "amx_bf16", "amx_tile", "amx_int8"} <= PROFILES["sapphire_rapids"].flags
    assert {"avx512_bf16", "avx512_fp16"} <= PROFILES["intel_no_amx"].flags
    assert not {"amx_bf16", "amx_tile"} & PROFILES["intel_no_amx"].flags
    assert {p.vendor for p in PROFILES.values()} == {"AuthenticAMD", "GenuineIntel"}


def test_fast_bfloat16_is_read_from_the_vendor_and_flags(cpu):
    assert precision_module.has_fast_bfloat16() is cpu.fast_bfloat16
    expected = "amx" if cpu.amx else "avx512_bf16" if cpu.native_bfloat16 else "emulated"
    assert precision_module.bfloat16_support() == expected


def test_auto_inference_precision(cpu):
    expected = "bfloat16" if cpu.fast_bfloat16 else "float32"
    assert precision_module.resolve_precision("auto") == expected
    assert precision_module.resolve_precision("auto", gpu=False) == expected
    for pinned in ("float32", "bfloat16"):
        assert precision_module.resolve_precision(pinned) == pinned
    with pytest.raises(ArgumentError, match="precision must be one of"):
        precision_module.resolve_precision("float16")


def test_auto_training_precision(cpu):
    expected = "mixed_bfloat16" if cpu.fast_bfloat16 else "float32"
    assert precision_module.resolve_training_precision("auto") == expected
    assert precision_module.resolve_training_precision("auto", gpu=False) == expected
    for pinned in ("float32", "mixed_bfloat16", "mixed_float16"):
        assert precision_module.resolve_training_precision(pinned) == pinned
    with pytest.raises(ArgumentError, match="precision must be one of"):
        precision_module.resolve_training_precision("bfloat16")


@pytest.mark.parametrize("gpu_bf16, inference, training", [
    (True, "bfloat16", "mixed_bfloat16"),  # Ampere or newer, whatever the host CPU
    (False, "float32", "mixed_float16"),  # older GPUs: float16 with loss scaling for training
])
def test_auto_on_a_gpu_ignores_the_cpu(cpu, monkeypatch, gpu_bf16, inference, training):
    monkeypatch.setattr(precision_module, "gpu_has_bfloat16", lambda: gpu_bf16)
    assert precision_module.resolve_precision("auto", gpu=True) == inference
    assert precision_module.resolve_training_precision("auto", gpu=True) == training


def test_auto_xla_is_off_on_every_cpu(cpu):
    assert use_jit("auto", on_gpu=False) is False
    assert use_jit("auto", on_gpu=True) is True
    assert use_jit("on", on_gpu=False) is True and use_jit("off", on_gpu=True) is False


def test_training_config_auto_resolves_per_cpu(cpu, tmp_path):
    """What ``yolo3 train`` with default flags trains in, on CPU replicas and on one CPU device."""
    from yolo3.config.train_config import TrainConfig
    from yolo3.training.placement import training_precision
    expected = "mixed_bfloat16" if cpu.fast_bfloat16 else "float32"
    base = dict(annotations="a.txt", classes="c.txt", output=str(tmp_path))
    assert training_precision(TrainConfig(**base)) == expected
    assert training_precision(TrainConfig(cpu_replicas=2, **base)) == expected
    assert training_precision(TrainConfig(precision="float32", **base)) == "float32"


def test_detector_auto_computes_in_the_chosen_dtype(cpu):
    import keras

    from yolo3.checkpoint.metadata import ModelInfo
    from yolo3.config.specs import get_spec
    from yolo3.inference.detector import YOLO
    from yolo3.modeling.bodies import build_body
    spec = get_spec("tiny")
    body = build_body("tiny", 2, input_shape=(64, 64))
    info = ModelInfo(spec.default_anchors(), spec.default_masks(), 2, ["a", "b"], spec.name, (64, 64))
    detector = YOLO.from_body(body, info)
    expected = "bfloat16" if cpu.fast_bfloat16 else "float32"
    assert detector.precision == expected
    dtypes = {layer.compute_dtype for layer in detector.inference_body.layers
              if isinstance(layer, keras.layers.Conv2D)}
    assert dtypes == {expected}


def test_machine_line_names_the_bfloat16_support(cpu):
    from yolo3.benchmarks.machine import machine_line
    line = machine_line(100.0)
    assert ("bfloat16 native" in line) is cpu.native_bfloat16
    assert ("bfloat16 native;" in line) is cpu.fast_bfloat16
    assert ("slower than float32 (GenuineIntel avx512_bf16 without AMX)" in line) is (
        cpu.native_bfloat16 and not cpu.fast_bfloat16)
    assert ("amx_bf16" in line) is cpu.amx
    assert "avx2" in line and "100.0 GFLOP/s" in line


def test_this_machine_trains_auto_in_a_precision_it_computes_natively_and_fast():
    chosen = precision_module.resolve_training_precision("auto", gpu=False)
    flags = precision_module.cpu_flags()
    fast = "amx_bf16" in flags or ("avx512_bf16" in flags
                                   and precision_module.cpu_vendor() == "AuthenticAMD")
    assert chosen == ("mixed_bfloat16" if fast else "float32")
