"""yolo3-train / train_multi_gpu.py: argument checks, a short wrapped run, resume, SIGKILL resilience."""
from __future__ import annotations

import csv
import json
import math
import os
import random
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from locations import REPO

from yolo3.cli.train import main
from yolo3.data.synthetic import make_synthetic_dataset
from yolo3.training.callbacks import StopOnNaN


@pytest.fixture(scope="module")
def dataset(tmp_path_factory):
    d = tmp_path_factory.mktemp("ds")
    ann, classes = make_synthetic_dataset(str(d), 12, (96, 96), val_fraction=0.25)
    return d, classes


def _args(d, classes, out, *extra, pictures: bool = False):
    """Training flags on the small set; no pictures unless the test is about them (about 1 s a
    run: tests/training/test_pictures.py draws them in depth)."""
    return ["--annotations", str(d / "train.txt"), "--val-annotations", str(d / "val.txt"),
            "--classes", classes, "--variant", "tiny", "--input-size", "64", "--batch-size", "2",
            "--output", str(out), "--no-augment", "--quiet", *extra,
            *([] if pictures else ["--no-pictures"])]


def test_help_lists_every_flag(capsys):
    assert main(["--help"]) == 0
    text = capsys.readouterr().out
    for flag in ("--annotations", "--val-split", "--freeze-epochs", "--cpu-replicas", "--strategy",
                 "--resume", "--seed", "--input-size", "--weights", "--lr"):
        assert flag in text


def test_bad_arguments_are_refused(dataset, tmp_path, capsys):
    d, classes = dataset
    for extra, message in (
            (["--input-size", "100"], "argument --input-size: expected a whole number from 32 "
                                      "to 4096, a multiple of 32, got '100'"),
            (["--weights", str(tmp_path / "nope.h5")], "argument --weights: expected an existing "
                                                        "file"),
            (["--bn-stats-images", "-1"], "argument --bn-stats-images: expected a whole number "
                                          "from 0"),
            (["--bn-momentum", "1.5"], "argument --bn-momentum: expected a number from 0, below "
                                       "1, got '1.5'"),
            (["--assign-iou", "0"], "argument --assign-iou: expected a number above 0, up to 1"),
            (["--box-gain", "-2"], "argument --box-gain: expected a number above 0, up to 1000"),
            (["--objectness", "quality"], "--objectness: invalid choice: 'quality'"),
            (["--input-size", "96", "80"], "argument --input-size: expected a whole number "
                                           "from 32 to 4096, a multiple of 32, got '80'")):
        assert main(_args(d, classes, tmp_path / "o", *extra)) == 2
        assert message in capsys.readouterr().err
    one_class = tmp_path / "one.txt"
    one_class.write_text("circle\n")
    assert main(_args(d, str(one_class), tmp_path / "o")) == 2
    assert "class" in capsys.readouterr().err
    assert not (tmp_path / "o").exists()  # refused before anything was written


def _history(out):
    with open(out / "history.csv") as f:
        return [int(r["epoch"]) for r in csv.DictReader(f)]


def _losses(out):
    """Each epoch's training and validation loss in ``out``'s history.csv."""
    with open(out / "history.csv") as f:
        return [(float(r["loss"]), float(r["val_loss"])) for r in csv.DictReader(f)]


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


@pytest.mark.slow  # CI runs it (.ci/run); about 45 s on 2 cores, kept out of the default 15 minutes
def test_train_in_process_then_resume(dataset, tmp_path, monkeypatch, recwarn):
    """Resume restores weights, epoch AND the Adam state (iterations, moments) without warnings."""
    d, classes = dataset
    out = tmp_path / "run"
    assert main(_args(d, classes, out, "--freeze-epochs", "1", "--epochs", "2", pictures=True)) == 0
    for name in ("final.keras", "final.weights.h5", "best.keras", "last.weights.h5", "anchors.txt",
                 "classes.txt", "resume.json"):
        assert (out / name).exists(), name
    assert _history(out) == [0, 1]
    pictures = ("labels.png", "train_batch0.jpg", "train_batch2.jpg", "results.png",
                "val_gallery.png")
    assert all((out / name).exists() for name in pictures)
    drawn_at = (out / "train_batch0.jpg").stat().st_mtime_ns
    saved = _saved_optimizer(out)
    steps = 4  # 9 training images // batch 2
    assert int(saved[0]) == steps  # stage 2 (epoch 1) ran one epoch on a fresh optimiser
    monkeypatch.setattr("yolo3.training.train.StopOnNaN", _RecordOptimizer)
    _RecordOptimizer.seen = []
    assert main(_args(d, classes, out, "--epochs", "3", "--resume", pictures=True)) == 0
    assert _history(out) == [0, 1, 2]
    assert (out / "train_batch0.jpg").stat().st_mtime_ns == drawn_at  # not drawn again
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
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", PYTHONPATH=str(REPO), PYTHONUNBUFFERED="1")
    kw = {"stdout": subprocess.PIPE, "stderr": subprocess.STDOUT, "text": True, **kw}
    return subprocess.Popen([sys.executable, str(REPO / "train_multi_gpu.py"), *args], env=env, **kw)


