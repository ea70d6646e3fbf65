"""Checkpoint the template body (never a parallel wrapper), atomically, and keep resume state.

Files in ``output_dir``:

- ``best.weights.h5`` / ``best.keras``: the body with the best monitored value so far;
- ``last.weights.h5`` / ``last.keras``: the body after the last completed epoch;
- ``resume.json`` plus ``resume-<epoch>/`` (template weights, optimiser variables): the state
  ``--resume`` restores.

``.keras`` checkpoints carry the model's :class:`~yolo3.metadata.ModelInfo` (variant, anchors,
masks, classes, input size). Every file is written atomically (:mod:`yolo3.saving`);
:func:`remove_stale_temporaries` deletes what a killed writer left behind.
"""
from __future__ import annotations

import json
import math
import os
import shutil
import tempfile
from pathlib import Path
from typing import Dict, Optional, Sequence, Union

import keras
import numpy as np

from yolo3.history import truncate_history
from yolo3.keras_compat import load_weights_without, save_weights_without
from yolo3.metadata import ModelInfo
from yolo3.saving import (TEMP_PREFIX, atomic_save_model, atomic_save_weights, atomic_write,
                          fsync_dir, fsync_file)

__all__ = ["atomic_write", "atomic_save_weights", "atomic_save_model", "TemplateCheckpoint",
           "ResumeState", "save_resume_state", "load_resume_state", "restore_resume_state",
           "StopOnNaN", "remove_stale_temporaries", "truncate_history", "TEMP_PREFIX"]

PathLike = Union[str, os.PathLike]


def remove_stale_temporaries(output_dir: PathLike) -> int:
    """Delete the ``.tmp-*`` files and folders a killed writer left in ``output_dir``; returns how many.

    Call it only where no other process writes into ``output_dir`` at the same time.
    """
    removed = 0
    for path in Path(output_dir).glob(f"{TEMP_PREFIX}*"):
        if path.is_dir():
            shutil.rmtree(path, ignore_errors=True)
        else:
            path.unlink(missing_ok=True)
        removed += 1
    return removed


def _save_weights_without_optimizer(model: keras.Model, path: Path) -> None:
    """``model.save_weights(path)`` without the optimiser variables a compiled model would add.

    Those go to ``optimizer.npz``; left in the weights file, loading it into a compiled model whose
    optimiser is not built yet warns "Skipping variable loading for optimizer".
    """
    save_weights_without(model, str(path), skip=_optimizer_of(model))


def _load_weights_without_optimizer(model: keras.Model, path: PathLike) -> None:
    """``model.load_weights(path)`` leaving a compiled model's optimiser alone (see optimizer.npz)."""
    load_weights_without(model, str(path), skip=_optimizer_of(model))


def _optimizer_of(model: keras.Model) -> Optional[list]:
    optimizer = getattr(model, "optimizer", None)
    return [optimizer] if optimizer is not None else None


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
    tmp = Path(tempfile.mkdtemp(prefix=f"{TEMP_PREFIX}{name}-", dir=output_dir))
    try:
        _save_weights_without_optimizer(template, tmp / "model.weights.h5")
        fsync_file(tmp / "model.weights.h5")
        if optimizer is not None and optimizer.built:
            store: Dict[str, np.ndarray] = {}
            optimizer.save_own_variables(store)
            with open(tmp / "optimizer.npz", "wb") as f:
                np.savez(f, **store)
                f.flush()
                os.fsync(f.fileno())
        fsync_dir(tmp)
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
                         optimizer: Optional[keras.optimizers.Optimizer] = None,
                         variables: Optional[Sequence] = None) -> None:
    """Load the template weights and, when saved and given, the optimiser variables of ``state``.

    An unbuilt optimiser is built first on ``variables``: the trainable variables of the model that
    is fitted (a replica wrapper may order them differently), ``template.trainable_variables`` by
    default. They must be those of the stage that saved the state.
    """
    _load_weights_without_optimizer(template, os.path.join(state["path"], "model.weights.h5"))
    opt_file = os.path.join(state["path"], "optimizer.npz")
    if optimizer is not None and os.path.exists(opt_file):
        if not optimizer.built:
            optimizer.build(list(variables) if variables is not None
                            else template.trainable_variables)
        with np.load(opt_file) as data:
            store = {k: data[k] for k in data.files}
        if len(store) != len(optimizer.variables):
            raise ValueError(f"optimiser state in {opt_file} has {len(store)} variables, the "
                             f"optimiser has {len(optimizer.variables)}: different trainable layers?")
        optimizer.load_own_variables(store)


class TemplateCheckpoint(keras.callbacks.Callback):
    """Save ``body`` (the template's body, not ``self.model``) as best and last, plus resume state.

    ``template`` is the single-device training model whose weights (and ``self.model``'s optimiser)
    the resume state holds. ``monitor`` is the value that picks ``best``: lower is better unless
    ``mode="max"``; when it is missing from an epoch's logs, ``loss`` (minimised) stands in.
    ``info`` is written into the ``.keras`` checkpoints.
    """

    def __init__(self, body: keras.Model, output_dir: PathLike, template: Optional[keras.Model] = None,
                 monitor: str = "val_loss", save_keras: bool = True, save_resume: bool = True,
                 best: Optional[float] = None, verbose: int = 1, info: Optional[ModelInfo] = None,
                 mode: str = "min"):
        super().__init__()
        if mode not in ("min", "max"):
            raise ValueError(f"mode must be 'min' or 'max', got {mode!r}")
        self.body = body
        self.template = template
        self.output_dir = Path(output_dir)
        self.monitor = monitor
        self.mode = mode
        self.save_keras = save_keras
        self.save_resume = save_resume and template is not None
        worst = -math.inf if mode == "max" else math.inf
        self.best = worst if best is None else float(best)
        self.verbose = verbose
        self.info = info

    def _save(self, stem: str) -> None:
        atomic_save_weights(self.body, self.output_dir / f"{stem}.weights.h5")
        if self.save_keras:
            atomic_save_model(self.body, self.output_dir / f"{stem}.keras", self.info)

    def _improves(self, value: float) -> bool:
        return value > self.best if self.mode == "max" else value < self.best

    def on_epoch_end(self, epoch: int, logs: Optional[dict] = None) -> None:
        logs = logs or {}
        value = logs.get(self.monitor, logs.get("loss"))
        if value is None or not math.isfinite(float(value)):
            return  # never overwrite a good checkpoint with a NaN model
        self.output_dir.mkdir(parents=True, exist_ok=True)
        self._save("last")
        if self._improves(float(value)):
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
