"""yolo3.training.trackers: MLflow read back through its own client (a local SQLite store here;
a real server that the test starts, in the slow set), Weights & Biases offline, and a tracker
that cannot be reached or fails in the middle: one warning, training goes on, nothing lost."""
from __future__ import annotations

import json
import logging
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import keras
import numpy as np
import pytest

from yolo3.config.train_config import TrainConfig, check
from yolo3.core.errors import SettingError
from yolo3.training.trackers import (
    MLflowTracker,
    Tracker,
    TrackerCallback,
    flat_parameters,
    make_tracker,
    run_artifacts,
)

mlflow = pytest.importorskip("mlflow", reason="the mlflow extra is not installed "
                                              "(pip install 'yolo3[mlflow]')")
from mlflow.tracking import MlflowClient  # noqa: E402


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _warnings(caplog):
    return [r for r in caplog.records
            if r.name == "yolo3.training.trackers" and r.levelno >= logging.WARNING]


def test_flat_parameters_and_the_artifacts_of_a_run(tmp_path):
    summary = {"settings": {"batch_size": 8, "multi_scale": [320, 608], "anchors": None},
               "dataset": {"classes": 3, "boxes_per_class": {"cat": 4}}}
    assert flat_parameters(summary) == {"batch_size": "8", "multi_scale": "320,608",
                                        "anchors": "None", "data.classes": "3",
                                        "data.boxes_per_class.cat": "4"}
    for name in ("results.png", "train_batch0.jpg", "report.html", "history.csv", "final.keras",
                 "last.keras", "notes.txt"):
        (tmp_path / name).write_text("x")
    found = [p.name for p in run_artifacts(tmp_path, tmp_path / "final.keras")]
    assert found == ["results.png", "train_batch0.jpg", "report.html", "history.csv",
                     "final.keras"]


def test_mlflow_run_read_back_through_its_client(tmp_path, monkeypatch):
    """Settings as parameters, every epoch's values at step = epoch, the files as artifacts,
    the status; MLflow's local store (SQLite) in the test's folder."""
    monkeypatch.chdir(tmp_path)  # MLflow puts its artifacts beside the store
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{tmp_path / 'mlflow.db'}")
    monkeypatch.setenv("MLFLOW_EXPERIMENT_NAME", "yolo3-test")
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "history.csv").write_text("epoch,loss\n0,2.0\n1,1.5\n")
    tracker = make_tracker("mlflow", "run", tmp_path / "run")
    assert isinstance(tracker, MLflowTracker)
    tracker.start({"batch_size": "8", "variant": "tiny"})
    tracker.log_epoch(0, {"loss": 2.0, "mAP50_95": float("nan"), "lr": 1e-3})
    tracker.log_epoch(1, {"loss": 1.5, "mAP50_95": 0.25, "lr": 5e-4})
    tracker.finish([tmp_path / "run" / "history.csv"], "finished")
    client = MlflowClient()
    run = client.get_run(tracker.run_id)
    assert run.data.params == {"batch_size": "8", "variant": "tiny"}
    assert run.info.status == "FINISHED" and run.info.run_name == "run"
    assert client.get_experiment(run.info.experiment_id).name == "yolo3-test"
    assert [(m.step, m.value) for m in client.get_metric_history(tracker.run_id, "loss")] == [
        (0, 2.0), (1, 1.5)]
    # a value that is not a number (not evaluated this epoch) is left out, not logged as NaN
    assert [(m.step, m.value) for m in client.get_metric_history(tracker.run_id, "mAP50_95")] == [
        (1, 0.25)]
    assert [a.path for a in client.list_artifacts(tracker.run_id)] == ["history.csv"]
    # resuming continues the same run: no parameter logged twice, the status running again
    again = make_tracker("mlflow", "run", tmp_path / "run")
    again.start({"batch_size": "16"}, resume_id=tracker.run_id)
    again.log_epoch(2, {"loss": 1.0})
    assert client.get_run(tracker.run_id).info.status == "RUNNING"
    again.finish([], "killed")
    assert client.get_run(tracker.run_id).info.status == "KILLED"
    assert [m.step for m in client.get_metric_history(tracker.run_id, "loss")] == [0, 1, 2]
    assert client.get_run(tracker.run_id).data.params["batch_size"] == "8"


def test_an_unreachable_server_warns_once_and_gives_up_in_seconds(tmp_path, monkeypatch, caplog):
    port = _free_port()  # nothing listens there
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"http://127.0.0.1:{port}")
    caplog.set_level(logging.WARNING)
    start = time.monotonic()
    tracker = make_tracker("mlflow", "run", tmp_path)
    tracker.start({"batch_size": "8"})
    tracker.log_epoch(0, {"loss": 1.0})
    tracker.finish([], "finished")
    assert time.monotonic() - start < 60
    warned = _warnings(caplog)
    assert len(warned) == 1, [r.getMessage() for r in warned]
    message = warned[0].getMessage()
    assert (f"mlflow: starting the run at http://127.0.0.1:{port} failed" in message
            and "training goes on without it" in message and str(tmp_path) in message)
    assert "MLFLOW_HTTP_REQUEST_MAX_RETRIES" not in os.environ  # the bound is restored


