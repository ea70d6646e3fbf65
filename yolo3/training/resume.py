"""Resume state: what ``--resume`` continues from, in the run's output folder.

``resume.json`` points to ``resume-<epoch>/``, which holds the training template's weights
(``model.weights.h5``) and the optimiser's variables (``optimizer.npz``). The folder is written
whole before the pointer is switched (:meth:`yolo3.core.output_folder.OutputFolder.write_tree`), so a
crash at any moment leaves the previous or the new state readable.
"""
from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Dict, Optional, Sequence, Union

import keras
import numpy as np

from yolo3.core.errors import FileFormatError, PathLike
from yolo3.core.output_folder import OutputFolder
from yolo3.modeling.keras_compat import (
    load_weights_without,
    save_weights_without,
    swap_ema_weights,
    uses_ema,
)

__all__ = ["ResumeState", "save_resume_state", "load_resume_state", "restore_resume_state",
           "check_resume_files", "save_weights_without_optimizer",
           "load_weights_without_optimizer"]


def save_weights_without_optimizer(model: keras.Model, path: Path) -> None:
    """``model.save_weights(path)`` without the optimiser variables a compiled model would add.

    Those go to ``optimizer.npz``; left in the weights file, loading it into a compiled model whose
    optimiser is not built yet warns "Skipping variable loading for optimizer".
    """
    save_weights_without(model, str(path), skip=_optimizer_of(model))


def load_weights_without_optimizer(model: keras.Model, path: PathLike) -> None:
    """``model.load_weights(path)`` leaving a compiled model's optimiser alone (see optimizer.npz)."""
    load_weights_without(model, str(path), skip=_optimizer_of(model))


def _optimizer_of(model: keras.Model) -> Optional[list]:
    optimizer = getattr(model, "optimizer", None)
    return [optimizer] if optimizer is not None else None


class ResumeState(dict):
    """``{'epoch': completed epochs, 'best': best monitored value, 'dir': state folder}``."""


def save_resume_state(folder: Union[OutputFolder, PathLike], epoch: int, template: keras.Model,
                      optimizer: Optional[keras.optimizers.Optimizer], best: float,
                      ema_in_model: bool = False, variant: Optional[str] = None) -> Path:
    """Write ``resume-<epoch>/`` (weights + optimiser variables) into the run's output
    ``folder`` (an :class:`~yolo3.core.output_folder.OutputFolder`, or its path), then switch
    ``resume.json`` to it.

    ``ema_in_model``: the model holds the EMA weights and the optimiser's averages the trained ones
    (``keras.callbacks.SwapEMAWeights`` swapped them for the epoch's end); restoring swaps back.
    The pointer file is replaced atomically after the folder is complete, so a crash at any moment
    leaves a readable previous or new state; yolo3's files of older states are removed afterwards
    (a file of the user's among them is kept).
    """
    if not isinstance(folder, OutputFolder):
        with OutputFolder(folder, "output_dir") as opened:
            return save_resume_state(opened, epoch, template, optimizer, best, ema_in_model,
                                     variant)
    name = f"resume-{epoch:05d}"

    def write(tmp: Path) -> None:
        save_weights_without_optimizer(template, tmp / "model.weights.h5")
        if optimizer is not None and optimizer.built:
            store: Dict[str, np.ndarray] = {}
            optimizer.save_own_variables(store)
            with open(tmp / "optimizer.npz", "wb") as f:
                np.savez(f, **store)
    final = folder.write_tree(name, write)
    state = {"epoch": int(epoch), "best": None if not math.isfinite(best) else float(best),
             "dir": name, "ema_in_model": bool(ema_in_model)}
    if variant is not None:
        state["variant"] = variant  # so that --resume with another --model is refused
    folder.write_text("resume.json", json.dumps(state))
    for old in sorted(folder.path.glob("resume-*")):
        if old.name != name and old.is_dir() and not old.is_symlink():
            folder.remove_tree(old.name)
    return final


def load_resume_state(output_dir: PathLike) -> Optional[ResumeState]:
    """The last complete resume state in ``output_dir``, or None when there is none."""
    pointer = Path(output_dir) / "resume.json"
    if not pointer.exists():
        return None
    try:
        raw = json.loads(pointer.read_text(encoding="utf-8-sig"))
    except ValueError as e:
        raise ValueError(f"not valid JSON ({e})") from None
    if not (isinstance(raw, dict) and isinstance(raw.get("epoch"), int)
            and isinstance(raw.get("dir"), str) and "/" not in raw["dir"] and ".." not in raw["dir"]):
        raise ValueError("expected an object with an integer 'epoch' and a folder name 'dir'")
    state = ResumeState(raw)
    if not (Path(output_dir) / state["dir"] / "model.weights.h5").exists():
        raise FileNotFoundError(f"{pointer} points to {state['dir']}, which is incomplete or missing")
    state["path"] = str(Path(output_dir) / state["dir"])
    return state


def _damaged(path: Path, e: BaseException) -> FileFormatError:
    reason = str(e).splitlines()[0][:200] if str(e).strip() else type(e).__name__
    return FileFormatError(path, f"cannot resume from it: the file is damaged ({reason}); the run "
                                 "folder is kept as it is: resume an earlier copy, or train it "
                                 "again from the start without --resume")


def check_resume_files(state: ResumeState) -> None:
    """Read every value of a state's ``model.weights.h5`` and ``optimizer.npz`` once, so that a
    truncated or damaged file is refused (FileFormatError naming it) before anything is written,
    not met as HDF5's or zipfile's own error while loading."""
    import zipfile

    import h5py
    weights = Path(state["path"]) / "model.weights.h5"
    try:
        with h5py.File(weights, "r") as f:
            def read(name, item):
                if isinstance(item, h5py.Dataset):
                    item[()]
            f.visititems(read)
    except (OSError, ValueError, KeyError, RuntimeError) as e:
        raise _damaged(weights, e) from None
    optimizer = Path(state["path"]) / "optimizer.npz"
    if optimizer.exists():
        try:
            with np.load(optimizer) as data:
                for key in data.files:
                    data[key]
        except (OSError, ValueError, EOFError, KeyError, zipfile.BadZipFile) as e:
            raise _damaged(optimizer, e) from None


def restore_resume_state(state: ResumeState, template: keras.Model,
                         optimizer: Optional[keras.optimizers.Optimizer] = None,
                         variables: Optional[Sequence] = None) -> None:
    """Load the template weights and, when saved and given, the optimiser variables of ``state``.

    An unbuilt optimiser is built first on ``variables``: the trainable variables of the model that
    is fitted (a replica wrapper may order them differently), ``template.trainable_variables`` by
    default. They must be those of the stage that saved the state.
    """
    load_weights_without_optimizer(template, os.path.join(state["path"], "model.weights.h5"))
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
        if state.get("ema_in_model") and uses_ema(optimizer):
            swap_ema_weights(optimizer)  # back to training weights in the model, EMA in averages
