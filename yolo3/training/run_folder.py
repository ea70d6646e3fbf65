"""The run folder of training: checked before anything is written (the ownership rule, the
resume state), made (side files), resumed from, and the final model saved into it."""
from __future__ import annotations

import json
import logging
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Optional, Tuple

import keras
import numpy as np

from yolo3.checkpoint.metadata import ModelInfo
from yolo3.checkpoint.saving import model_writer, weights_writer
from yolo3.config.train_config import ConfigError, TrainConfig
from yolo3.core.fileio import make_temporary_folder, remove_stale_temporaries
from yolo3.core.log import NOTICE
from yolo3.core.output_folder import OutputFolder, check_output_folder
from yolo3.core.paths import check_output_dir
from yolo3.data.class_names import classes_text, fits_classes_file, read_classes
from yolo3.evaluation.full_evaluation import picture_paths
from yolo3.evaluation.report import REPORT
from yolo3.modeling.graph_surgery import float32_body
from yolo3.ops.anchors import read_anchors
from yolo3.training.callbacks import StopOnNaN
from yolo3.training.data_step import TrainData
from yolo3.training.distribute import (
    ClusterTask,
)
from yolo3.training.history import truncate_history
from yolo3.training.pictures import PICTURES
from yolo3.training.resume import check_resume_files, load_resume_state
from yolo3.training.trackers import TRACKER_FILE

logger = logging.getLogger(__name__)


# the top-level entries of a run folder (fnmatch patterns): in a folder without a manifest (the
# run folders of yolo3 0.3 and earlier) they are yolo3's only when the user resumes it
RUN_FOLDER_ENTRIES = ("anchors.txt", "classes.txt", "history.csv", "logs", "resume.json",
                      "resume-[0-9]*", "final.keras", "final.weights.h5", "best.keras",
                      "best.weights.h5", "last.keras", "last.weights.h5", "backup", ".worker-*",
                      "diagnostics", "run.json", REPORT, *PICTURES)
# the paths a run writes (fnmatch patterns): a file of the user's at one of them is refused, even
# with exist_ok (yolo3.core.output_folder); Keras's BackupAndRestore deletes its whole folder
RUN_FOLDER_WRITES = ("anchors.txt", "classes.txt", "history.csv", "resume.json",
                     "resume-[0-9]*/model.weights.h5", "resume-[0-9]*/optimizer.npz",
                     "final.keras", "final.weights.h5", "best.keras", "best.weights.h5",
                     "last.keras", "last.weights.h5", "backup/*", "diagnostics/diagnostics.json",
                     *picture_paths("diagnostics/").values(), *PICTURES,
                     "run.json", REPORT, TRACKER_FILE)
# files other libraries write into a run as they go: TensorBoard's events, Keras's backup
LIBRARY_WRITES = ("logs/*/events.out.tfevents.*", "backup/latest.weights.h5*",
                  "backup/training_metadata.json*")


@dataclass
class RunFolder:
    """Where this process writes: the output folder (chief) or its worker folder, and the
    :class:`~yolo3.core.output_folder.OutputFolder` every file goes through."""

    output: Path
    write_dir: Path
    chief: bool
    folder: OutputFolder
    # a JAX process other than 0: a temporary folder of its own, removed when the run ends
    # (only process 0 writes the run folder)
    private: bool = False


def check_run_folder(config: TrainConfig, data: TrainData) -> None:
    """Refuse, before anything is written, an ``output_dir`` that is not a folder, one that holds
    files yolo3 did not write (unless ``exist_ok``, and never one of a run's names:
    :data:`RUN_FOLDER_ENTRIES`), and a ``resume`` whose run does not match (its ``resume.json``
    unreadable, its classes, anchors or variant different). Without saved state, ``resume`` says
    that it starts from the beginning."""
    out = Path(check_output_dir(config.output.output_dir, "output_dir"))
    if config.output.resume:  # first: a damaged state is named as such
        check_resume_state(out, data)
    check_output_folder(out, "output_dir", config.output.exist_ok, RUN_FOLDER_WRITES,
                        own_patterns=old_run_entries(config))


def old_run_entries(config: TrainConfig) -> Tuple[str, ...]:
    """The entries counted as yolo3's in an output folder without a manifest: a run's
    (:data:`RUN_FOLDER_ENTRIES`) when the user resumes the run saved there (a run folder of
    yolo3 0.3 and earlier), else none: files named like a run's in a folder of the user's are the
    user's."""
    out = Path(config.output.output_dir)
    return RUN_FOLDER_ENTRIES if config.output.resume and (out / "resume.json").is_file() else ()


