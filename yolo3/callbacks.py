"""Checkpoint the template body (never a parallel wrapper), atomically, and keep resume state.

Files in ``output_dir``:

- ``best.weights.h5`` / ``best.keras``: the body with the lowest monitored loss so far;
- ``last.weights.h5`` / ``last.keras``: the body after the last completed epoch;
- ``resume.json`` plus ``resume-<epoch>/`` (template weights, optimiser variables): the state
  ``--resume`` restores.

Every file is written to a temporary name in the same folder, flushed to disk and renamed over the
old one, so a crash (even SIGKILL) leaves either the old or the new file, never half of one.
"""
from __future__ import annotations

import json
import math
import os
import shutil
import tempfile
from pathlib import Path
from typing import Callable, Dict, Optional, Union

import keras
import numpy as np

__all__ = ["atomic_write", "atomic_save_weights", "atomic_save_model", "TemplateCheckpoint",
           "ResumeState", "save_resume_state", "load_resume_state", "restore_resume_state",
           "StopOnNaN"]

PathLike = Union[str, os.PathLike]


def _fsync_file(path: PathLike) -> None:
    with open(path, "rb") as f:
        os.fsync(f.fileno())


def _fsync_dir(path: PathLike) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def atomic_write(path: PathLike, writer: Callable[[str], None], suffix: str = "") -> Path:
    """Call ``writer(tmp_path)`` with a temporary file beside ``path`` (ending in ``suffix``), then
    flush it and rename it over ``path``. The temporary file is removed if ``writer`` fails."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".tmp-{path.name}-", suffix=suffix, dir=path.parent)
    os.close(fd)
    os.unlink(tmp)  # Keras refuses to overwrite silently in some versions; let it create the file
    try:
        writer(tmp)
        _fsync_file(tmp)
        os.replace(tmp, path)
        _fsync_dir(path.parent)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return path


def atomic_save_weights(model: keras.Model, path: PathLike) -> Path:
    """``model.save_weights(path)`` (a ``.weights.h5`` name), atomically."""
    if not str(path).endswith(".weights.h5"):
        raise ValueError(f"weights file name must end in .weights.h5, got {path}")
    return atomic_write(path, lambda tmp: model.save_weights(tmp), suffix=".weights.h5")


def atomic_save_model(model: keras.Model, path: PathLike) -> Path:
    """``model.save(path)`` (a ``.keras`` name, without optimizer), atomically."""
    if not str(path).endswith(".keras"):
        raise ValueError(f"model file name must end in .keras, got {path}")
    return atomic_write(path, lambda tmp: model.save(tmp, include_optimizer=False), suffix=".keras")


class ResumeState(dict):
    """``{'epoch': completed epochs, 'best': best monitored value, 'dir': state folder}``."""


def save_resume_state(output_dir: PathLike, epoch: int, template: keras.Model,
                      optimizer: Optional[keras.optimizers.Optimizer], best: float) -> Path:
    """Write ``resume-<epoch>/`` (weights + optimiser variables), then switch ``resume.json`` to it.

    The pointer file is replaced atomically after the folder is complete, so a crash at any moment
    leaves a readable previous or new state; older folders are removed afterwards.
    """
    output_dir = Path(output_dir)
    name = f"resume-{epoch:05d}"
    final = output_dir / name
    tmp = Path(tempfile.mkdtemp(prefix=f".tmp-{name}-", dir=output_dir))
    try:
        template.save_weights(str(tmp / "model.weights.h5"))
        _fsync_file(tmp / "model.weights.h5")
        if optimizer is not None and optimizer.built:
            store: Dict[str, np.ndarray] = {}
            optimizer.save_own_variables(store)
            with open(tmp / "optimizer.npz", "wb") as f:
                np.savez(f, **store)
                f.flush()
                os.fsync(f.fileno())
        _fsync_dir(tmp)
        if final.exists():
            shutil.rmtree(final)
        os.replace(tmp, final)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    state = {"epoch": int(epoch), "best": None if not math.isfinite(best) else float(best),
             "dir": name}
    atomic_write(output_dir / "resume.json",
                 lambda p: Path(p).write_text(json.dumps(state), encoding="utf-8"), suffix=".json")
    for old in output_dir.glob("resume-*"):
        if old.name != name and old.is_dir():
            shutil.rmtree(old, ignore_errors=True)
    return final


def load_resume_state(output_dir: PathLike) -> Optional[ResumeState]:
    """The last complete resume state in ``output_dir``, or None when there is none."""
    pointer = Path(output_dir) / "resume.json"
    if not pointer.exists():
        return None
    state = ResumeState(json.loads(pointer.read_text(encoding="utf-8")))
    if not (Path(output_dir) / state["dir"] / "model.weights.h5").exists():
        raise FileNotFoundError(f"{pointer} points to {state['dir']}, which is incomplete or missing")
    state["path"] = str(Path(output_dir) / state["dir"])
    return state


def restore_resume_state(state: ResumeState, template: keras.Model,
                         optimizer: Optional[keras.optimizers.Optimizer] = None) -> None:
    """Load the template weights and, when saved and given, the optimiser variables of ``state``.

    The optimiser is built on ``template.trainable_variables`` first (same stage, same layout).
    """
    template.load_weights(os.path.join(state["path"], "model.weights.h5"))
    opt_file = os.path.join(state["path"], "optimizer.npz")
    if optimizer is not None and os.path.exists(opt_file):
        if not optimizer.built:
            optimizer.build(template.trainable_variables)
        with np.load(opt_file) as data:
            store = {k: data[k] for k in data.files}
        if len(store) != len(optimizer.variables):
            raise ValueError(f"optimiser state in {opt_file} has {len(store)} variables, the "
                             f"optimiser has {len(optimizer.variables)}: different trainable layers?")
        optimizer.load_own_variables(store)


class TemplateCheckpoint(keras.callbacks.Callback):
    """Save ``body`` (the template's body, not ``self.model``) as best and last, plus resume state.

    ``template`` is the single-device training model whose weights (and ``self.model``'s optimiser)
    the resume state holds; ``epoch_offset`` is unused by Keras (epochs are absolute already).
    """

    def __init__(self, body: keras.Model, output_dir: PathLike, template: Optional[keras.Model] = None,
                 monitor: str = "val_loss", save_keras: bool = True, save_resume: bool = True,
                 best: float = math.inf, verbose: int = 1):
        super().__init__()
        self.body = body
        self.template = template
        self.output_dir = Path(output_dir)
        self.monitor = monitor
        self.save_keras = save_keras
        self.save_resume = save_resume and template is not None
        self.best = math.inf if best is None else float(best)
        self.verbose = verbose

    def _save(self, stem: str) -> None:
        atomic_save_weights(self.body, self.output_dir / f"{stem}.weights.h5")
        if self.save_keras:
            atomic_save_model(self.body, self.output_dir / f"{stem}.keras")

    def on_epoch_end(self, epoch: int, logs: Optional[dict] = None) -> None:
        logs = logs or {}
        value = logs.get(self.monitor, logs.get("loss"))
        if value is None or not math.isfinite(float(value)):
            return  # never overwrite a good checkpoint with a NaN model
        self.output_dir.mkdir(parents=True, exist_ok=True)
        self._save("last")
        if float(value) < self.best:
            if self.verbose:
                print(f"\nEpoch {epoch + 1}: {self.monitor} improved from {self.best:.5g} to "
                      f"{float(value):.5g}, saving {self.output_dir / 'best.weights.h5'}")
            self.best = float(value)
            self._save("best")
        if self.save_resume:
            save_resume_state(self.output_dir, epoch + 1, self.template,
                              getattr(self.model, "optimizer", None), self.best)


class StopOnNaN(keras.callbacks.Callback):
    """Stop training on the first non-finite batch loss, with a message; sets ``self.stopped``."""

    def __init__(self):
        super().__init__()
        self.stopped = False
        self.message = ""

    def on_train_batch_end(self, batch: int, logs: Optional[dict] = None) -> None:
        loss = (logs or {}).get("loss")
        if loss is not None and not math.isfinite(float(loss)):
            self.stopped = True
            self.message = (f"non-finite loss ({loss}) at batch {batch}: training stopped; the last "
                            "good checkpoint is kept")
            print(f"\n{self.message}")
            self.model.stop_training = True
