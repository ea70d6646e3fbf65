"""A JAX install without TensorFlow: the commands a user runs there work end to end, fed by the
NumPy pipeline, in processes where ``import tensorflow`` fails (tests/no_tensorflow); the pipeline
choice (``--pipeline``) is made and refused by rule; what needs TensorFlow says so in one line.
The same workflow in a real virtual environment without TensorFlow: tests/features/test_notf_venv.py.
"""
from __future__ import annotations

import csv
import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from yolo3.config.train_config import ConfigError, TrainConfig
from yolo3.training.datasets import pick_pipeline

TESTS = Path(__file__).resolve().parents[1]
REPO = TESTS.parent


def without_tensorflow(backend: str = "jax") -> dict:
    path = os.pathsep.join([str(TESTS / "no_tensorflow"), os.environ.get("PYTHONPATH", "")])
    return dict(os.environ, KERAS_BACKEND=backend, PYTHONPATH=path, TF_CPP_MIN_LOG_LEVEL="3")


def yolo3(*argv: str, cwd: Path, timeout: int = 900) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "yolo3", *argv], capture_output=True, text=True,
                          cwd=cwd, env=without_tensorflow(), timeout=timeout)


def _config(tmp_path, **settings) -> TrainConfig:
    (tmp_path / "a.txt").write_text("")
    (tmp_path / "c.txt").write_text("a\n")
    return TrainConfig(annotations=str(tmp_path / "a.txt"), classes=str(tmp_path / "c.txt"),
                       output=str(tmp_path / "out"), **settings)


def test_auto_picks_tf_data_where_tensorflow_imports_and_numpy_where_it_does_not(tmp_path,
                                                                              monkeypatch):
    import yolo3.training.datasets as datasets
    assert pick_pipeline(_config(tmp_path)) == "tf"
    assert pick_pipeline(_config(tmp_path, pipeline="numpy")) == "numpy"
    monkeypatch.setattr(datasets, "installed", lambda package: package != "tensorflow")
    assert pick_pipeline(_config(tmp_path)) == "numpy"
    with pytest.raises(ConfigError, match="pipeline tf: TensorFlow is not installed") as e:
        pick_pipeline(_config(tmp_path, pipeline="tf"))
    assert e.value.settings == ("pipeline",)


def test_the_numpy_pipeline_under_a_tf_distribute_strategy_is_refused(tmp_path):
    from types import SimpleNamespace
    from yolo3.training.jax_cluster import SINGLE
    placement = SimpleNamespace(strategy=object(), group=SINGLE)
    with pytest.raises(ConfigError, match="mirrored strategy") as e:
        pick_pipeline(_config(tmp_path, pipeline="numpy", strategy="mirrored"), placement)
    assert set(e.value.settings) == {"pipeline", "strategy"}
    with pytest.raises(Exception, match="pipeline must be one of auto, tf, numpy"):
        from yolo3.config.train_config import check
        check(_config(tmp_path, pipeline="grain"))


def test_numpy_with_multi_scale_is_refused_on_tensorflow_only(tmp_path, monkeypatch):
    """Keras's PyDataset adapter on TensorFlow fixes the batch shape from the first batches (a
    later size failed with a bare InvalidArgumentError); JAX and PyTorch take every size."""
    import yolo3.training.datasets as datasets
    config = _config(tmp_path, pipeline="numpy", multi_scale=(64, 128))
    with pytest.raises(ConfigError, match="TensorFlow backend") as e:
        pick_pipeline(config)
    assert set(e.value.settings) == {"pipeline", "multi_scale"}
    assert pick_pipeline(_config(tmp_path, multi_scale=(64, 128))) == "tf"  # auto: tf.data
    monkeypatch.setattr(datasets.keras.backend, "backend", lambda: "jax")
    assert pick_pipeline(config) == "numpy"


@pytest.mark.slow  # CI runs it (.ci/run); about 2 minutes on 2 cores
def test_the_commands_run_end_to_end_with_tensorflow_unimportable(tmp_path):
    style = ["--style", "photo"] if importlib.util.find_spec("skimage") else []
    made = yolo3("synth", "--out", "data", "--num-images", "36", "--size", "128", *style,
                 "--seed", "2", cwd=tmp_path)
    assert made.returncode == 0, made.stderr[-3000:]
    data = tmp_path / "data"
    common = ["--annotations", str(data / "annotations.txt"), "--classes",
              str(data / "classes.txt"), "--variant", "tiny-af", "--input-size", "96",
              "--batch-size", "4", "--val-split", "0.25", "--precision", "float32"]
    first = yolo3("train", *common, "--epochs", "2", "--freeze-epochs", "1", "--output", "run",
                  cwd=tmp_path)
    said = first.stdout + first.stderr
    assert first.returncode == 0, said[-3000:]
    assert "input pipeline: NumPy/OpenCV" in said and "Traceback" not in said
    run = tmp_path / "run"
    with open(run / "history.csv", newline="") as f:
        assert len(list(csv.DictReader(f))) == 2
    # TensorBoard's logs, written without tf.summary
    assert list((run / "logs" / "train").glob("events.out.tfevents.*"))
    assert list((run / "logs" / "validation").glob("events.out.tfevents.*"))
    resumed = yolo3("train", *common, "--epochs", "3", "--freeze-epochs", "1", "--output", "run",
                    "--resume", cwd=tmp_path)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    with open(run / "history.csv", newline="") as f:
        assert [int(r["epoch"]) for r in csv.DictReader(f)][-1] in (2, 3)
    replicas = yolo3("train", *common[:-6], "--batch-size", "2", "--val-split", "0.25",
                     "--precision", "float32", "--epochs", "1", "--freeze-epochs", "0",
                     "--cpu-replicas", "2", "--output", "run2", cwd=tmp_path)
    said = replicas.stdout + replicas.stderr
    assert replicas.returncode == 0, said[-3000:]
    assert "2 replica(s), global batch 4" in said
    evaluated = yolo3("evaluate", "--model", "run/final.keras", "--annotations",
                      str(data / "annotations.txt"), "--out", "ev.json",
                      cwd=tmp_path)
    assert evaluated.returncode == 0, evaluated.stderr[-3000:]
    assert "mAP50_95" in json.loads((tmp_path / "ev.json").read_text())
    detected = yolo3("detect", "--model", "run/final.keras", "--input", str(data / "images"),
                     "--output", "det", cwd=tmp_path)
    assert detected.returncode == 0, detected.stderr[-3000:]
    assert len(list((tmp_path / "det").glob("*.jpg"))) == 36
    checked = yolo3("check", "--annotations", str(data / "annotations.txt"), "--classes",
                    str(data / "classes.txt"), cwd=tmp_path)
    assert checked.returncode == 0 and "no problems" in checked.stdout, checked.stderr[-2000:]
    exported = yolo3("export", "--model", "run/final.keras", "--onnx", "m.onnx", cwd=tmp_path)
    assert exported.returncode == 2 and not (tmp_path / "m.onnx").exists()
    (line,) = exported.stderr.strip().splitlines()
    assert "needs tensorflow: pip install tensorflow" in line