def test_a_tracker_failing_in_the_middle_warns_once_then_keeps_quiet(tmp_path, caplog):
    class Flaky(Tracker):
        kind = "flaky"

        def __init__(self):
            super().__init__("run", tmp_path)
            self.logged = []

        def _start(self, parameters, resume_id):
            self.run_id = "1"

        def _log(self, epoch, values):
            if epoch == 1:
                raise ConnectionError("the server went away\nsecond line")
            self.logged.append(epoch)

        def _upload(self, artifacts):
            raise AssertionError("never called after a failure")

        _close = _upload
    caplog.set_level(logging.WARNING)
    flaky = Flaky()
    flaky.start({})
    for epoch in range(4):
        flaky.log_epoch(epoch, {"loss": 1.0})
    flaky.finish([tmp_path], "finished")
    assert flaky.logged == [0] and flaky.failed
    warned = _warnings(caplog)
    assert [r.getMessage().split(";")[0] for r in warned] == [
        "flaky: logging epoch 2 at flaky failed (ConnectionError: the server went away)"]


def test_the_callback_logs_each_epoch_and_the_learning_rate(tmp_path):
    class Recording(Tracker):
        def __init__(self):
            super().__init__("run", tmp_path)
            self.run_id, self.rows = "1", []

        def _log(self, epoch, values):
            self.rows.append((epoch, values))
    recording = Recording()
    x = keras.Input((2,))
    model = keras.Model(x, keras.layers.Dense(1)(x))
    model.compile(optimizer=keras.optimizers.SGD(0.125), loss="mse")
    model.fit(np.ones((4, 2)), np.ones((4, 1)), epochs=2, verbose=0,
              callbacks=[TrackerCallback(recording)])
    assert [e for e, _ in recording.rows] == [0, 1]
    assert recording.rows[0][1]["lr"] == 0.125 and "loss" in recording.rows[0][1]


def test_a_tracker_that_is_unknown_or_not_installed_is_refused(tmp_path, monkeypatch):
    base = dict(annotations=__file__, classes=__file__, output=str(tmp_path / "o"))
    with pytest.raises(SettingError, match="tracker must be one of none, mlflow, wandb, got 'x'"):
        check(TrainConfig(tracker="x", **base))
    import yolo3.config.train_config as train_config
    monkeypatch.setattr(train_config, "installed", lambda name: False)
    with pytest.raises(SettingError, match=r"tracker wandb: the package is not installed "
                                           r"\(pip install 'yolo3\[wandb\]' \(or wandb\)\)"):
        check(TrainConfig(tracker="wandb", **base))
    assert not (tmp_path / "o").exists()


@pytest.fixture
def mlflow_server(tmp_path):
    """A real MLflow server on 127.0.0.1 with a SQLite backend; yields (uri, process)."""
    port = _free_port()
    store = tmp_path / "server"
    store.mkdir()
    process = subprocess.Popen(
        [sys.executable, "-m", "mlflow", "server", "--host", "127.0.0.1", "--port", str(port),
         "--backend-store-uri", f"sqlite:///{store / 'mlflow.db'}",
         "--artifacts-destination", str(store / "artifacts"), "--workers", "1"],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, cwd=store,
        start_new_session=True)  # its web server runs in child processes: killed as a group
    uri = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 120
    import urllib.request
    while True:
        try:
            urllib.request.urlopen(f"{uri}/health", timeout=2)
            break
        except OSError:
            assert process.poll() is None, process.stderr.read().decode()[-3000:]
            assert time.monotonic() < deadline, "the MLflow server did not start in 120 s"
            time.sleep(0.5)
    yield uri, process
    _kill_group(process)


def _kill_group(process: subprocess.Popen) -> None:
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    process.wait(timeout=30)


