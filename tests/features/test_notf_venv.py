"""A real virtual environment without TensorFlow (Keras, JAX, NumPy, OpenCV, Pillow, tqdm, PyYAML,
tensorboard and matplotlib, at this environment's versions; yolo3 installed without its dependencies), built
once by the test set-up: a missing import that only an install shows is what users hit. There
``yolo3 synth``, ``train`` (fed by the NumPy pipeline), ``detect`` and ``evaluate`` run end to end.
``YOLO3_NOTF_VENV`` names the folder (default ``.venv-notf`` in the repository, rebuilt when
``setup.py`` changes)."""
from __future__ import annotations

import importlib.metadata
import os
import subprocess
import venv
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
# what a JAX user installs beside yolo3 --no-deps (setup.py's core list, TensorFlow left out)
PACKAGES = ("keras", "jax", "jaxlib", "numpy", "pillow", "opencv-python", "tqdm", "pyyaml",
            "tensorboard", "matplotlib")


def _pinned(name: str) -> str:
    try:
        return f"{name}=={importlib.metadata.version(name)}"
    except importlib.metadata.PackageNotFoundError:
        return name


@pytest.fixture(scope="module")
def notf_python() -> Path:
    folder = Path(os.environ.get("YOLO3_NOTF_VENV", REPO / ".venv-notf"))
    python = folder / "bin" / "python"
    stamp = folder / ".yolo3-installed"
    if not (stamp.exists() and stamp.stat().st_mtime >= (REPO / "setup.py").stat().st_mtime):
        venv.create(folder, with_pip=True, clear=True)
        pip = [str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check"]
        done = subprocess.run([*pip, *map(_pinned, PACKAGES)], capture_output=True, text=True,
                              timeout=1800)
        assert done.returncode == 0, done.stderr[-3000:]
        done = subprocess.run([*pip, "--no-deps", "-e", str(REPO)], capture_output=True,
                              text=True, timeout=600)
        assert done.returncode == 0, done.stderr[-3000:]
        stamp.touch()
    return python


def _run(python: Path, *argv: str, cwd: Path) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env.update(KERAS_BACKEND="jax", TF_CPP_MIN_LOG_LEVEL="3")
    return subprocess.run([str(python), *argv], capture_output=True, text=True, cwd=cwd,
                          env=env, timeout=900)


@pytest.mark.slow  # CI runs it (.ci/run): the first build downloads JAX and Keras, then ~1 min
def test_a_jax_install_without_tensorflow_trains_and_detects(notf_python, tmp_path):
    probe = _run(notf_python, "-c", "import tensorflow", cwd=tmp_path)
    assert probe.returncode != 0 and "No module named 'tensorflow'" in probe.stderr
    assert _run(notf_python, "-c", "import yolo3, sys; assert 'tensorflow' not in sys.modules",
                cwd=tmp_path).returncode == 0
    made = _run(notf_python, "-m", "yolo3", "synth", "--out", "data", "--num-images", "24",
                "--size", "96", "--seed", "1", cwd=tmp_path)
    assert made.returncode == 0, made.stderr[-3000:]
    data = tmp_path / "data"
    trained = _run(notf_python, "-m", "yolo3", "train", "--annotations",
                   str(data / "annotations.txt"), "--classes", str(data / "classes.txt"),
                   "--variant", "tiny-af", "--input-size", "64", "--batch-size", "4",
                   "--epochs", "1", "--val-split", "0.25", "--output", "run", cwd=tmp_path)
    said = trained.stdout + trained.stderr
    assert trained.returncode == 0, said[-3000:]
    assert "input pipeline: NumPy/OpenCV" in said
    detected = _run(notf_python, "-m", "yolo3", "detect", "--model", "run/final.keras",
                    "--input", str(data / "images"), "--output", "det", cwd=tmp_path)
    assert detected.returncode == 0, detected.stderr[-3000:]
    evaluated = _run(notf_python, "-m", "yolo3", "evaluate", "--model", "run/final.keras",
                     "--annotations", str(data / "annotations.txt"), "--out", "ev.json",
                     cwd=tmp_path)
    assert evaluated.returncode == 0, evaluated.stderr[-3000:]
    assert (tmp_path / "ev.json").exists()
