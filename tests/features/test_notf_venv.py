"""A real virtual environment without TensorFlow (Keras, JAX, NumPy, OpenCV, Pillow, tqdm, PyYAML,
tensorboard and matplotlib, at this environment's versions; yolo3 installed without its dependencies), built
once by the test set-up: a missing import that only an install shows is what users hit. There
``yolo3 synth``, ``train`` (fed by the NumPy pipeline; resumed; on two CPU replicas),
``evaluate``, ``detect`` and ``check`` run end to end, and ``export`` says it needs TensorFlow.
``YOLO3_NOTF_VENV`` names the folder (default ``.venv-notf`` in the repository, rebuilt when
``setup.py`` changes)."""
from __future__ import annotations

import csv
import importlib.metadata
import json
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


@pytest.mark.slow  # CI runs it (.ci/run): the first build downloads JAX and Keras, then ~2 min
def test_a_jax_install_without_tensorflow_runs_the_commands_end_to_end(notf_python, tmp_path):
    """synth, train (two stages, then --resume, then two CPU replicas), evaluate, detect and
    check work there, fed by the NumPy pipeline; TensorBoard's logs are written without
    tf.summary; what needs TensorFlow (an ONNX export) says so in one line, exit 2."""
    def yolo3(*argv: str) -> subprocess.CompletedProcess:
        return _run(notf_python, "-m", "yolo3", *argv, cwd=tmp_path)

    probe = _run(notf_python, "-c", "import tensorflow", cwd=tmp_path)
    assert probe.returncode != 0 and "No module named 'tensorflow'" in probe.stderr
    assert _run(notf_python, "-c", "import yolo3, sys; assert 'tensorflow' not in sys.modules",
                cwd=tmp_path).returncode == 0
    made = yolo3("synth", "--out", "data", "--num-images", "24", "--size", "96", "--seed", "1")
    assert made.returncode == 0, made.stderr[-3000:]
    data = tmp_path / "data"
    common = ["--annotations", str(data / "annotations.txt"), "--classes",
              str(data / "classes.txt"), "--variant", "tiny-af", "--input-size", "64",
              "--val-split", "0.25", "--precision", "float32"]
    first = yolo3("train", *common, "--batch-size", "4", "--epochs", "2", "--freeze-epochs",
                  "1", "--output", "run")
    said = first.stdout + first.stderr
    assert first.returncode == 0, said[-3000:]
    assert "input pipeline: NumPy/OpenCV" in said and "Traceback" not in said
    run = tmp_path / "run"
    with open(run / "history.csv", newline="") as f:
        assert len(list(csv.DictReader(f))) == 2
    assert list((run / "logs" / "train").glob("events.out.tfevents.*"))
    assert list((run / "logs" / "validation").glob("events.out.tfevents.*"))
    resumed = yolo3("train", *common, "--batch-size", "4", "--epochs", "3", "--freeze-epochs",
                    "1", "--output", "run", "--resume", "--no-pictures")
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    with open(run / "history.csv", newline="") as f:
        assert [int(r["epoch"]) for r in csv.DictReader(f)][-1] in (2, 3)
    replicas = yolo3("train", *common, "--batch-size", "2", "--epochs", "1", "--freeze-epochs",
                     "0", "--cpu-replicas", "2", "--output", "run2", "--no-pictures")
    said = replicas.stdout + replicas.stderr
    assert replicas.returncode == 0, said[-3000:]
    assert "2 replica(s), global batch 4" in said
    evaluated = yolo3("evaluate", "--model", "run/final.keras", "--annotations",
                      str(data / "annotations.txt"), "--out", "ev.json")
    assert evaluated.returncode == 0, evaluated.stderr[-3000:]
    assert "mAP50_95" in json.loads((tmp_path / "ev.json").read_text())
    detected = yolo3("detect", "--model", "run/final.keras", "--input", str(data / "images"),
                     "--output", "det")
    assert detected.returncode == 0, detected.stderr[-3000:]
    drawn = sorted(p.name for p in (tmp_path / "det").iterdir() if not p.name.startswith("."))
    assert drawn == sorted(p.name for p in (data / "images").iterdir()) and len(drawn) == 24
    checked = yolo3("check", "--annotations", str(data / "annotations.txt"), "--classes",
                    str(data / "classes.txt"))
    assert checked.returncode == 0 and "no problems" in checked.stdout, checked.stderr[-2000:]
    exported = yolo3("export", "--model", "run/final.keras", "--onnx", "m.onnx")
    assert exported.returncode == 2 and not (tmp_path / "m.onnx").exists()
    (line,) = exported.stderr.strip().splitlines()
    assert "needs tensorflow: pip install tensorflow" in line
