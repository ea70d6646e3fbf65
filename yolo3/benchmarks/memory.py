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

from yolo3.core.memory import peak_resident

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
    try:
        with open(os.path.join(folder, "smaps_rollup"), encoding="ascii") as f:
            for line in f:
                if line.startswith("Pss:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
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


def tree_memory(pid: int, proc_root: str = "/proc") -> Optional[int]:
    """Bytes ``pid`` and all its descendants hold now, summed (PSS, see :func:`_process_bytes`);
    None where there is no ``/proc``."""
    if not os.path.isdir(proc_root):
        return None
    total = 0
    for current in _tree(pid, proc_root):
        try:
            total += _process_bytes(os.path.join(proc_root, str(current)))
        except (OSError, ValueError, IndexError):  # gone meanwhile
            continue
    return total


def run_measured(command: Sequence[str], env: Optional[Dict[str, str]] = None,
                 interval: float = 0.05, timeout: Optional[float] = None) -> Measured:
    """Run ``command`` to its end; its time, peak memory (module docstring) and output. A command
    past ``timeout`` seconds is killed (returncode -9)."""
    start = time.perf_counter()
    proc = subprocess.Popen(list(command), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env=env, text=True, errors="replace")
    together, largest = [0], [0]
    done = threading.Event()

    def sample() -> None:
        while not done.wait(interval):
            if not os.path.isdir("/proc"):
                return
            pids = _tree(proc.pid, "/proc")
            together[0] = max(together[0], tree_memory(proc.pid) or 0)
            largest[0] = max([largest[0], *[peak_resident(p) or 0 for p in pids]])
    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    output: Dict[str, str] = {}

    def drain(name: str, stream) -> None:
        output[name] = stream.read()
    readers = [threading.Thread(target=drain, args=(n, s), daemon=True)
               for n, s in (("out", proc.stdout), ("err", proc.stderr))]
    for r in readers:
        r.start()
    timer = threading.Timer(timeout, proc.kill) if timeout else None
    if timer:
        timer.start()
    try:
        proc.wait()
    finally:
        if timer:
            timer.cancel()
        done.set()
        sampler.join()
        for r in readers:
            r.join()
    seconds = time.perf_counter() - start
    single = largest[0] or None
    peak = max(together[0], largest[0]) or None
    return Measured(proc.returncode, seconds, single, peak, output.get("out", ""),
                    output.get("err", ""))
