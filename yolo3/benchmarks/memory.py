"""Running a command and measuring what it costs: wall time and the peak resident memory of the
command together with every process it starts (``yolo3 export --onnx`` runs its converter in a
child: the machine must hold both at once).

Two figures, sampled every ``interval`` seconds from Linux ``/proc``: the largest single process's
peak resident set (its ``VmHWM``, what ``/usr/bin/time`` reports for a command started from a
shell; the kernel keeps it, so no sample misses it but the last ``interval`` of a process), and the
peak of the whole tree together: the sum of each process's proportional set (PSS: a library both
map, such as TensorFlow's, counted once), never less than the first figure.
"""
from __future__ import annotations

import dataclasses
import os
import subprocess
import threading
import time
from typing import Dict, List, Optional, Sequence

from yolo3.core.memory import peak_resident, proc_field_bytes

__all__ = ["Measured", "run_measured", "tree_memory"]

PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


@dataclasses.dataclass
class Measured:
    """What :func:`run_measured` saw: the exit code, wall seconds, the largest process's peak
    resident bytes and the tree's peak together (module docstring; None where the platform tells
    neither), and the command's standard output and error."""
    returncode: int
    seconds: float
    largest_bytes: Optional[int]
    peak_bytes: Optional[int]
    stdout: str
    stderr: str


def _children(proc_root: str) -> Dict[int, List[int]]:
    """``{parent pid: [child pids]}`` of every process in ``proc_root``."""
    tree: Dict[int, List[int]] = {}
    for name in os.listdir(proc_root):
        if not name.isdigit():
            continue
        try:
            with open(os.path.join(proc_root, name, "stat"), encoding="ascii", errors="replace") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:  # gone meanwhile
            continue
        tree.setdefault(int(fields[1]), []).append(int(name))
    return tree


def _process_bytes(folder: str) -> int:
    """One process's proportional set (``Pss`` of ``smaps_rollup``), or its resident set (``statm``)
    where the kernel has no rollup."""
    pss = proc_field_bytes(os.path.join(folder, "smaps_rollup"), "Pss")
    if pss is not None:
        return pss
    with open(os.path.join(folder, "statm"), encoding="ascii") as f:
        return int(f.read().split()[1]) * PAGE


def _tree(pid: int, proc_root: str) -> List[int]:
    """``pid`` and all its descendants now."""
    tree, found, todo = _children(proc_root), [], [pid]
    while todo:
        current = todo.pop()
        found.append(current)
        todo.extend(tree.get(current, []))
    return found


def _summed(pids: Sequence[int], proc_root: str) -> int:
    """Bytes the processes ``pids`` hold now, summed (PSS, see :func:`_process_bytes`)."""
    total = 0
    for pid in pids:
        try:
            total += _process_bytes(os.path.join(proc_root, str(pid)))
        except (OSError, ValueError, IndexError):  # gone meanwhile
            continue
    return total


def tree_memory(pid: int, proc_root: str = "/proc") -> Optional[int]:
    """Bytes ``pid`` and all its descendants hold now, summed (PSS, see :func:`_process_bytes`);
    None where there is no ``/proc``."""
    if not os.path.isdir(proc_root):
        return None
    return _summed(_tree(pid, proc_root), proc_root)


def run_measured(command: Sequence[str], env: Optional[Dict[str, str]] = None,
                 interval: float = 0.05, timeout: Optional[float] = None) -> Measured:
    """Run ``command`` to its end; its time, peak memory (module docstring) and output. A command
    past ``timeout`` seconds is killed (returncode -9)."""
    start = time.perf_counter()
    proc = subprocess.Popen(list(command), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env=env, text=True, errors="replace")
    together, largest = [0], [0]
    done = threading.Event()

    def sample() -> None:  # one walk of the tree per sample: its sum and each one's peak
        while os.path.isdir("/proc") and not done.wait(interval):
            pids = _tree(proc.pid, "/proc")
            together[0] = max(together[0], _summed(pids, "/proc"))
            largest[0] = max([largest[0], *[peak_resident(p) or 0 for p in pids]])
    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    try:
        try:
            out, err = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            out, err = proc.communicate()
    finally:
        done.set()
        sampler.join()
    seconds = time.perf_counter() - start
    single = largest[0] or None
    peak = max(together[0], largest[0]) or None
    return Measured(proc.returncode, seconds, single, peak, out or "", err or "")
