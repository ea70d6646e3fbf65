"""Numeric precision: the choices, and what this machine computes natively. No TensorFlow here.

bfloat16 halves the bytes moved and, on CPUs with AVX-512 BF16 or AMX (and on recent GPUs),
multiplies about twice as fast as float32; on CPUs without them (AVX2 only) oneDNN emulates it and
it is many times slower. So the hardware is read from the CPU flags, never from what TensorFlow
accepts.
"""
from __future__ import annotations

from typing import Set

PRECISIONS = ("float32", "bfloat16")

__all__ = ["PRECISIONS", "cpu_flags", "has_fast_bfloat16"]


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
