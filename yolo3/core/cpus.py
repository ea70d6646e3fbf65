"""How many CPU cores this process may use: the one count behind the data workers' default, the
CPU-replica limit and the benchmarks' per-core figures."""
from __future__ import annotations

import os

__all__ = ["usable_cores"]


def usable_cores() -> int:
    """The cores this process may run on (its CPU affinity, which a container or ``taskset``
    narrows; the machine's count where the platform has no affinity), at least 1."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not on Linux
        return max(1, os.cpu_count() or 1)
