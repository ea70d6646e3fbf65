"""yolo3.training.tuning: the study's mechanics on a simulated training (values from the drawn
settings, pruning, a trial cut short and run again on resume, the folder's rules), and in the slow
set a real 4-trial study killed after its second trial, resumed, and its best file trained."""
from __future__ import annotations

import csv
import math
import os
import signal
import subprocess
import sys
import time
import types
from pathlib import Path

import pytest
import yaml
from locations import REPO

optuna = pytest.importorskip("optuna", reason="the tune extra is not installed "
                                              "(pip install 'yolo3[tune]')")

from yolo3.config.search_space import Dimension  # noqa: E402
from yolo3.config.settings_file import read_settings_file  # noqa: E402
from yolo3.core.errors import SettingError  # noqa: E402
from yolo3.training import tuning  # noqa: E402
from yolo3.training.train import TrainResult  # noqa: E402

SPACE = [Dimension("lr", 1e-4, 1e-2, log=True), Dimension("optimizer", choices=("adam", "sgd"))]


def _simulated(epochs_run: list, cut_at=None):
    """A stand-in for train(): its mAP per epoch grows with the epoch and falls with the
    distance of log10(lr) from -3 (sgd a little lower); it calls the callbacks as fit would and
    stops when one asks. ``cut_at``: (trial folder name, epoch) at which it raises
    KeyboardInterrupt, as a killed process would leave the trial running."""
    def train(config, callbacks=()):
        model = types.SimpleNamespace(stop_training=False)
        for c in callbacks:
            c.set_model(model)
        history = {"mAP50_95": []}
        for epoch in range(config.schedule.epochs):
            if cut_at and Path(config.output.output_dir).name == cut_at[0] and epoch == cut_at[1]:
                raise KeyboardInterrupt
            value = (0.5 - 0.1 * abs(math.log10(config.recipe.lr) + 3)
                     - (0.05 if config.recipe.optimizer == "sgd" else 0)) * (epoch + 1) / 4
            history["mAP50_95"].append(value)
            for c in callbacks:
                c.on_epoch_end(epoch, {"mAP50_95": value})
            epochs_run.append((Path(config.output.output_dir).name, epoch))
            if model.stop_training:
                break
        return TrainResult(config.output.output_dir, "", "", history, len(history["mAP50_95"]))
    return train


@pytest.fixture
def simulated(monkeypatch):
    """The study's calls that only matter with real training made cheap: Keras's session reset
    and Optuna's garbage collection after each trial (seconds each in a suite's large process)."""
    import gc
    monkeypatch.setattr(tuning.keras.backend, "clear_session", lambda: None)
    monkeypatch.setattr(gc, "collect", lambda *a: 0)


def test_a_study_finds_the_best_settings_prunes_and_writes_its_files(step_config, tmp_path,
                                                                     monkeypatch, simulated):
    runs: list = []
    monkeypatch.setattr(tuning, "train", _simulated(runs))
    base = step_config(epochs=4, freeze_epochs=1)
    study = tmp_path / "study"
    result = tuning.tune(base, SPACE, 8, study)
    assert result.finished + result.pruned == 8 and result.failed == 0
    assert result.pruned >= 1  # the median pruner stopped some trial after its warm-up epoch
    rows = list(csv.DictReader(open(study / "trials.csv")))
    assert [r["trial"] for r in rows] == [str(i) for i in range(8)]
    complete = [r for r in rows if r["state"] == "complete"]
    best = max(complete, key=lambda r: float(r["mAP50_95"]))
    assert result.best_trial == int(best["trial"])
    assert result.best_value == pytest.approx(float(best["mAP50_95"]))
    # best.yaml: the base's own settings (paths absolute) and the best trial's draws
    settings = read_settings_file(study / "best.yaml")
    assert settings["lr"] == pytest.approx(float(best["lr"]))
    assert settings["optimizer"] == best["optimizer"]
    assert settings["epochs"] == 4 and settings["variant"] == "tiny"
    assert os.path.isabs(settings["annotations"]) and "output_dir" not in settings
    assert yaml.safe_load((study / "space.yaml").read_text())["optimizer"] == {
        "choices": ["adam", "sgd"]}
    pruned = [r["trial"] for r in rows if r["state"] == "pruned"]
    for trial in pruned:  # a pruned trial stopped early
        assert len([e for name, e in runs if name == f"trial-{int(trial):04d}"]) < 4