@pytest.mark.slow  # CI runs it (.ci/run); about 20 s on 2 cores, kept out of the default 15 minutes
def test_wrapper_cli_with_two_cpu_replicas(dataset, tmp_path):
    d, classes = dataset
    out = tmp_path / "w"
    args = [a for a in _args(d, classes, out, "--cpu-replicas", "2", "--epochs", "1")
            if a != "--quiet"]
    p = _run_cli(args)  # without --quiet: the stage line is information
    text, _ = p.communicate(timeout=300)
    assert p.returncode == 0, text
    assert "2 replica(s)" in text and (out / "final.weights.h5").exists()
    assert not [p for p in out.iterdir() if p.suffix in (".png", ".jpg")]  # --no-pictures


_CHECKPOINTS = ("last.weights.h5", "last.keras", "resume.json")  # rewritten after every epoch
_RESUMED = re.compile(r"resuming from \S+ after epoch (\d+)")


def _mtimes(out):
    return {n: (out / n).stat().st_mtime_ns for n in _CHECKPOINTS if (out / n).exists()}


def _wait(condition, p, log, timeout=240.0):
    """Poll ``condition()`` every 10 ms; fail with the log if ``p`` exits or time runs out first."""
    deadline = time.monotonic() + timeout
    while not condition():
        assert p.poll() is None, f"training exited early ({p.returncode}):\n{log.read_text()[-3000:]}"
        assert time.monotonic() < deadline, f"timed out:\n{log.read_text()[-3000:]}"
        time.sleep(0.01)


def _kill_at(kind, rng, p, out, log):
    """SIGKILL ``p`` right after a checkpoint file changes, or at a random moment of training."""
    if kind == "checkpoint":
        name = rng.choice(_CHECKPOINTS)
        before = _mtimes(out).get(name)
        _wait(lambda: _mtimes(out).get(name) not in (None, before), p, log)
        time.sleep(rng.uniform(0, 0.2))  # often inside the next file's write
    else:
        _wait(lambda: "stage 2" in log.read_text(), p, log)
        time.sleep(rng.uniform(0, 4))
    p.send_signal(signal.SIGKILL)
    p.wait(timeout=60)


def _check_checkpoints_readable(out, classes):
    """Every checkpoint in ``out`` loads; a temporary (``.tmp-*``) is never taken for one.

    Returns the epoch of the resume state (0 without one)."""
    import keras

    from yolo3.core.fileio import TEMP_PREFIX
    from yolo3.modeling.bodies import build_body
    from yolo3.modeling.loss import yolo_training_model
    from yolo3.ops.anchors import default_anchors
    from yolo3.training.resume import load_resume_state
    n = len(Path(classes).read_text().split())
    for f in out.iterdir():
        if f.name.startswith(TEMP_PREFIX):
            continue  # a killed writer's leftover: removed on the next start
        if f.name.endswith(".keras"):
            assert keras.models.load_model(f, compile=False).output_shape, f
        elif f.name.endswith(".weights.h5"):
            build_body("tiny", n, input_shape=(64, 64)).load_weights(f)
    state = load_resume_state(out)
    if state is None:
        return 0
    assert not state["dir"].startswith(TEMP_PREFIX) and Path(state["path"]).is_dir()
    template = yolo_training_model(build_body("tiny", n, input_shape=(64, 64)), default_anchors("tiny"), n)
    template.load_weights(Path(state["path"]) / "model.weights.h5")
    with np.load(Path(state["path"]) / "optimizer.npz") as data:
        assert int(data["0"]) > 0  # iterations
    return int(state["epoch"])


