"""Training across processes on JAX's distributed runtime, on this machine: 2 processes x 1 CPU
device against 1 process x 2 logical devices (the same loss at every step, the same weights and
mAP), one writer, the faults (a killed process, settings that differ, a coordinator that never
answers) and a killed run resumed. Each run is fresh processes (JAX's runtime starts once per
process)."""
from __future__ import annotations

import csv
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("jax", reason="JAX is not installed here (the test extra has it)")

pytestmark = pytest.mark.slow  # CI runs them (.ci/run): several training processes, ~6 minutes

REPO = Path(__file__).resolve().parents[2]

RUN = textwrap.dedent('''
    """argv: result.json output_dir (one | PROCESS_ID PORT): the per-step losses and weights."""
    import json, os, sys
    os.environ["KERAS_BACKEND"] = "jax"
    if sys.argv[3] == "one":
        os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=2"
    import keras
    import numpy as np
    from yolo3.training.train import TrainConfig, train

    class Steps(keras.callbacks.Callback):
        losses = []
        def on_train_batch_end(self, batch, logs=None):
            self.losses.append(float(logs["loss"]))

    if sys.argv[3] == "one":
        where = dict(cpu_replicas=2)
    else:
        where = dict(coordinator="127.0.0.1:" + sys.argv[4], num_processes=2,
                     process_id=int(sys.argv[3]), cluster_timeout=120)
    config = TrainConfig.from_settings(dict(
        {settings}, output_dir=sys.argv[2], verbose=0, **where))
    steps = Steps()
    result = train(config, callbacks=[steps])
    np.savez(sys.argv[1] + ".npz", *steps.model.get_weights())
    json.dump(dict(losses=steps.losses, history=result.history,
                   final=result.final_weights), open(sys.argv[1], "w"))
''')


def _settings(data: Path) -> dict:
    return dict(variant="tiny-af", annotations=str(data / "train.txt"),
                val_annotations=str(data / "val.txt"), classes=str(data / "classes.txt"),
                input_size=(64, 64), batch_size=4, epochs=2, steps_per_epoch=10, seed=3,
                pictures=False, pipeline="numpy", eval_every=1, bn_stats_images=32)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _env() -> dict:
    return dict(os.environ, PYTHONPATH=str(REPO), KERAS_BACKEND="jax", PYTHONUNBUFFERED="1",
                TF_CPP_MIN_LOG_LEVEL="2")


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    from yolo3.data.synthetic import make_synthetic_dataset
    folder = tmp_path_factory.mktemp("jax_processes") / "data"
    make_synthetic_dataset(str(folder), 48, (128, 128), val_fraction=0.25, seed=5)
    return folder


@pytest.fixture(scope="module")
def runs(data, tmp_path_factory):
    """The same 20 steps run as 1 process x 2 logical devices and as 2 processes x 1 device."""
    return _run_both(tmp_path_factory.mktemp("runs"), _settings(data))


@pytest.fixture(scope="module")
def replica_runs(data, tmp_path_factory):
    """The same with --replica-batch-norm: 8 steps, one flat all-reduce each."""
    settings = dict(_settings(data), epochs=1, steps_per_epoch=8, eval_every=0,
                    bn_stats_images=0, replica_batch_norm=True)
    return _run_both(tmp_path_factory.mktemp("replica_runs"), settings)


def _run_both(root: Path, settings: dict) -> Path:
    """1 process x 2 logical devices (one.json) and 2 processes x 1 device (p0.json, p1.json)
    trained with ``settings``, at once."""
    (root / "before.json").write_text(json.dumps(_private_folders()))
    script = root / "run.py"
    script.write_text(RUN.format(settings=repr(settings)))
    port = str(_free_port())
    python = [sys.executable, str(script)]
    procs = [subprocess.Popen(python + [str(root / "one.json"), str(root / "one"), "one"],
                              env=_env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              text=True)]
    procs += [subprocess.Popen(python + [str(root / f"p{i}.json"), str(root / "two"), str(i),
                                         port], env=_env(), stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True) for i in (0, 1)]
    outs = [p.communicate(timeout=900)[0] for p in procs]
    for p, out in zip(procs, outs):
        assert p.returncode == 0, out[-3000:]
    return root