def test_a_study_cut_short_goes_on_with_resume(step_config, tmp_path, monkeypatch, simulated):
    """Cut short in trial 2's second epoch: other base settings or another space are refused;
    the same command again (resume or not) marks trial 2 failed, runs its settings again, and
    reaches the count."""
    runs: list = []
    base = step_config(epochs=3, freeze_epochs=1)
    study = tmp_path / "study"
    monkeypatch.setattr(tuning, "train", _simulated(runs, cut_at=("trial-0002", 1)))
    with pytest.raises(KeyboardInterrupt):
        tuning.tune(base, SPACE, 4, study)
    with pytest.raises(SettingError, match="started with other settings: epochs"):
        tuning.tune(step_config(epochs=5, freeze_epochs=1), None, 4, study, resume=True)
    with pytest.raises(SettingError, match="searches another space"):
        tuning.tune(base, SPACE[:1], 4, study, resume=True)
    monkeypatch.setattr(tuning, "train", _simulated(runs))
    result = tuning.tune(base, None, 4, study)  # None: the study's own space
    assert result.finished + result.pruned == 4 and result.failed == 1
    rows = {r["trial"]: r for r in csv.DictReader(open(study / "trials.csv"))}
    assert rows["2"]["state"] == "fail" and rows["3"]["lr"] == rows["2"]["lr"]  # ran again
    assert rows["3"]["optimizer"] == rows["2"]["optimizer"]


def test_a_folder_of_the_users_is_refused_before_anything_is_written(step_config, tmp_path):
    study = tmp_path / "mine"
    study.mkdir()
    (study / "best.yaml").write_text("mine")
    with pytest.raises(SettingError, match="output_dir"):
        tuning.tune(step_config(), SPACE, 2, study, exist_ok=True)
    assert sorted(p.name for p in study.iterdir()) == ["best.yaml"]
    with pytest.raises(SettingError, match="trials must be at least 1"):
        tuning.tune(step_config(), SPACE, 0, tmp_path / "new")
    assert not (tmp_path / "new").exists()


def _tune_command(d: Path, classes: str, study: Path, *extra):
    return [sys.executable, "-m", "yolo3", "tune", "--annotations", str(d / "train.txt"),
            "--val-annotations", str(d / "val.txt"), "--classes", classes, "--variant", "tiny",
            "--input-size", "64", "--batch-size", "4", "--epochs", "1", "--freeze-epochs", "0",
            "--no-pictures", "--quiet", "--trials", "4", "--output", str(study), *extra]


@pytest.mark.slow
@pytest.mark.extended  # six one-epoch training runs (273 s in CI's slow set)
def test_a_real_study_killed_after_two_trials_resumes_and_its_best_trains(tmp_path):
    from yolo3.data.synthetic import make_synthetic_dataset
    d = tmp_path / "ds"
    _, classes = make_synthetic_dataset(str(d), 16, (96, 96), val_fraction=0.25)
    space = tmp_path / "space.yaml"
    space.write_text("lr: {low: 0.0003, high: 0.01, log: true}\nmosaic: {low: 0, high: 1}\n")
    study = tmp_path / "study"
    env = dict(os.environ, PYTHONPATH=str(REPO), TF_CPP_MIN_LOG_LEVEL="2")
    log = open(tmp_path / "first.log", "w")
    first = subprocess.Popen(_tune_command(d, classes, study, "--space", str(space)), env=env,
                             stdout=log, stderr=subprocess.STDOUT)

    def finished() -> int:
        table = study / "trials.csv"
        return sum(r["state"] in ("complete", "pruned") for r in csv.DictReader(open(table))) \
            if table.exists() else 0
    deadline = time.monotonic() + 600
    while finished() < 2:
        assert first.poll() is None, (tmp_path / "first.log").read_text()[-3000:]
        assert time.monotonic() < deadline
        time.sleep(0.2)
    first.send_signal(signal.SIGKILL)
    first.wait(timeout=60)
    again = subprocess.run(_tune_command(d, classes, study, "--resume"), env=env,
                           capture_output=True, text=True, timeout=900)
    assert again.returncode == 0, again.stdout[-3000:] + again.stderr[-3000:]
    rows = list(csv.DictReader(open(study / "trials.csv")))
    assert sum(r["state"] in ("complete", "pruned") for r in rows) == 4
    assert "yolo3 tune: " in again.stdout and "best: trial" in again.stdout
    run = subprocess.run([sys.executable, "-m", "yolo3", "train", "--settings",
                          str(study / "best.yaml"), "--output", str(tmp_path / "best_run"),
                          "--quiet"], env=env, capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    best = read_settings_file(study / "best.yaml")
    ran = yaml.safe_load((tmp_path / "best_run" / "run.json").read_text())["settings"]
    assert ran["lr"] == pytest.approx(best["lr"]) and ran["mosaic"] == pytest.approx(best["mosaic"])
    assert ran["epochs"] == 1 and ran["variant"] == "tiny"
