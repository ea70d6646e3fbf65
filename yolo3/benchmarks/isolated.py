"""Timing contenders each in a fresh process, interleaved over rounds.

Two runtimes in one process disturb each other (their thread pools spin after their work, their
weights evict each other's from the caches); a user runs one of them. So each contender is timed in
its own process (:func:`run_child`), and the contenders take turns over ``rounds`` so that slow
drifts of the machine hit all of them alike (:func:`interleaved`). Medians are reported.
"""
from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time
from typing import Callable, Dict, List, Optional, Tuple

from yolo3.core.errors import CommandFailed

_MARK = "@@YOLO3-BENCHMARK@@"

__all__ = ["run_child", "start_child", "child_result", "timed_runs", "interleaved", "median"]


def timed_runs(fn: Callable[[], object], runs: int, warmup: int) -> List[float]:
    """Milliseconds of ``runs`` calls of ``fn`` after ``warmup`` calls."""
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        times.append((time.perf_counter() - start) * 1000.0)
    return times


def start_child(target: str, payload: dict, env: Optional[Dict[str, str]] = None
                ) -> subprocess.Popen:
    """``module:function(payload)`` started in a fresh Python process (``env`` added to this
    one's); :func:`child_result` waits for what it returns. Several may run at once."""
    module, function = target.split(":")
    code = (f"import json, sys\nfrom {module} import {function}\n"
            f"print({_MARK!r} + json.dumps({function}(json.loads(sys.argv[1]))))\n")
    full = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", **(env or {}))
    proc = subprocess.Popen([sys.executable, "-c", code, json.dumps(payload)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=full)
    proc.target = target  # type: ignore[attr-defined]
    return proc


def child_result(proc: subprocess.Popen, timeout: float = 1800) -> dict:
    """The dict a :func:`start_child` process returned; CommandFailed with the end of its
    stderr when it failed (or ran past ``timeout`` seconds: it is killed)."""
    try:
        stdout, stderr = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        stdout, stderr = proc.communicate()
    for line in reversed(stdout.splitlines()):
        if line.startswith(_MARK) and proc.returncode == 0:
            return json.loads(line[len(_MARK):])
    raise CommandFailed(f"benchmark child {getattr(proc, 'target', '?')} failed "
                        f"({proc.returncode}):\n{stderr[-3000:]}")


def run_child(target: str, payload: dict, timeout: float = 1800) -> dict:
    """``module:function(payload)`` in a fresh Python process; returns the dict it returns."""
    return child_result(start_child(target, payload), timeout)


def interleaved(contenders: Dict[str, Tuple[str, dict]], rounds: int = 2) -> Dict[str, List[float]]:
    """``{name: all times (ms)}``: each contender ``(target, payload)`` run in its own process,
    ``rounds`` times in turn. A child returns ``{"times": [...]}`` (anything else it returns is
    not kept)."""
    times: Dict[str, List[float]] = {name: [] for name in contenders}
    for _ in range(max(1, rounds)):
        for name, (target, payload) in contenders.items():
            times[name] += run_child(target, payload)["times"]
    return times


def median(values: List[float]) -> float:
    return statistics.median(values)
