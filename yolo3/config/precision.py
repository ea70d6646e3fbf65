"""Numeric precision: the choices, and what this machine computes natively. No TensorFlow here.

bfloat16 halves the bytes moved and, with AMX or on AMD's AVX-512 BF16 (and on recent GPUs),
multiplies about twice as fast as float32; on CPUs without bfloat16 instructions (AVX2 only) oneDNN
emulates it and it is many times slower, and on Intel's AVX-512 BF16 without AMX it is native but
slower than float32 (measured: 0.61x-0.73x). So the hardware is read from the CPU's vendor and
flags, never from what TensorFlow accepts.
"""
from __future__ import annotations

from typing import List, Optional, Set, Tuple

from yolo3.config.choices import TRAINING_PRECISIONS
from yolo3.core.errors import ArgumentError

PRECISIONS = ("auto", "float32", "bfloat16")

__all__ = ["PRECISIONS", "cpuinfo_field", "cpu_flags", "cpu_vendor", "has_fast_bfloat16",
           "bfloat16_support", "gpu_has_bfloat16", "resolve_precision",
           "resolve_training_precision"]


def cpuinfo_field(name: str) -> str:
    """The value of the first ``name`` line of ``/proc/cpuinfo`` ("" where there is none, e.g.
    macOS)."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                key, sep, value = line.partition(":")
                if sep and key.strip() == name:
                    return value.strip()
    except OSError:
        pass
    return ""


def cpu_flags() -> Set[str]:
    """The CPU feature flags of ``/proc/cpuinfo`` (empty where there is none, e.g. macOS)."""
    return set(cpuinfo_field("flags").split())


def cpu_vendor() -> str:
    """The CPU's ``vendor_id`` (``GenuineIntel``, ``AuthenticAMD``; "" where unknown)."""
    return cpuinfo_field("vendor_id")


def bfloat16_support() -> str:
    """How this CPU computes bfloat16: ``"amx"`` (AMX tiles), ``"avx512_bf16"`` (AVX-512 BF16 dot
    products) or ``"emulated"`` (neither: oneDNN converts to float32)."""
    flags = cpu_flags()
    if "amx_bf16" in flags:
        return "amx"
    return "avx512_bf16" if "avx512_bf16" in flags else "emulated"


def has_fast_bfloat16() -> bool:
    """Whether oneDNN runs bfloat16 convolutions faster than float32 ones on this CPU: with AMX, or
    with AVX-512 BF16 on AMD (Zen 4 runs 512-bit float32 multiply-adds at half rate, and its
    bfloat16 dot products double that: training 1.76x float32). Intel's AVX-512 BF16 without AMX
    (Cooper Lake, or a guest whose hypervisor hides AMX) already runs float32 at full rate, so
    bfloat16 gains nothing and its conversions cost (training 0.61x-0.73x float32 on such a Xeon);
    emulated bfloat16 is many times slower."""
    support = bfloat16_support()
    return support == "amx" or (support == "avx512_bf16" and cpu_vendor() == "AuthenticAMD")


def gpu_capabilities() -> List[Tuple[int, int]]:
    """The CUDA compute capability of each GPU the Keras backend sees (TensorFlow's, JAX's or
    PyTorch's; ``KERAS_BACKEND``), ``(major, minor)``; ``(0, 0)`` where the backend does not say.
    Imports the backend."""
    import keras
    backend = keras.backend.backend()
    if backend == "jax":
        import jax
        return [_capability(getattr(d, "compute_capability", None))
                for d in jax.devices() if d.platform == "gpu"]
    if backend == "torch":
        import torch
        return [tuple(torch.cuda.get_device_capability(i))
                for i in range(torch.cuda.device_count())] if torch.cuda.is_available() else []
    import tensorflow as tf
    return [_capability(tf.config.experimental.get_device_details(gpu).get("compute_capability"))
            for gpu in tf.config.list_physical_devices("GPU")]


def _capability(value) -> Tuple[int, int]:
    """``(8, 0)``, ``"8.0"`` or None -> ``(major, minor)`` (None: ``(0, 0)``)."""
    if value is None:
        return (0, 0)
    if isinstance(value, str):
        major, _, minor = value.partition(".")
        return (int(major or 0), int(minor or 0))
    return (int(value[0]), int(value[1]))


def gpu_has_bfloat16() -> bool:
    """Whether the backend sees a GPU that computes bfloat16 natively (NVIDIA compute capability
    8.0 or newer: A100, H100, RTX 30xx ...). Imports the backend."""
    return any(capability >= (8, 0) for capability in gpu_capabilities())


def _backend_sees_a_gpu() -> bool:
    """Whether the Keras backend sees a GPU."""
    return bool(gpu_capabilities())


def _onednn_backend() -> bool:
    """Whether CPU convolutions run through oneDNN (TensorFlow's; the fast bfloat16 rule above is
    oneDNN's). JAX's XLA and PyTorch on a CPU: float32 (``auto`` is not measured there)."""
    import keras
    return keras.backend.backend() == "tensorflow"


def resolve_precision(precision: str, gpu: Optional[bool] = None) -> str:
    """``float32`` or ``bfloat16`` for a requested precision: ``auto`` is bfloat16 where the hardware
    computes it faster (a GPU that computes it natively, or a CPU with AMX or AMD's AVX-512 BF16:
    :func:`has_fast_bfloat16`), float32 elsewhere (on an AVX2-only CPU bfloat16 is emulated and many
    times slower; on Intel's AVX-512 BF16 without AMX it is native but slower; on JAX's and
    PyTorch's CPUs float32: :func:`_onednn_backend`). ``gpu``: whether
    inference runs on a GPU (default: whether the Keras backend sees one)."""
    if precision not in PRECISIONS:
        raise ArgumentError(f"precision must be one of {PRECISIONS}, got {precision!r}")
    if precision != "auto":
        return precision
    if gpu is None:
        gpu = _backend_sees_a_gpu()
    if gpu:
        return "bfloat16" if gpu_has_bfloat16() else "float32"
    return "bfloat16" if has_fast_bfloat16() and _onednn_backend() else "float32"


def resolve_training_precision(precision: str, gpu: Optional[bool] = None) -> str:
    """The Keras dtype policy for training: ``float32``, ``mixed_bfloat16`` or ``mixed_float16``.

    ``auto``: on GPUs, ``mixed_bfloat16`` where they compute bfloat16 natively, else
    ``mixed_float16`` (Keras adds loss scaling); on CPUs, ``mixed_bfloat16`` only where bfloat16 is
    faster (:func:`has_fast_bfloat16`: AMX, AMD's AVX-512 BF16), else ``float32`` (emulated bfloat16
    made a YOLOv3-416 training step 13x slower; Intel's AVX-512 BF16 without AMX 1.6x slower).
    ``gpu``: whether training runs on GPUs (default: whether the Keras backend sees one).
    """
    if precision not in TRAINING_PRECISIONS:
        raise ArgumentError(f"precision must be one of {TRAINING_PRECISIONS}, got {precision!r}")
    if precision != "auto":
        return precision
    if gpu is None:
        gpu = _backend_sees_a_gpu()
    if gpu:
        return "mixed_bfloat16" if gpu_has_bfloat16() else "mixed_float16"
    return "mixed_bfloat16" if has_fast_bfloat16() and _onednn_backend() else "float32"
