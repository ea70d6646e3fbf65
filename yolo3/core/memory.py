"""How much memory this machine has free for new work, and how much a running process has used at
most: the figures behind refusing a conversion that cannot fit and behind saying what one needed.

A child's peak is read from its ``VmHWM`` while it runs, not from ``ru_maxrss`` after it ends: a
child forked from a large process counts the parent's pages until its ``exec``, so its
``ru_maxrss`` is never below the parent's size."""
from __future__ import annotations

import os
from typing import Optional

__all__ = ["available_memory", "peak_resident", "proc_field_bytes", "gigabytes"]

MEMINFO = "/proc/meminfo"
CGROUP = "/sys/fs/cgroup"


def proc_field_bytes(path: str, key: str) -> Optional[int]:
    """The ``KEY:  N kB`` line of a ``/proc`` file (``meminfo``, ``status``, ``smaps_rollup``) in
    bytes, or None where the file or the line is not there."""
    prefix = f"{key}:"
    try:
        with open(path, encoding="ascii", errors="replace") as f:
            for line in f:
                if line.startswith(prefix):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def _cgroup_room(root: str = CGROUP) -> Optional[int]:
    """Bytes left under this process's cgroup v2 memory limit (a container's), or None when it has
    none (``max``) or the files are not there."""
    try:
        with open(os.path.join(root, "memory.max"), encoding="ascii") as f:
            limit = f.read().strip()
        if limit == "max":
            return None
        with open(os.path.join(root, "memory.current"), encoding="ascii") as f:
            current = int(f.read().strip())
        return max(0, int(limit) - current)
    except (OSError, ValueError):
        return None


def available_memory(meminfo: str = MEMINFO, cgroup: str = CGROUP) -> Optional[int]:
    """Bytes new work can take now: the machine's ``MemAvailable``, or the room left under a
    container's limit where that is less. None where neither is known (not Linux)."""
    known = [v for v in (proc_field_bytes(meminfo, "MemAvailable"), _cgroup_room(cgroup))
             if v is not None]
    return min(known) if known else None


def peak_resident(pid: int, proc_root: str = "/proc") -> Optional[int]:
    """The largest resident set process ``pid`` has had since its ``exec`` (``VmHWM``), in bytes;
    None when it is gone or there is no ``/proc``."""
    return proc_field_bytes(os.path.join(proc_root, str(pid), "status"), "VmHWM")


def gigabytes(n_bytes: float) -> str:
    """``n_bytes`` as ``"2.4 GB"`` (decimal gigabytes, one decimal)."""
    return f"{n_bytes / 1e9:.1f} GB"
