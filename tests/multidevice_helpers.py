"""Run Python code in a fresh interpreter that has N logical CPU devices, and get JSON back.

Logical devices must be configured before TensorFlow initialises, so multi-device tests cannot run in
the pytest process. The snippet runs after ``import tensorflow as tf`` and the device setup; it reports
by assigning a JSON-serialisable value to ``result``.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any, Dict, Optional

REPO_ROOT = Path(__file__).resolve().parent.parent
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
