"""Run Python code in a fresh interpreter that has N logical CPU devices, and get JSON back.

Logical devices must be configured before TensorFlow initialises, so multi-device tests cannot run in
the pytest process. The snippet runs after ``import tensorflow as tf`` and the device setup; it reports
by assigning a JSON-serialisable value to ``result``.
"""
from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from locations import REPO as REPO_ROOT

_MARKER = "@@MULTIDEVICE-RESULT@@"

_PRELUDE = """\
import os, json, sys
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
import tensorflow as tf
_cpu = tf.config.list_physical_devices("CPU")[0]
tf.config.set_logical_device_configuration(_cpu, [tf.config.LogicalDeviceConfiguration()] * {n})
result = None
"""

_EPILOGUE = """
print({marker!r} + json.dumps(result))
"""


def run_with_devices(num_devices: int, code: str, timeout: float = 300,
                     env: Optional[Dict[str, str]] = None, cwd: Optional[Path] = None) -> Any:
    """Run ``code`` in a subprocess with ``num_devices`` logical CPUs; return its ``result`` value.

    Raises ``RuntimeError`` with the subprocess output when it fails or reports nothing.
    """
    script = (_PRELUDE.format(n=int(num_devices)) + textwrap.dedent(code)
              + _EPILOGUE.format(marker=_MARKER))
    full_env = dict(os.environ)
    full_env["TF_CPP_MIN_LOG_LEVEL"] = "2"
    full_env["PYTHONPATH"] = os.pathsep.join([str(REPO_ROOT), full_env.get("PYTHONPATH", "")])
    full_env.update(env or {})
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=timeout, env=full_env, cwd=str(cwd or REPO_ROOT))
    for line in reversed(proc.stdout.splitlines()):
        if line.startswith(_MARKER):
            if proc.returncode != 0:
                break
            return json.loads(line[len(_MARKER):])
    raise RuntimeError(f"multi-device snippet failed (exit {proc.returncode}):\n"
                       f"--- stdout ---\n{proc.stdout[-4000:]}\n--- stderr ---\n{proc.stderr[-6000:]}")


def free_ports(n: int) -> List[int]:
    """``n`` distinct TCP ports that were free on 127.0.0.1 a moment ago."""
    socks = []
    try:
        for _ in range(n):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.bind(("127.0.0.1", 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def tf_config(ports: Sequence[int], index: int) -> str:
    """``TF_CONFIG`` for worker ``index`` of a cluster of workers on 127.0.0.1:``ports``."""
    return json.dumps({"cluster": {"worker": [f"127.0.0.1:{p}" for p in ports]},
                       "task": {"type": "worker", "index": index}})


def run_cluster(argv_for: Callable[[int], List[str]], num_workers: int = 2, timeout: float = 240,
                extra: Sequence[List[str]] = ()) -> List[Tuple[int, str]]:
    """Run ``argv_for(i)`` as worker ``i`` of a local cluster (``TF_CONFIG`` set), plus ``extra``
    commands without ``TF_CONFIG``, all at once; return ``(exit code, output)`` per process.

    Every process is killed when ``timeout`` seconds have passed or anything goes wrong, so a stuck
    collective cannot hang the test run; a timeout raises ``TimeoutError`` with the outputs so far.
    """
    ports = free_ports(num_workers)
    base = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2",
                PYTHONPATH=os.pathsep.join([str(REPO_ROOT), os.environ.get("PYTHONPATH", "")]))
    base.pop("TF_CONFIG", None)
    jobs = [(argv_for(i), dict(base, TF_CONFIG=tf_config(ports, i))) for i in range(num_workers)]
    jobs += [(list(argv), dict(base)) for argv in extra]
    logs = [tempfile.TemporaryFile("w+") for _ in jobs]
    procs: List[subprocess.Popen] = []
    try:
        for (argv, env), log in zip(jobs, logs):
            procs.append(subprocess.Popen(argv, env=env, cwd=str(REPO_ROOT), stdout=log,
                                          stderr=subprocess.STDOUT, text=True))
        deadline = time.monotonic() + timeout
        for p in procs:
            p.wait(timeout=max(1.0, deadline - time.monotonic()))
    except subprocess.TimeoutExpired as e:
        raise TimeoutError(f"cluster still running after {timeout} s:\n" + _outputs(logs)) from e
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    return [(p.returncode, _read(log)) for p, log in zip(procs, logs)]


def _read(log) -> str:
    log.seek(0)
    text = log.read()
    log.close()
    return text


def _outputs(logs) -> str:
    parts = []
    for i, log in enumerate(logs):
        log.seek(0)
        parts.append(f"--- process {i} ---\n{log.read()[-3000:]}")
    return "\n".join(parts)


def snippet_argv(code: str, num_devices: int = 1) -> List[str]:
    """A command running ``code`` like :func:`run_with_devices` does (read it with :func:`result_of`)."""
    script = (_PRELUDE.format(n=int(num_devices)) + textwrap.dedent(code)
              + _EPILOGUE.format(marker=_MARKER))
    return [sys.executable, "-c", script]


def result_of(returncode: int, output: str) -> Any:
    """The ``result`` a snippet printed; ``RuntimeError`` with its output when it failed."""
    for line in reversed(output.splitlines()):
        if line.startswith(_MARKER) and returncode == 0:
            return json.loads(line[len(_MARKER):])
    raise RuntimeError(f"snippet failed (exit {returncode}):\n{output[-6000:]}")
