"""Measuring helpers shared by the benchmark tools (``tools/benchmark_*.py``)."""
from __future__ import annotations

import time
from typing import Set


def matmul_peak_gflops(n: int = 4096, repeats: int = 5, dtype: str = "float32") -> float:
    """Achieved GFLOP/s of an ``n x n`` matrix product (2 n^3 FLOP) in ``dtype``: the machine's
    practical peak, the yardstick for convolution-heavy work."""
    import tensorflow as tf
    a = tf.cast(tf.random.normal((n, n)), dtype)
    product = tf.function(lambda x: tf.matmul(x, x))
    product(a).numpy()
    start = time.perf_counter()
    for _ in range(repeats):
        product(a).numpy()
    return repeats * 2 * n ** 3 / (time.perf_counter() - start) / 1e9


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
