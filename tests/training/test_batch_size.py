"""yolo3.training.batch_size: the ladder's choice against every rung measured (synthetic curves),
the step's memory measured on TensorFlow (run) and JAX (XLA's analysis, a fresh process), a ladder
that fits nothing, and running out of memory in the middle of training (forced): exit 2 with the
batch that failed, one to try and the checkpoint kept."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import keras
import pytest
from locations import REPO

from yolo3.cli.train import main
from yolo3.core.errors import NotEnoughMemory
from yolo3.training import batch_size
from yolo3.training.batch_size import (
    LADDER,
    TrainingOutOfMemory,
    is_out_of_memory,
    out_of_memory_message,
    pick_rung,
)
from yolo3.training.train import train

GB = 10 ** 9


def _best(curve, allowed, ladder):
    fitting = [r for r in ladder if curve(r) is not None and curve(r) <= allowed]
    return max(fitting) if fitting else None


@pytest.mark.parametrize("ascending", [False, True])
@pytest.mark.parametrize("curve", [
    lambda b: 300_000_000 + 150_000_000 * b,  # XLA's figures for tiny at 416: a line
    lambda b: 400_000_000 + 100_000_000 * b + 2_000_000 * b * b,  # convex
    lambda b: 50_000_000 * b if b <= 64 else None,  # out of memory above 64
])
def test_the_choice_is_the_largest_rung_that_fits(curve, ascending):
    for allowed in (0.5 * GB, 0.9 * GB, 2 * GB, 3.3 * GB, 8 * GB, 40 * GB, 10 ** 15):
        calls = []

        def measure(b):
            calls.append(b)
            return curve(b)
        best = _best(curve, allowed, LADDER)
        if best is None:
            with pytest.raises(NotEnoughMemory, match="even a batch of 1 per replica"):
                pick_rung(measure, int(allowed), LADDER, ascending)
            continue
        chosen, needed, above = pick_rung(measure, int(allowed), LADDER, ascending,
                                          safe=int(allowed * 1.5))
        assert (chosen, needed) == (best, curve(best)), (allowed, calls)
        if best < LADDER[-1]:
            # measured: its figure (None: out of memory); not measured: the line's, above
            assert above[0] == 2 * best and (
                above[1] is None if 2 * best in calls and curve(2 * best) is None
                else above[1] > allowed)
        else:
            assert above is None
        assert len(calls) == len(set(calls))  # each rung measured once
        if ascending:  # never a rung beyond the first that does not fit
            assert calls == sorted(calls) and sum(c > best for c in calls) <= 1
        else:
            assert len(calls) <= 6


def test_nothing_fits_names_the_smallest_batch_and_the_figures():
    with pytest.raises(NotEnoughMemory) as caught:
        pick_rung(lambda b: 3 * GB, 2 * GB, LADDER)
    assert str(caught.value) == ("batch_size auto: even a batch of 1 per replica needs 3.0 GB, "
                                 "more than the 2.0 GB allowed for the training step: choose a "
                                 "smaller input_size or variant")


_FRESH = """
import json, sys
from yolo3.config.train_config import TrainConfig
from yolo3.training import batch_size
from yolo3.training.data_step import prepare_data
config = TrainConfig(annotations=sys.argv[1], classes=sys.argv[2], output=sys.argv[3],
                     model="tiny", input_size=320)
data = prepare_data(config)
allowed = int(sys.argv[4])
if allowed:
    batch_size.device_memory = lambda replicas: (allowed, "a test device")
    choice = batch_size.choose_batch_size(config, data, replicas=1)
    result = dict(batch=choice.batch, needed=choice.needed, above=choice.above,
                  method=choice.method, text=choice.describe())
else:  # the child the choice runs its steps in, measured the same way
    child = batch_size._StepProcess(config)
    result = {b: child.measure(b) for b in (1, 2, 4, 8)}
    child.close()