def _private_folders() -> list:
    """The temporary folders of JAX processes other than 0 (yolo3's temporaries) there are now."""
    return sorted(p.name for p in Path(tempfile.gettempdir()).glob("*yolo3-process-*"))


def _load(root: Path, name: str):
    result = json.loads((root / f"{name}.json").read_text())
    weights = np.load(root / f"{name}.json.npz")
    return result, [weights[f"arr_{i}"] for i in range(len(weights.files))]


def _each_process_equals_one(root: Path, steps: int):
    """Each of the 2 processes' per-step losses (to 1e-5) and final weights equal the 1-process
    x 2-device run's; yields each process's result for further checks."""
    one, one_weights = _load(root, "one")
    for name in ("p0", "p1"):
        two, two_weights = _load(root, name)
        assert len(two["losses"]) == len(one["losses"]) == steps
        np.testing.assert_allclose(two["losses"], one["losses"], rtol=0, atol=1e-5)
        for a, b in zip(two_weights, one_weights):
            np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)
        yield one, two


def test_two_processes_train_as_one_process_with_two_devices(runs):
    for one, two in _each_process_equals_one(runs, 20):
        # the validation mAP: each process detects in its half, the detections gathered
        np.testing.assert_allclose(two["history"]["mAP50_95"], one["history"]["mAP50_95"],
                                   atol=1e-6)
        assert two["history"]["mAP50_95"][-1] > 0


@pytest.mark.extended  # its own two-process runs (161 s of set-up in CI's slow set)
def test_two_processes_with_replica_batch_norm_train_as_one_process_with_two_devices(
        replica_runs, runs):
    """The shard_map step (each replica's own batch statistics, one flat all-reduce) across two
    processes equals it across two devices of one process, step by step."""
    compared = list(_each_process_equals_one(replica_runs, 8))
    assert len(compared) == 2
    # not the global statistics' run: its first step (the same weights and batch) differs
    plain, _ = _load(runs, "one")
    assert abs(plain["losses"][0] - compared[0][0]["losses"][0]) > 1e-4


def test_only_process_0_writes_the_run_folder(runs):
    out = runs / "two"
    written = {p.name for p in out.iterdir()}
    assert {"final.keras", "final.weights.h5", "history.csv", "resume.json"} <= written
    assert not any(name.startswith(".worker") for name in written)
    p0, p1 = (json.loads((runs / f"{n}.json").read_text()) for n in ("p0", "p1"))
    assert p0["final"] == str(out / "final.weights.h5") and p1["final"] == ""
    # process 1's temporary folder is gone
    before = set(json.loads((runs / "before.json").read_text()))
    assert set(_private_folders()) <= before


def _cli(data: Path, out: Path, port: int, process_id: int, *extra: str) -> subprocess.Popen:
    s = _settings(data)
    argv = [sys.executable, "-m", "yolo3", "train", "--variant", "tiny-af", "--annotations",
            s["annotations"], "--val-annotations", s["val_annotations"], "--classes",
            s["classes"], "--input-size", "64", "--batch-size", "4", "--epochs", "2",
            "--steps-per-epoch", "10", "--seed", "3", "--no-pictures", "--pipeline", "numpy",
            "--eval-every", "1", "--bn-stats-images", "32", "--output", str(out), "--quiet",
            "--coordinator", f"127.0.0.1:{port}", "--num-processes", "2", "--process-id",
            str(process_id), "--cluster-timeout", "120", *extra]
    return subprocess.Popen(argv, env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, cwd=str(REPO))