@pytest.mark.slow
@pytest.mark.extended  # a real MLflow server and three short runs (122 s in CI's slow set)
def test_training_logged_to_a_real_mlflow_server(mlflow_server, step_config, tmp_path,
                                                 monkeypatch, caplog):
    """The settings, each epoch's values, pictures, report, history and final model read back
    through MLflow's client; --resume continues the same run; the server killed in the middle
    of a run: one warning, and the run ends with every file in its folder."""
    from yolo3.training.train import train
    uri, server = mlflow_server
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    monkeypatch.chdir(tmp_path)
    config = step_config(tracker="mlflow", epochs=2, freeze_epochs=0, eval_every=1,
                         pictures=True)
    train(config)
    out = Path(config.output.output_dir)
    run_id = json.loads((out / "tracker.json").read_text())["run_id"]
    client = MlflowClient(uri)
    run = client.get_run(run_id)
    assert run.info.status == "FINISHED" and run.info.run_name == out.name
    assert run.data.params["batch_size"] == "2" and run.data.params["variant"] == "tiny"
    summary = json.loads((out / "run.json").read_text())
    assert run.data.params["data.training_images"] == str(summary["dataset"]["training_images"])
    for series in ("loss", "val_loss", "mAP50", "mAP50_95", "lr"):
        assert [m.step for m in client.get_metric_history(run_id, series)] == [0, 1], series
    history = (out / "history.csv").read_text().splitlines()
    assert float(history[1].split(",")[history[0].split(",").index("loss")]) == pytest.approx(
        client.get_metric_history(run_id, "loss")[0].value)
    artifacts = {a.path for a in client.list_artifacts(run_id)}
    assert {"report.html", "history.csv", "final.keras", "labels.png", "results.png",
            "run.json"} <= artifacts, artifacts
    # --resume with one more epoch: the same MLflow run goes on at step 2
    train(step_config(tracker="mlflow", epochs=3, freeze_epochs=0, eval_every=1, resume=True))
    assert [m.step for m in client.get_metric_history(run_id, "loss")] == [0, 1, 2]
    assert client.get_run(run_id).info.status == "FINISHED"

    class KillServer(keras.callbacks.Callback):
        def on_epoch_end(self, epoch, logs=None):
            if epoch == 0:
                _kill_group(server)
    caplog.set_level(logging.WARNING)
    config = step_config(tracker="mlflow", epochs=3, freeze_epochs=0,
                         output=str(tmp_path / "killed"))
    result = train(config, callbacks=[KillServer()])
    assert result.epochs_completed == 3 and Path(result.final_model).is_file()
    warned = _warnings(caplog)
    assert len(warned) == 1 and "logging epoch 2" in warned[0].getMessage(), [
        r.getMessage() for r in warned]


def _wandb_records(path: Path):
    """The records of an offline W&B run file (``run-*.wandb``): LevelDB's log format (32 KiB
    blocks of chunks, each with a 7-byte header: CRC, length, kind) after W&B's 7-byte header,
    each record a ``wandb_internal_pb2.Record``; wandb 0.31 has no Python reader of its own."""
    import struct

    from wandb.proto import wandb_internal_pb2
    data = path.read_bytes()
    assert data[:4] == b":W&B", path
    position, block, pending = 7, 32768, b""
    while position + 7 <= len(data):
        left = block - position % block
        if left < 7:  # a block's tail too short for a header is padding
            position += left
            continue
        _crc, length, kind = struct.unpack("<IHB", data[position:position + 7])
        pending += data[position + 7:position + 7 + length]
        position += 7 + length
        if kind in (1, 4):  # a whole record, or the last chunk of one
            record = wandb_internal_pb2.Record()
            record.ParseFromString(pending)
            pending = b""
            yield record


@pytest.mark.slow  # CI runs it (.ci/run): W&B's service process and a short run, about 30 s
def test_training_logged_to_weights_and_biases_offline(step_config, tmp_path, monkeypatch):
    pytest.importorskip("wandb", reason="the wandb extra is not installed")
    from yolo3.training.train import train
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_DIR", str(tmp_path))
    monkeypatch.setenv("WANDB_SILENT", "true")
    config = step_config(tracker="wandb", epochs=2, freeze_epochs=0, eval_every=1)
    train(config)
    runs = list((tmp_path / "wandb").glob("offline-run-*"))
    assert len(runs) == 1
    records = list(_wandb_records(next(runs[0].glob("run-*.wandb"))))
    run = next(r.run for r in records if r.WhichOneof("record_type") == "run")
    settings = {u.key: json.loads(u.value_json) for u in run.config.update}
    assert settings["batch_size"] == "2" and settings["variant"] == "tiny"
    assert run.display_name == "out"
    epochs = {}
    for r in records:
        if r.WhichOneof("record_type") == "history":
            row = {i.key or "/".join(i.nested_key): json.loads(i.value_json)
                   for i in r.history.item}
            epochs[row["_step"]] = row
    assert sorted(epochs) == [0, 1]
    history = (Path(config.output.output_dir) / "history.csv").read_text().splitlines()
    loss_column = history[0].split(",").index("loss")
    for epoch, row in epochs.items():
        assert {"loss", "val_loss", "mAP50", "mAP50_95", "lr"} <= set(row)
        assert row["loss"] == pytest.approx(float(history[1 + epoch].split(",")[loss_column]))
    saved = {f.path for r in records if r.WhichOneof("record_type") == "files"
             for f in r.files.files}
    assert {"report.html", "history.csv", "final.keras"} <= saved
    assert [r.exit.exit_code for r in records if r.WhichOneof("record_type") == "exit"] == [0]
    assert {"report.html", "history.csv", "final.keras"} <= {p.name for p in
                                                             (runs[0] / "files").iterdir()}