@pytest.mark.slow
def test_sigkill_at_random_moments_then_resume(dataset, tmp_path):
    """SIGKILL training 3 times (seeded: twice right after a checkpoint file changed, once at a
    random moment; a fourth kill left in the twelfth session, for CI's time); after each kill every checkpoint loads and resume.json names a complete state;
    each --resume run starts at the epoch after that state, history.csv ends with every epoch
    once, and every epoch's losses are those of an unbroken run (the same batches, weights and
    optimiser state: float32 pinned)."""
    d, classes = dataset
    out, log = tmp_path / "k", tmp_path / "log.txt"
    rng = random.Random(1234)
    total = 12

    def flags(folder):
        return _args(d, classes, folder, "--epochs", str(total), "--steps-per-epoch", "2",
                     "--validation-steps", "1", "--precision", "float32", "--resume")
    args = flags(out)
    kinds = ["checkpoint", "checkpoint", "random"]
    rng.shuffle(kinds)
    done = 0
    for kind in kinds:
        with open(log, "w") as f:
            p = _run_cli(args, stdout=f)
        try:
            _kill_at(kind, rng, p, out, log)
        finally:
            if p.poll() is None:
                p.kill()
                p.wait()
        started = _RESUMED.findall(log.read_text())
        assert [int(e) for e in started] == ([done] if done else []), (kind, log.read_text()[-2000:])
        epoch = _check_checkpoints_readable(out, classes)
        assert done <= epoch < total, (kind, epoch)
        rows = _history(out) if (out / "history.csv").exists() else []
        assert rows == list(range(len(rows))) and epoch <= len(rows) <= epoch + 1, (kind, rows, epoch)
        done = epoch
    with open(log, "w") as f:
        p = _run_cli(args, stdout=f)
    try:
        assert p.wait(timeout=600) == 0, log.read_text()[-3000:]
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    text = log.read_text()
    assert [int(e) for e in _RESUMED.findall(text)] == ([done] if done else []), text[-2000:]
    assert _history(out) == list(range(total))  # no epoch repeated, none skipped
    assert _check_checkpoints_readable(out, classes) == total
    assert (out / "final.keras").exists()
    from yolo3.core.fileio import is_temporary
    assert not [f for f in out.iterdir() if is_temporary(f.name)]  # this release's and older
    unbroken = tmp_path / "unbroken"
    p = _run_cli(flags(unbroken))
    text, _ = p.communicate(timeout=600)
    assert p.returncode == 0, text[-3000:]
    np.testing.assert_allclose(_losses(out), _losses(unbroken), rtol=1e-5, atol=0)


def _backup_epoch(folder: Path) -> int:
    """The epoch Keras BackupAndRestore recorded in ``folder`` (0 without a backup)."""
    meta = folder / "training_metadata.json"
    try:
        return int(json.loads(meta.read_text())["epoch"])
    except (OSError, ValueError, KeyError):
        return 0


@pytest.mark.slow
def test_multiworker_restarts_from_backup_after_a_worker_dies(dataset, tmp_path):
    """Two ``--strategy multiworker`` workers; worker 1 is SIGKILLed once its epoch-1 backup exists,
    the chief (stuck in a collective) too; the same command restarted on both continues from the
    backed-up epoch: history.csv lists epochs 0..3 once (a fresh start would repeat epoch 0)."""
    from multidevice_helpers import free_ports, run_cluster, tf_config
    d, classes = dataset
    out, total = tmp_path / "mw", 4
    argv = [sys.executable, str(REPO / "train_multi_gpu.py"),
            *_args(d, classes, out, "--strategy", "multiworker", "--epochs", str(total),
                   "--steps-per-epoch", "2", "--validation-steps", "1", "--freeze-bn")]
    ports = free_ports(2)
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", PYTHONPATH=str(REPO), PYTHONUNBUFFERED="1")
    logs = [tmp_path / f"worker{i}.txt" for i in range(2)]
    procs = []
    try:
        for i, log in enumerate(logs):
            with open(log, "w") as f:
                procs.append(subprocess.Popen(argv, env=dict(env, TF_CONFIG=tf_config(ports, i)),
                                              stdout=f, stderr=subprocess.STDOUT))
        for i in (1, 0):  # both: the chief's backup may lag worker 1's by a moment
            folder = out / (".worker-1" if i else "") / "backup"
            _wait(lambda: _backup_epoch(folder) >= 1, procs[i], logs[i], timeout=300)
        procs[1].send_signal(signal.SIGKILL)
        procs[0].send_signal(signal.SIGKILL)  # waiting for the dead peer's all-reduce otherwise
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
            p.wait()
    saved = _backup_epoch(out / "backup")
    assert saved == _backup_epoch(out / ".worker-1" / "backup") and 1 <= saved < total
    assert _history(out) in (list(range(saved)), list(range(saved + 1)))  # row, then backup
    runs = run_cluster(lambda i: argv, num_workers=2, timeout=400)
    for code, text in runs:
        assert code == 0, text[-3000:]
    assert _history(out) == list(range(total))
    assert (out / "final.keras").exists() and (out / ".worker-1" / "final.weights.h5").exists()
    assert not (out / "backup" / "training_metadata.json").exists()  # deleted once training ends


