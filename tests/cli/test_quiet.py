"""A quiet start (yolo3.cli.quiet): TensorFlow's start-up notices stay off the terminal unless
--verbose or --debug; its real warnings and errors still reach the user."""
from __future__ import annotations

import os
import subprocess
import sys

from locations import REPO

from yolo3.cli.quiet import start_up_lines_kept

START = [
    "WARNING: All log messages before absl::InitializeLog() is called are written to STDERR",
    "I0000 00:00:1795714460.472182    5340 port.cc:153] oneDNN custom operations are on.",
    "I0000 00:00:1795714460.472537    5340 cudart_stub.cc:31] Could not find cuda drivers on your "
    "machine, GPU will not be used.",
    "I0000 00:00:1795714460.516075    5340 cpu_feature_guard.cc:227] This TensorFlow binary is "
    "optimized to use available CPU instructions in performance-critical operations.",
    "To enable the following instructions: AVX2 AVX512F FMA, in other operations, rebuild "
    "TensorFlow with the appropriate compiler flags.",
    "E0000 00:00:1795714463.353819    5340 cuda_platform.cc:52] failed call to cuInit: INTERNAL: "
    "CUDA error: Failed call to cuInit: UNKNOWN ERROR (303)",
]


def test_the_notices_go_and_everything_else_stays():
    assert start_up_lines_kept(START) == []
    real = ["W0000 00:00:1.0 123 op_kernel.cc:1] something real went wrong",
            "E0000 00:00:1.0 123 session.cc:1] an error", "a Python warning line"]
    assert start_up_lines_kept(START + real) == real
    # with CUDA drivers, a failed cuInit is a real error
    with_driver = [line for line in START if "Could not find cuda drivers" not in line]
    assert start_up_lines_kept(with_driver) == [START[-1]]


def _yolo3(cache, *args) -> subprocess.CompletedProcess:
    """``python -m yolo3 ARGS`` with its own user cache (so that it decodes the images itself)."""
    env = dict(os.environ, YOLO3_CACHE_DIR=str(cache))
    return subprocess.run([sys.executable, "-m", "yolo3", *map(str, args)], capture_output=True,
                          text=True, cwd=REPO, timeout=300, env=env)


def test_a_command_that_loads_tensorflow_starts_quietly_unless_verbose(tmp_path):
    from yolo3.data.synthetic import make_synthetic_dataset
    annotations, classes = make_synthetic_dataset(str(tmp_path / "set"), 2, (64, 64))
    argv = ["check", "--annotations", annotations, "--classes", classes]  # decodes: TensorFlow
    quiet = _yolo3(tmp_path / "cache1", *argv)
    assert quiet.returncode == 0, quiet.stderr[-2000:]
    assert "images: 2" in quiet.stdout
    assert not any(p in quiet.stderr for p in ("absl::InitializeLog", "I0000", "cpu_feature_guard",
                                               "To enable the following")), quiet.stderr[-2000:]
    bare = subprocess.run([sys.executable, "-c", "import tensorflow"], capture_output=True,
                          text=True, cwd=REPO, timeout=300)
    loud = _yolo3(tmp_path / "cache2", *argv, "--verbose")
    assert loud.returncode == 0
    if "absl::InitializeLog" in bare.stderr:  # where TensorFlow announces itself, --verbose shows it
        assert "absl::InitializeLog" in loud.stderr
