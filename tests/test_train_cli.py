"""yolo3-train / train_multi_gpu.py: argument checks, a short wrapped run, resume, SIGKILL resilience."""
from __future__ import annotations

import csv
import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from yolo3.callbacks import StopOnNaN
from yolo3.cli.train import main
from yolo3.data.synthetic import make_synthetic_dataset

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def dataset(tmp_path_factory):
    d = tmp_path_factory.mktemp("ds")
    ann, classes = make_synthetic_dataset(str(d), 12, (96, 96), val_fraction=0.25)
    return d, classes


def _args(d, classes, out, *extra):
    return ["--annotations", str(d / "train.txt"), "--val-annotations", str(d / "val.txt"),
            "--classes", classes, "--model", "tiny", "--input-size", "64", "--batch-size", "2",
            "--output", str(out), "--no-augment", "--quiet", *extra]


def test_help_lists_every_flag(capsys):
    with pytest.raises(SystemExit):
        main(["--help"])
    text = capsys.readouterr().out
    for flag in ("--annotations", "--val-split", "--freeze-epochs", "--cpu-replicas", "--strategy",
                 "--resume", "--seed", "--input-size", "--weights", "--lr"):
        assert flag in text


def test_bad_arguments_are_refused(dataset, tmp_path, capsys):
    d, classes = dataset
    with pytest.raises(SystemExit):
        main(_args(d, classes, tmp_path / "o", "--input-size", "100"))
    assert "multiple of 32" in capsys.readouterr().err
    assert main(_args(d, classes, tmp_path / "o", "--weights", str(tmp_path / "nope.h5"))) == 2
    assert "--weights not found" in capsys.readouterr().err
    one_class = tmp_path / "one.txt"
    one_class.write_text("circle\n")
    assert main(_args(d, str(one_class), tmp_path / "o")) == 2
    assert "class" in capsys.readouterr().err


def _history(out):
    with open(out / "history.csv") as f:
        return [int(r["epoch"]) for r in csv.DictReader(f)]


class _RecordOptimizer(StopOnNaN):
    """StopOnNaN that also records the fitted model's optimiser variables when training begins."""

    seen: list = []

    def on_train_begin(self, logs=None):
        opt = self.model.optimizer
        _RecordOptimizer.seen.append([np.array(v) for v in opt.variables] if opt.built else None)


def _saved_optimizer(out):
    state = json.loads((out / "resume.json").read_text())
    with np.load(out / state["dir"] / "optimizer.npz") as data:
        return [data[str(i)] for i in range(len(data.files))]


def test_train_in_process_then_resume(dataset, tmp_path, monkeypatch, recwarn):
    """Resume restores weights, epoch AND the Adam state (iterations, moments) without warnings."""
    d, classes = dataset
    out = tmp_path / "run"
    assert main(_args(d, classes, out, "--freeze-epochs", "1", "--epochs", "2")) == 0
    for name in ("final.keras", "final.weights.h5", "best.keras", "last.weights.h5", "anchors.txt",
                 "classes.txt", "resume.json"):
        assert (out / name).exists(), name
    assert _history(out) == [0, 1]
    saved = _saved_optimizer(out)
    steps = 4  # 9 training images // batch 2
    assert int(saved[0]) == steps  # stage 2 (epoch 1) ran one epoch on a fresh optimiser
    monkeypatch.setattr("yolo3.train.StopOnNaN", _RecordOptimizer)
    _RecordOptimizer.seen = []
    assert main(_args(d, classes, out, "--epochs", "3", "--resume")) == 0
    assert _history(out) == [0, 1, 2]
    assert json.loads((out / "resume.json").read_text())["epoch"] == 3
    restored = _RecordOptimizer.seen[0]
    assert restored is not None, "optimiser not restored: unbuilt when training resumed"
    assert len(restored) == len(saved) > 2
    for got, want in zip(restored, saved):
        np.testing.assert_array_equal(got, want)
    assert any(np.abs(v).sum() > 0 for v in saved[2:])  # the moments are not trivially zero
    assert int(_saved_optimizer(out)[0]) == 2 * steps  # the step count continued
    assert not [w for w in recwarn if "Skipping variable loading" in str(w.message)]


def _run_cli(args, **kw):
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", PYTHONPATH=str(REPO))
    return subprocess.Popen([sys.executable, str(REPO / "train_multi_gpu.py"), *args], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, **kw)


def test_wrapper_cli_with_two_cpu_replicas(dataset, tmp_path):
    d, classes = dataset
    out = tmp_path / "w"
    p = _run_cli(_args(d, classes, out, "--cpu-replicas", "2", "--epochs", "1"))
    text, _ = p.communicate(timeout=300)
    assert p.returncode == 0, text
    assert "2 replica(s)" in text and (out / "final.weights.h5").exists()


@pytest.mark.slow
def test_sigkill_at_random_moments_then_resume(dataset, tmp_path):
    """Kill training with SIGKILL three times; every checkpoint stays readable, epochs continue."""
    import keras
    from yolo3.callbacks import load_resume_state
    d, classes = dataset
    out = tmp_path / "k"
    rng = random.Random(0)
    total = 6
    for attempt in range(3):
        p = _run_cli(_args(d, classes, out, "--epochs", str(total), "--resume"))
        time.sleep(rng.uniform(12, 25))
        p.send_signal(signal.SIGKILL)
        p.communicate()
        state = load_resume_state(out)
        for f in out.glob("*.keras"):
            keras.models.load_model(f, compile=False)
        for f in out.glob("*.weights.h5"):
            import h5py
            h5py.File(f, "r").close()
        if state:
            assert _history(out)[-1] + 1 >= state["epoch"]
    p = _run_cli(_args(d, classes, out, "--epochs", str(total), "--resume"))
    text, _ = p.communicate(timeout=600)
    assert p.returncode == 0, text
    epochs = _history(out)
    assert epochs[-1] == total - 1 and set(range(total)) <= set(epochs)