def check_resume_state(out: Path, data: TrainData) -> None:
    """Refuse a run's saved state that cannot be resumed: ``resume.json`` unreadable, a state
    file damaged, or the classes, anchors or variant different from the ones given now."""
    try:
        state = load_resume_state(out)
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise ConfigError(f"{out / 'resume.json'}: cannot resume: {e}", "resume") from None
    if state is None:
        logger.warning("resume: %s has no saved state (resume.json): training starts at epoch 1",
                       out)
        return
    check_resume_files(state)
    expected = {"classes.txt": (read_classes, data.class_names, "class list"),
                "anchors.txt": (read_anchors, data.anchors, "anchors")}
    for name, (reader, ours, what) in expected.items():
        if not (out / name).exists():
            continue
        theirs = reader(out / name)
        same = (list(theirs) == list(ours) if name == "classes.txt" else
                np.shape(theirs) == np.shape(ours) and np.allclose(theirs, ours, atol=1e-2))
        if not same:
            raise ConfigError(f"{out / name}: resume: the run was trained with a different "
                              f"{what} ({len(theirs)} entries) than the one given now "
                              f"({len(ours)} entries)", "resume")
    variant = state.get("variant")
    if variant is not None and variant != data.spec.name:
        raise ConfigError(f"{out / 'resume.json'}: resume: the run trains {variant!r}, not "
                          f"variant {data.spec.name!r}", "resume", "variant")


def prepare_output(config: TrainConfig, data: TrainData, task: ClusterTask) -> RunFolder:
    """Open the output folder; non-chief workers of a tf.distribute cluster write to
    ``.worker-<i>/``, a folder with its own manifest (same code path, nothing clobbered); JAX
    processes other than 0 to a temporary folder of their own (:attr:`RunFolder.private`). Sweeps what a killed run
    half-wrote; the chief writes ``anchors.txt`` and ``classes.txt``."""
    out = Path(config.output.output_dir)
    private = not task.is_chief and task.task_type == "jax"
    if private:  # never beside process 0's files: a folder of its own, outside the run's
        remove_stale_temporaries(tempfile.gettempdir())  # those of killed processes
        write_dir = make_temporary_folder(tempfile.gettempdir(), f"yolo3-process-{task.index}")
    else:
        write_dir = out if task.is_chief else out / f".worker-{task.index}"
    folder = OutputFolder(write_dir, "output_dir", config.output.exist_ok or private,
                          RUN_FOLDER_WRITES, own_patterns=old_run_entries(config)).open()
    folder.own_patterns(LIBRARY_WRITES)
    if task.is_chief:
        for name, text in data.head.run_files().items():  # anchors.txt of an anchor head
            folder.write_text(name, text)
        if fits_classes_file(data.class_names):
            folder.write_text("classes.txt", classes_text(data.class_names))
        else:
            logger.warning("%s not written: a class name begins or ends with spaces, which a "
                           "classes file cannot keep (the model files carry the names as they "
                           "are)", out / "classes.txt")
    return RunFolder(out, write_dir, task.is_chief, folder, private)


def restore_state(config: TrainConfig, run: RunFolder, template: keras.Model):
    """``(state, start epoch, best)``: with ``resume`` the chief's last complete state (one epoch
    for all workers), its weights loaded into ``template``; history rows of epochs that will be
    trained again are dropped. A multi-worker run restarted without ``resume`` goes on from
    Keras's BackupAndRestore folder: its epoch is the start epoch (Keras restores the weights and
    starts ``fit`` there; the batches are positioned there too)."""
    state = load_resume_state(run.output) if config.output.resume else None
    start_epoch = int(state["epoch"]) if state else 0
    best = state.get("best") if state else None
    if state:
        logger.log(NOTICE, "resuming from %s after epoch %d", state["path"], start_epoch)
        template.load_weights(os.path.join(state["path"], "model.weights.h5"))
    if config.output.resume:
        truncate_history(run.folder, start_epoch)
    elif config.hardware.strategy == "multiworker" and (run.write_dir / "backup").exists():
        start_epoch = backup_epoch(run.write_dir / "backup")
        if start_epoch:
            logger.log(NOTICE, "restarting from the workers' backup after epoch %d", start_epoch)
        truncate_history(run.folder, start_epoch)
    return state, start_epoch, best


def backup_epoch(backup_dir: Path) -> int:
    """Epochs completed according to a Keras BackupAndRestore folder (0 when it has none)."""
    try:
        return int(json.loads((backup_dir / "training_metadata.json").read_text())["epoch"])
    except (OSError, ValueError, KeyError):
        return 0


def finish(run: RunFolder, body: keras.Model, info: ModelInfo, nan_stop: StopOnNaN
           ) -> Tuple[Optional[Path], Optional[Path]]:
    """Save the final body: ``final.weights.h5`` in the write folder (non-chief workers: their own
    copy, to compare) and ``final.keras`` (chief). After a NaN stop the last good checkpoint is the
    result; with none, or whenever the weights are not finite, nothing is written: ``(None, None)``."""
    last_ok = run.write_dir / "last.weights.h5"
    if nan_stop.stopped and last_ok.exists():
        body.load_weights(str(last_ok))
    if (nan_stop.stopped and not last_ok.exists()) or not weights_finite(body):
        return None, None
    final_model, final_weights = run.output / "final.keras", run.output / "final.weights.h5"
    run.folder.write("final.weights.h5", weights_writer(body), suffix=".weights.h5")
    if run.chief:
        run.folder.write("final.keras", model_writer(float32_body(body), info), suffix=".keras")
    return final_model, final_weights


def weights_finite(model: keras.Model) -> bool:
    """True when every weight of ``model`` is a finite number."""
    return all(np.isfinite(w).all() for w in model.get_weights())