print("@@" + json.dumps(result))
"""


def _fresh(dataset, tmp_path, allowed: int, backend: str = "tensorflow"):
    """:data:`_FRESH` in a new process: the step's figures at 1, 2, 4, 8 (``allowed`` 0), or the
    choice for ``allowed`` bytes."""
    ann, classes = dataset
    env = dict(os.environ, KERAS_BACKEND=backend, PYTHONPATH=str(REPO))
    done = subprocess.run([sys.executable, "-c", _FRESH, str(ann), classes, str(tmp_path / "o"),
                           str(allowed)], capture_output=True, text=True, env=env, timeout=600)
    line = [x for x in done.stdout.splitlines() if x.startswith("@@")]
    assert line, done.stderr[-3000:]
    return json.loads(line[0][2:])


@pytest.mark.slow  # CI runs it (.ci/run): two fresh TensorFlow processes, about 40 s
def test_tensorflow_runs_the_steps_and_chooses_the_largest_that_fits(dataset, tmp_path):
    """TensorFlow on the CPU: the steps are run in a child process, their peaks (VmHWM's rise)
    grow with the batch; allowed between the figures of 4 and 8, the choice (in another child)
    is 4, and says 8 would need more."""
    figures = {int(k): v for k, v in _fresh(dataset, tmp_path, 0).items()}
    assert figures[2] < figures[4] < figures[8], figures
    allowed = (figures[4] + figures[8]) // 2
    choice = _fresh(dataset, tmp_path, allowed)
    assert choice["batch"] == 4 and choice["needed"] <= allowed < choice["above"][1], (
        figures, choice)
    assert choice["method"] == "the peak of one step run in a process of its own"
    assert choice["text"].startswith("batch size auto: 4 per replica: its training step needs ")


@pytest.mark.slow  # CI runs it (.ci/run): four steps run on TensorFlow, about 10 s
def test_tensorflow_chooses_within_the_allowance_and_the_training_set_caps_it(step_config,
                                                                             monkeypatch):
    config = step_config(input_size=64)
    from yolo3.training.data_step import prepare_data
    data = prepare_data(config)
    monkeypatch.setattr(batch_size, "device_memory", lambda replicas: (10 ** 15, "a big device"))
    big = batch_size.choose_batch_size(config, data, replicas=2)
    assert big.batch == max(r for r in LADDER if r <= len(data.records) // 2)
    assert big.needed > 0 and "training images make" in big.describe()


@pytest.mark.slow  # CI runs it (.ci/run): a fresh JAX process compiling seven steps, about 30 s
def test_jax_analyses_the_compiled_step_without_running_it(dataset, tmp_path):
    """A fresh process on JAX: XLA's figures grow with the batch, and allowed between those of
    2 and 4 the choice is 2, with 4's figure beside it (the analysis does not depend on what
    ran before: one process does both)."""
    ann, classes = dataset
    code = f"""
import json
from yolo3.config.train_config import TrainConfig
from yolo3.training import batch_size
from yolo3.training.data_step import prepare_data
config = TrainConfig(annotations={str(ann)!r}, classes={classes!r},
                     output={str(tmp_path / "o")!r}, model="tiny", input_size=96)
data = prepare_data(config)
measure = batch_size._jax_step_bytes(batch_size._probe_template(config, data), config)
figures = {{b: measure(b) for b in (1, 2, 4)}}
allowed = (figures[2] + figures[4]) // 2
batch_size.device_memory = lambda replicas: (allowed, "a test device")
choice = batch_size.choose_batch_size(config, data, replicas=1)
print("@@" + json.dumps(dict(figures=figures, allowed=allowed, batch=choice.batch,
                             needed=choice.needed, above=choice.above, method=choice.method)))
