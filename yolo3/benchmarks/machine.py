"""What the benchmarks measure against: the machine's float32 matmul peak, its CPU and flags."""
from __future__ import annotations

import platform
import time

from yolo3.config import precision
from yolo3.config.precision import cpu_flags, has_fast_bfloat16  # re-exported
from yolo3.core.cpus import usable_cores
from yolo3.core.extras import installed

__all__ = ["matmul_peak_gflops", "cpu_model", "machine_line", "bfloat16_text", "cpu_flags",
           "has_fast_bfloat16", "cores", "SHOWN_FLAGS"]

SHOWN_FLAGS = ("avx2", "avx_vnni", "avx512f", "avx512_vnni", "avx512_bf16", "amx_bf16", "amx_tile")


def matmul_peak_gflops(n: int = 4096, repeats: int = 5, dtype: str = "float32") -> float:
    """Achieved GFLOP/s of an ``n x n`` matrix product (2 n^3 FLOP) in ``dtype``: the machine's
    practical peak, the yardstick for convolution-heavy work. TensorFlow's (oneDNN) where it
    is installed, else NumPy's BLAS (float32)."""
    if not installed("tensorflow"):
        import numpy as np
        a = np.random.default_rng(0).standard_normal((n, n)).astype(np.float32)
        a @ a
        start = time.perf_counter()
        for _ in range(repeats):
            a @ a
        return repeats * 2 * n ** 3 / (time.perf_counter() - start) / 1e9
    import tensorflow as tf
    a = tf.cast(tf.random.normal((n, n)), dtype)
    product = tf.function(lambda x: tf.matmul(x, x))
    product(a).numpy()
    start = time.perf_counter()
    for _ in range(repeats):
        product(a).numpy()
    return repeats * 2 * n ** 3 / (time.perf_counter() - start) / 1e9


def cpu_model() -> str:
    """The CPU model name of ``/proc/cpuinfo`` (else the platform's processor string)."""
    return precision.cpuinfo_field("model name") or platform.processor() or "unknown CPU"


def cores() -> int:
    """The cores the benchmark may use (:func:`yolo3.core.cpus.usable_cores`)."""
    return usable_cores()


def machine_line(peak_gflops: float) -> str:
    """One line naming the machine: CPU, cores, the SIMD flags that matter, bfloat16 support, the
    float32 matmul peak, and the GPUs when there are any (TensorFlow's view where it is
    installed, else the Keras backend's)."""
    flags = precision.cpu_flags()
    shown = [f for f in SHOWN_FLAGS if f in flags]
    if installed("tensorflow"):
        import tensorflow as tf
        names = [tf.config.experimental.get_device_details(g).get("device_name", g.name)
                 for g in tf.config.list_physical_devices("GPU")]
        software = f"TF {tf.__version__}"
    else:
        import keras
        names = [f"GPU (compute capability {major}.{minor})"
                 for major, minor in precision.gpu_capabilities()]
        software = f"Keras {keras.__version__} on {keras.backend.backend()}, no TensorFlow"
    gpu = f"; GPU: {', '.join(names)}" if names else ""
    flags_text = " ".join(shown) if shown else "none of " + ", ".join(SHOWN_FLAGS)
    return (f"machine: {cpu_model()}, {cores()} cores; CPU flags: {flags_text}; bfloat16 "
            f"{bfloat16_text()}; "
            f"float32 matmul peak {peak_gflops:.1f} GFLOP/s; {software}{gpu}")


def bfloat16_text() -> str:
    """What the machine line says of bfloat16 (``auto`` trains and detects in it only when fast)."""
    support = precision.bfloat16_support()
    if support == "emulated":
        return "emulated (no AVX-512 BF16 / AMX)"
    if precision.has_fast_bfloat16():
        return "native"
    return f"native but slower than float32 ({precision.cpu_vendor()} {support} without AMX)"
