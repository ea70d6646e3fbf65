"""``python -m yolo3``: the same command line as ``yolo3``, exit codes included."""
from __future__ import annotations

import subprocess
import sys

from conftest import REPO_ROOT


def _run(*args):
    return subprocess.run([sys.executable, "-m", "yolo3", *args], cwd=REPO_ROOT, capture_output=True,
                          text=True, timeout=120)


def test_python_m_yolo3_lists_the_commands():
    done = _run("--help")
    assert done.returncode == 0, done.stderr
    for command in ("train", "detect", "convert", "evaluate", "export", "benchmark"):
        assert command in done.stdout


def test_python_m_yolo3_passes_arguments_and_exit_codes_on(tmp_path):
    done = _run("synth", "--out", str(tmp_path / "s"), "--num-images", "2", "--size", "64",
                "--quiet")
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "s" / "annotations.txt").read_text().count("\n") == 2
    bad = _run("synth", "--out", str(tmp_path / "s" / "annotations.txt"), "--num-images", "1")
    assert bad.returncode == 2 and "expected a folder to write" in bad.stderr
    assert "Traceback" not in bad.stderr