"""
    env = dict(os.environ, KERAS_BACKEND="jax", PYTHONPATH=str(REPO), JAX_PLATFORMS="cpu")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                          timeout=600)
    line = [x for x in done.stdout.splitlines() if x.startswith("@@")]
    assert line, done.stderr[-3000:]
    got = json.loads(line[0][2:])
    f = {int(k): v for k, v in got["figures"].items()}
    assert f[1] < f[2] < f[4]
    assert got["batch"] == 2 and got["needed"] == f[2] and got["above"] == [4, f[4]]
    assert got["method"] == "XLA's memory analysis of the step"


def test_a_ladder_that_fits_nothing_exits_2_before_writing(dataset, tmp_path, monkeypatch,
                                                           capsys):
    ann, classes = dataset
    monkeypatch.setattr(batch_size, "device_memory", lambda replicas: (1000, "a tiny device"))

    class Steps:  # the child's steps (tested on their own in the slow set): 2 kB each
        def __init__(self, config):
            pass

        def measure(self, batch):
            return 2000 * batch

        def close(self):
            pass
    monkeypatch.setattr(batch_size, "_StepProcess", Steps)
    out = tmp_path / "out"
    code = main(["--annotations", str(ann), "--classes", classes, "--variant", "tiny",
                 "--input-size", "64", "--batch-size", "auto", "--output", str(out), "--quiet"])
    assert code == 2
    err = capsys.readouterr().err
    assert "batch_size auto: even a batch of 1 per replica needs" in err or (
        "--batch-size auto: even a batch of 1 per replica needs" in err), err
    assert "Traceback" not in err and not out.exists()


def test_out_of_memory_errors_of_every_backend_are_recognised():
    import tensorflow as tf
    assert is_out_of_memory(tf.errors.ResourceExhaustedError(None, None, "OOM when allocating"))
    assert is_out_of_memory(MemoryError())
    assert is_out_of_memory(RuntimeError("RESOURCE_EXHAUSTED: Out of memory while trying to "
                                         "allocate 4.2GiB"))
    assert is_out_of_memory(RuntimeError("CUDA out of memory. Tried to allocate 2.00 GiB"))
    assert not is_out_of_memory(ValueError("shapes do not match"))
    assert out_of_memory_message(1, 1, 1, None, 0) == (
        "out of memory in epoch 1 at batch size 1 per replica (global 1): a batch of 1 is the "
        "smallest: try a smaller --input-size or --variant; no epoch had finished, so no "
        "checkpoint was written")


@pytest.mark.slow  # CI runs it (.ci/run): a two-epoch run, about 17 s
def test_running_out_of_memory_in_training_names_the_batch_and_the_checkpoint(step_config,
                                                                             tmp_path):
    """Forced: TensorFlow's out-of-memory error raised inside fit in epoch 2 (the second
    stage); the run ends with one message, and the checkpoint of epoch 1 is kept and resumes."""
    import tensorflow as tf

    class Exhaust(keras.callbacks.Callback):
        def on_train_batch_end(self, batch, logs=None):
            if self.epoch == 1:
                raise tf.errors.ResourceExhaustedError(
                    None, None, "OOM when allocating tensor with shape[8,64,64,16]")

        def on_epoch_begin(self, epoch, logs=None):
            self.epoch = epoch
    config = step_config(epochs=2, freeze_epochs=1, batch_size=4)
    with pytest.raises(TrainingOutOfMemory) as caught:
        train(config, callbacks=[Exhaust()])
    out = Path(config.output.output_dir)
    assert str(caught.value) == (
        "out of memory in epoch 2 at batch size 4 per replica (global 4): try --batch-size 2 "
        f"(or --batch-size auto); the last checkpoint, after epoch 1, is kept: "
        f"{out / 'last.keras'} (--resume continues from it)")
    assert (out / "last.keras").is_file() and (out / "resume.json").is_file()
    assert not [p for p in out.iterdir() if p.name.startswith(".tmp")]


@pytest.mark.slow  # CI runs it (.ci/run): a child process starting TensorFlow, about 15 s
def test_a_step_process_killed_for_its_memory_means_the_rung_does_not_fit(step_config):
    """The CPU's steps run in a child: killed (as the system's OOM killer does), that rung and
    every later one do not fit, and the run goes on; a child that fails otherwise is named."""
    import signal as signals
    child = batch_size._StepProcess(step_config(input_size=64))
    try:
        assert child.measure(1) > 0
        os.kill(child._process.pid, signals.SIGKILL)
        assert child.measure(2) is None and child.measure(4) is None
    finally:
        child.close()
    broken = batch_size._StepProcess(step_config(input_size=64, annotations="/nowhere.txt"))
    try:
        with pytest.raises(Exception, match="batch_size auto: measuring the training step failed"):
            broken.measure(1)
    finally:
        broken.close()


def test_the_images_kept_on_the_device_are_left_room(step_config, monkeypatch):
    """``cache device``: the step's share is taken of what the images leave; the choice says so
    (steps measured by a stand-in: 1 MB per image)."""
    from yolo3.training.data_step import prepare_data
    config = step_config(input_size=64)
    data = prepare_data(config)

    class Steps:
        def __init__(self, config):
            pass

        def measure(self, batch):
            return batch * 10 ** 6

        def close(self):
            pass

    monkeypatch.setattr(batch_size, "_StepProcess", Steps)
    monkeypatch.setattr(batch_size, "accelerator_memory", lambda backend: (None, ""))
    monkeypatch.setattr(batch_size, "device_memory", lambda replicas: (6 * 10 ** 6, "a device"))
    assert batch_size.choose_batch_size(config, data, replicas=1).batch == 4
    kept = batch_size.choose_batch_size(config, data, replicas=1, reserved=5 * 10 ** 6)
    assert kept.batch == 2 and kept.allowed == 3 * 10 ** 6
    assert "a device, less 0.0 GB of images kept there" in kept.describe()
