"""Numeric precision: the choices, and what this machine computes natively. No TensorFlow here.

bfloat16 halves the bytes moved and, on CPUs with AVX-512 BF16 or AMX (and on recent GPUs),
multiplies about twice as fast as float32; on CPUs without them (AVX2 only) oneDNN emulates it and
it is many times slower. So the hardware is read from the CPU flags, never from what TensorFlow
accepts.
"""
from __future__ import annotations

from typing import Optional, Set

from yolo3.choices import TRAINING_PRECISIONS
from yolo3.errors import ArgumentError

PRECISIONS = ("auto", "float32", "bfloat16")

__all__ = ["PRECISIONS", "cpu_flags", "has_fast_bfloat16",
           "gpu_has_bfloat16", "resolve_precision", "resolve_training_precision"]


def cpu_flags() -> Set[str]:
    """The CPU feature flags of ``/proc/cpuinfo`` (empty where there is none, e.g. macOS)."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("flags"):
                    return set(line.split(":", 1)[1].split())
    except OSError:
        pass
    return set()


def has_fast_bfloat16() -> bool:
    """Whether the CPU multiplies bfloat16 natively (AVX-512 BF16 or AMX), so that oneDNN runs
    bfloat16 convolutions faster than float32 ones. Without it bfloat16 is emulated and slower."""
    return bool({"avx512_bf16", "amx_bf16"} & cpu_flags())


def gpu_has_bfloat16() -> bool:
    """Whether TensorFlow sees a GPU that computes bfloat16 natively (NVIDIA compute capability 8.0
    or newer: A100, H100, RTX 30xx ...). Imports TensorFlow."""
    import tensorflow as tf
    for gpu in tf.config.list_physical_devices("GPU"):
        capability = tf.config.experimental.get_device_details(gpu).get("compute_capability")
        if capability and tuple(capability) >= (8, 0):
            return True
    return False


def _tensorflow_sees_a_gpu() -> bool:
    import tensorflow as tf
    return bool(tf.config.list_physical_devices("GPU"))


def resolve_precision(precision: str, gpu: Optional[bool] = None) -> str:
    """``float32`` or ``bfloat16`` for a requested precision: ``auto`` is bfloat16 where the hardware
    computes it natively (a GPU that does, or a CPU with AVX-512 BF16 / AMX), float32 elsewhere (on
    an AVX2-only CPU bfloat16 is emulated and many times slower). ``gpu``: whether inference runs
    on a GPU (default: whether TensorFlow sees one)."""
    if precision not in PRECISIONS:
        raise ArgumentError(f"precision must be one of {PRECISIONS}, got {precision!r}")
    if precision != "auto":
        return precision
    if gpu is None:
        gpu = _tensorflow_sees_a_gpu()
    if gpu:
        return "bfloat16" if gpu_has_bfloat16() else "float32"
    return "bfloat16" if has_fast_bfloat16() else "float32"


def resolve_training_precision(precision: str, gpu: Optional[bool] = None) -> str:
    """The Keras dtype policy for training: ``float32``, ``mixed_bfloat16`` or ``mixed_float16``.

    ``auto``: on GPUs, ``mixed_bfloat16`` where they compute bfloat16 natively, else
    ``mixed_float16`` (Keras adds loss scaling); on CPUs, ``mixed_bfloat16`` only with AVX-512 BF16
    or AMX, else ``float32`` (emulated bfloat16 made a YOLOv3-416 training step 13x slower).
    ``gpu``: whether training runs on GPUs (default: whether TensorFlow sees one).
    """
    if precision not in TRAINING_PRECISIONS:
        raise ArgumentError(f"precision must be one of {TRAINING_PRECISIONS}, got {precision!r}")
    if precision != "auto":
        return precision
    if gpu is None:
        gpu = _tensorflow_sees_a_gpu()
    if gpu:
        return "mixed_bfloat16" if gpu_has_bfloat16() else "mixed_float16"
    return "mixed_bfloat16" if has_fast_bfloat16() else "float32"