@pytest.mark.extended  # a killed run and its resumption (274 s in CI's slow set)
def test_a_killed_process_ends_the_other_and_the_resumed_run_ends_as_an_unbroken_one(
        data, runs, tmp_path):
    out, port = tmp_path / "run", _free_port()
    existing = set(_private_folders())
    procs = [_cli(data, out, port, i) for i in (0, 1)]
    deadline = time.monotonic() + 600
    def saved() -> bool:  # epoch 1 saved (its state and its history row): kill in epoch 2
        history = out / "history.csv"
        return ((out / "resume.json").is_file() and history.is_file()
                and len(history.read_text().splitlines()) >= 2)
    while not saved():
        assert time.monotonic() < deadline and procs[0].poll() is None
        time.sleep(0.2)
    first_epoch = (out / "history.csv").read_text().splitlines()[1]
    killed_folders = set(_private_folders()) - existing  # process 1's, left by the kill
    assert killed_folders
    procs[1].send_signal(signal.SIGKILL)
    procs[1].wait()
    killed_at = time.monotonic()
    _, err = procs[0].communicate(timeout=120)
    assert time.monotonic() - killed_at < 60, "process 0 did not end within 60 s"
    assert procs[0].returncode == 1, err[-3000:]
    assert "another process of this run stopped (process 1;" in err, err[-3000:]
    assert "--resume" in err
    assert "Traceback" not in err
    assert not (out / "final.keras").exists()

    port = _free_port()
    procs = [_cli(data, out, port, i, "--resume") for i in (0, 1)]
    results = [p.communicate(timeout=900) for p in procs]
    for p, (stdout, err) in zip(procs, results):
        assert p.returncode == 0, err[-3000:]
    assert "process 1 of 2: done; process 0 wrote the run folder" in results[1][0]
    # the killed process's temporary folder was swept by its successor (yolo3's, its owner gone)
    assert not (killed_folders & set(_private_folders()))
    history = (out / "history.csv").read_text().splitlines()
    assert [row.split(",")[0] for row in history[1:]] == ["0", "1"]  # no epoch lost or repeated
    assert history[1] == first_epoch  # epoch 1 kept as the killed run wrote it, epoch 2 trained again
    # ... and each epoch is the unbroken run's (the `runs` fixture's two processes, the same
    # settings): the same batches, weights and optimiser state after the restart
    unbroken = json.loads((runs / "p0.json").read_text())["history"]
    with open(out / "history.csv") as f:
        resumed = list(csv.DictReader(f))
    for key in ("loss", "val_loss", "mAP50_95"):
        np.testing.assert_allclose([float(r[key]) for r in resumed], unbroken[key], rtol=1e-5,
                                   atol=1e-6, err_msg=key)
    assert (out / "final.keras").is_file() and (out / "final.weights.h5").is_file()


def test_processes_started_with_other_settings_are_refused_before_the_first_step(data,
                                                                                   tmp_path):
    port = _free_port()
    procs = [_cli(data, tmp_path / "run", port, 0, "--seed", "3"),
             _cli(data, tmp_path / "run", port, 1, "--seed", "4")]
    results = [p.communicate(timeout=300) for p in procs]
    for p, (_, err) in zip(procs, results):
        assert p.returncode == 2, err[-3000:]
        assert "--seed differs between the processes of this run" in err, err[-3000:]
    assert not (tmp_path / "run" / "history.csv").exists()


def test_a_coordinator_that_never_answers_ends_with_its_address_and_the_time(data, tmp_path):
    port = _free_port()
    start = time.monotonic()
    p = _cli(data, tmp_path / "run", port, 1, "--cluster-timeout", "3")
    _, err = p.communicate(timeout=120)
    assert p.returncode == 1, err[-3000:]
    assert f"coordinator 127.0.0.1:{port}: nothing answered there within 3 s" in err
    assert time.monotonic() - start < 60
    assert not (tmp_path / "run").exists()