@pytest.mark.slow  # CI runs it; the reader's dropping and --strict keep their default tests
def test_invalid_boxes_are_dropped_with_a_warning_unless_strict(dataset, tmp_path, capsys):
    d, classes = dataset
    lines = (d / "train.txt").read_text().splitlines()
    lines[0] += " 9,9,2,20,0"        # x2 <= x1
    lines[2] += " 500,500,600,600,1"  # outside the 96x96 image
    bad = tmp_path / "train_bad.txt"
    bad.write_text("\n".join(os.path.join(str(d), l) for l in lines) + "\n")
    args = ["--annotations", str(bad), "--val-annotations", str(d / "val.txt"), "--classes",
            classes, "--variant", "tiny", "--input-size", "64", "--batch-size", "2", "--epochs", "1",
            "--steps-per-epoch", "1", "--validation-steps", "1", "--no-augment", "--quiet"]
    assert main(args + ["--output", str(tmp_path / "lenient")]) == 0
    err = capsys.readouterr().err
    assert f"warning: {bad}:1: box '9,9,2,20,0': x2 <= x1 (2 <= 9) (box dropped)" in err
    assert f"warning: {bad}:3: box 500,500,600,600,1 lies outside the 96x96 image" in err
    assert f"{bad}: 2 invalid boxes dropped" in err
    assert main(args + ["--output", str(tmp_path / "strict"), "--strict"]) == 2
    assert f"yolo3 train: error: {bad}:1: box '9,9,2,20,0': x2 <= x1" in capsys.readouterr().err


@pytest.mark.slow  # CI runs it (.ci/run); about 20 s on 2 cores
def test_tiled_training_through_the_cli_validates_sliced(dataset, tmp_path, monkeypatch):
    """--tile reaches the pipeline (windows of 48 px) and the validation (sliced detection)."""
    from yolo3.data import pipeline
    from yolo3.inference.tiled import TiledDetector
    seen = {"tiles": [], "views": 0}
    original = pipeline.make_dataset

    def spy(records, config, *a, **kw):
        seen["tiles"].append(config.tiles)
        return original(records, config, *a, **kw)
    monkeypatch.setattr("yolo3.data.pipeline.make_dataset", spy)  # tf.data, imported when used
    real_stream = TiledDetector.detect_stream

    def counted(self, images, batch_size=0):
        for found in real_stream(self, images, batch_size):
            seen["views"] += 1
            seen["whole_from"] = self.whole_from
            yield found
    monkeypatch.setattr(TiledDetector, "detect_stream", counted)
    d, classes = dataset
    out = tmp_path / "tiled"
    assert main(_args(d, classes, out, "--freeze-epochs", "0", "--epochs", "1", "--tile", "48",
                      "--tile-whole", "0.5", "--tile-overlap", "0.3", "--tile-whole-from", "12")) == 0
    training, validation = seen["tiles"][:2]
    assert training.size == 48 and training.whole == 0.5 and validation is None
    assert training.whole_from == 12 and seen["whole_from"] == 12  # windows and validation
    assert seen["views"] == 3  # the three validation images, each sliced
    [row] = list(csv.DictReader(open(out / "history.csv")))
    assert math.isfinite(float(row["mAP50_95"]))
    from yolo3.checkpoint.metadata import read_info
    from yolo3.ops.tiles import Slicing
    for model in ("final.keras", "best.keras"):  # detect slices as the run validated
        assert read_info(out / model).slicing == Slicing(48, 0.3, whole_from=12), model
