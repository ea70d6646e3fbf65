"""``yolo3 tune``: a search over training settings, on Optuna with its SQLite storage.

Each trial is a training run (:func:`yolo3.training.train.train`) with the study's base settings
and the settings it draws from the search space (:mod:`yolo3.config.search_space`), in its own
run folder ``trial-NNNN/`` under the study folder, under the ownership rules as any run. Its value
is the best validation mAP@0.5:0.95 of its epochs (evaluated every epoch unless the base settings
say otherwise); Optuna's median pruner stops a trial whose mAP after an epoch is below the median
of earlier trials' at that epoch (from the fourth trial, after the first epoch: a study of a few
trials would never prune with Optuna's default of five).

The study folder holds ``study.db`` (Optuna's storage), ``space.yaml`` and ``base.yaml`` (the
space and the base settings it was started with), ``trials.csv`` (a row per trial) and
``best.yaml``: the best trial's settings, which ``yolo3 train --settings best.yaml`` reads. A study
that was stopped goes on with ``resume``: the trial it was running is marked failed and its
settings run again as a new trial, until ``trials`` trials have finished or been pruned; the same
command run again does the same (a study of other base settings or another space is refused:
give it another folder). One process at a time works on a study (a lock on its folder).
"""
from __future__ import annotations

import contextlib
import csv
import io
import logging
import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, Iterator, List, Optional, Sequence

import keras
import yaml

from yolo3.config.search_space import DEFAULT_SPACE, Dimension, read_search_space, space_text
from yolo3.config.settings_file import settings_text
from yolo3.config.train_config import ConfigError, TrainConfig, check, default
from yolo3.core.errors import PathLike, SettingError
from yolo3.core.fileio import read_text
from yolo3.core.log import NOTICE
from yolo3.core.output_folder import OutputFolder, check_output_folder
from yolo3.core.paths import check_output_dir
from yolo3.training.train import train

logger = logging.getLogger(__name__)

__all__ = ["tune", "StudyResult", "STUDY_DB", "BEST_FILE", "best_settings"]

STUDY_DB = "study.db"
BEST_FILE = "best.yaml"
SPACE_FILE = "space.yaml"
BASE_FILE = "base.yaml"
TRIALS_FILE = "trials.csv"
# (each trial-NNNN/ is a run folder, checked by its run)
STUDY_WRITES = (f"{STUDY_DB}*", BEST_FILE, SPACE_FILE, BASE_FILE, TRIALS_FILE)
STUDY_NAME = "yolo3"
MONITOR = "mAP50_95"
# settings of where and how a run writes: never part of a study's base or best settings
_RUN_ONLY = ("output_dir", "resume", "exist_ok", "verbose")
_PATHS = ("annotations", "val_annotations", "classes", "anchors", "weights", "data_file",
          "class_weights")


@dataclass
class StudyResult:
    """The study folder, the best trial (None when none finished), its value and settings, and
    the trials by state."""

    folder: Path
    best_trial: Optional[int]
    best_value: Optional[float]
    best_file: Optional[Path]
    finished: int
    pruned: int
    failed: int


class _ReportToTrial(keras.callbacks.Callback):
    """Each epoch's validation mAP to the trial; stops training when Optuna prunes it."""

    def __init__(self, trial):
        super().__init__()
        self.trial = trial
        self.pruned_at: Optional[int] = None

    def on_epoch_end(self, epoch: int, logs: Optional[dict] = None) -> None:
        value = (logs or {}).get(MONITOR)
        if value is None or not math.isfinite(float(value)):
            return
        self.trial.report(float(value), epoch)
        if self.trial.should_prune():
            self.pruned_at = epoch
            self.model.stop_training = True


def best_settings(base: TrainConfig, drawn: Dict[str, Any]) -> Dict[str, Any]:
    """What ``best.yaml`` holds: the base settings that differ from their defaults (paths made
    absolute), then the drawn ones; never where or how the run writes."""
    settings = {}
    for name, value in base.settings().items():
        if name in _RUN_ONLY or name in drawn or value == default(name):
            continue
        if name in _PATHS and isinstance(value, (str, os.PathLike)) and value not in (
                "", "auto") and os.path.exists(value):
            value = os.path.abspath(value)
        settings[name] = value
    settings.update(drawn)
    return settings


@contextlib.contextmanager
def _locked(folder: Path) -> Iterator[None]:
    """Hold the study folder for this process (an advisory lock on the folder itself)."""
    import fcntl
    fd = os.open(folder, os.O_RDONLY)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            raise SettingError(f"output_dir {folder}: another yolo3 tune is working on this "
                               "study now", "output_dir") from None
        yield
    finally:
        os.close(fd)


def _suggest(trial, dimension: Dimension) -> Any:
    if dimension.choices is not None:
        index = trial.suggest_categorical(dimension.name + "#", list(range(len(dimension.choices))))
        return dimension.choices[index]
    if dimension.whole:
        return trial.suggest_int(dimension.name, int(dimension.low), int(dimension.high),
                                 log=dimension.log)
    return trial.suggest_float(dimension.name, dimension.low, dimension.high, log=dimension.log)


def _drawn(trial, space: Sequence[Dimension]) -> Dict[str, Any]:
    return {d.name: _suggest(trial, d) for d in space}


def _params_of(params: Dict[str, Any], space: Sequence[Dimension]) -> Dict[str, Any]:
    """A finished trial's Optuna parameters as settings (choices stored by index)."""
    settings = {}
    for d in space:
        if d.choices is not None:
            settings[d.name] = d.choices[params[d.name + "#"]]
        else:
            settings[d.name] = params[d.name]
    return settings


def _check_study_folder(folder: Path, resume: bool, exist_ok: bool) -> bool:
    """Refuse what cannot work before anything is written; True when there is a study to go on
    with."""
    check_output_folder(folder, "output_dir", exist_ok, STUDY_WRITES)
    there = (folder / STUDY_DB).is_file()
    if resume and not there:
        logger.warning("resume: %s holds no study yet: starting one", folder)
    return there


def _check_same(folder: Path, space: Sequence[Dimension], base_text: str,
                space_given: bool) -> List[Dimension]:
    """On resume: the study's own space (or the given one, when the same) and the same base."""
    saved_space = read_search_space(folder / SPACE_FILE)
    if space_given and space_text(space) != space_text(saved_space):
        raise SettingError(f"space: the study in {folder} searches another space "
                           f"({folder / SPACE_FILE}); give that one, or none", "space")
    saved = yaml.safe_load(read_text(folder / BASE_FILE, "the study's base settings")) or {}
    given = yaml.safe_load(base_text) or {}
    changed = sorted(k for k in set(saved) | set(given) if saved.get(k) != given.get(k))
    if changed:
        raise SettingError(f"resume: the study in {folder} was started with other settings: "
                           f"{', '.join(changed)} ({folder / BASE_FILE})", *changed)
    return list(saved_space)


def _check_space_with_base(space: Sequence[Dimension], base: TrainConfig) -> None:
    """Each end of each range, and each choice, must go with the base settings (a mosaic with
    augmentation off cannot): refused before the study starts, naming the setting."""
    for d in space:
        if d.name in _RUN_ONLY:
            raise SettingError(f"space: {d.name} is where the run writes, not a setting to search",
                               "space")
        values = d.choices if d.choices is not None else (
            (int(d.low), int(d.high)) if d.whole else (d.low, d.high))
        for value in values:
            try:
                check(base.replaced(**{d.name: value}))
            except SettingError as e:
                raise SettingError(f"space: {d.name} {value!r} cannot go with the other "
                                   f"settings: {e}", "space", *e.settings) from None


def tune(base: TrainConfig, space: Optional[Sequence[Dimension]], trials: int,
         study_dir: PathLike, resume: bool = False, exist_ok: bool = False,
         callbacks: Optional[Sequence[keras.callbacks.Callback]] = None) -> StudyResult:
    """Run the study in ``study_dir`` until ``trials`` trials have finished or been pruned
    (module docstring); ``space`` None: the saved one on resume, else
    :data:`~yolo3.config.search_space.DEFAULT_SPACE`. ``callbacks`` run in every trial."""
    import optuna  # the tune extra, imported when asked for
    from optuna.trial import TrialState
    folder = Path(check_output_dir(study_dir, "output_dir"))
    if trials < 1:
        raise SettingError(f"trials must be at least 1, got {trials}", "trials")
    going_on = _check_study_folder(folder, resume, exist_ok)
    chosen = list(space) if space else list(DEFAULT_SPACE)
    base_text = settings_text(best_settings(base, {}), "the base settings of the study")
    if going_on:
        chosen = _check_same(folder, chosen, base_text, bool(space))
    _check_space_with_base(chosen, base)
    with OutputFolder(folder, "output_dir", exist_ok, STUDY_WRITES) as out:
        out.own_patterns([f"{STUDY_DB}*"])
        if not going_on:
            out.write_text(SPACE_FILE, space_text(chosen))
            out.write_text(BASE_FILE, base_text)
        with _locked(folder):
            return _run_study(optuna, TrialState, base, chosen, trials, folder, out,
                              list(callbacks or ()))


def _run_study(optuna, TrialState, base: TrainConfig, space: List[Dimension], trials: int,
               folder: Path, out: OutputFolder, callbacks: list) -> StudyResult:
    storage = optuna.storages.RDBStorage(f"sqlite:///{folder / STUDY_DB}")
    study = optuna.create_study(
        storage=storage, study_name=STUDY_NAME, direction="maximize", load_if_exists=True,
        sampler=optuna.samplers.TPESampler(seed=base.seed),
        pruner=optuna.pruners.MedianPruner(n_startup_trials=3, n_warmup_steps=1))
    study_id = storage.get_study_id_from_name(STUDY_NAME)
    retried = list(study.user_attrs.get("retried", []))
    for trial in study.get_trials(deepcopy=False, states=(TrialState.RUNNING, TrialState.FAIL)):
        # this process holds the study: a running trial is one a killed process left; a failed
        # one cut short by an interrupt has not run to its end either. Each runs again, once.
        cut = trial.state == TrialState.RUNNING or trial.user_attrs.get("cut_short")
        if not cut or trial.number in retried:
            continue
        if trial.state == TrialState.RUNNING:
            storage.set_trial_state_values(
                storage.get_trial_id_from_study_id_trial_number(study_id, trial.number),
                TrialState.FAIL)
        retried.append(trial.number)
        study.set_user_attr("retried", retried)
        study.enqueue_trial(trial.params, user_attrs={"retry_of": trial.number})
        logger.warning("trial %d was cut short (the study was stopped): its settings run again",
                       trial.number)

    def done() -> int:
        return len(study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,
                                                             TrialState.PRUNED)))

    def objective(trial) -> float:
        drawn = _drawn(trial, space)
        run_dir = folder / f"trial-{trial.number:04d}"
        trial.set_user_attr("output", str(run_dir))
        shown = ", ".join(f"{k}={_short(v)}" for k, v in drawn.items())
        logger.log(NOTICE, "trial %d (%d of %d finished or pruned): %s", trial.number, done(),
                   trials, shown)
        config = base.replaced(**drawn, output_dir=str(run_dir), resume=False, exist_ok=False,
                               eval_every=base.schedule.eval_every or 1)
        report = _ReportToTrial(trial)
        keras.backend.clear_session()
        try:
            result = train(config, callbacks=[report, *callbacks])
        except KeyboardInterrupt:  # Ctrl-C, SIGTERM: run again on resume
            trial.set_user_attr("cut_short", True)
            raise
        values = [v for v in result.history.get(MONITOR, []) if math.isfinite(v)]
        if report.pruned_at is not None:
            logger.log(NOTICE, "trial %d pruned after epoch %d (mAP@0.5:0.95 %.4f)",
                       trial.number, report.pruned_at + 1, values[-1] if values else float("nan"))
            raise optuna.TrialPruned()
        if not values:
            raise ConfigError(f"trial {trial.number}: no validation mAP was computed (its run "
                              f"stopped: {result.message or 'no evaluation'})", "eval_every")
        logger.log(NOTICE, "trial %d: best mAP@0.5:0.95 %.4f", trial.number, max(values))
        return max(values)

    def record(study, trial) -> None:  # after every trial: the table and the best so far
        out.write_text(TRIALS_FILE, _trials_table(study, space))
        best = _best(study, TrialState)
        if best is not None and best.number == trial.number:
            settings = best_settings(base, _params_of(best.params, space))
            out.write_text(BEST_FILE, settings_text(settings, (
                f"the best of study {folder}: trial {best.number}, validation mAP@0.5:0.95 "
                f"{best.value:.4f} ({best.user_attrs.get('output', '')})")))

    while done() < trials:
        study.optimize(objective, n_trials=1, callbacks=[record], gc_after_trial=True)
    best = _best(study, TrialState)
    counts = {state: len(study.get_trials(deepcopy=False, states=(state,)))
              for state in (TrialState.COMPLETE, TrialState.PRUNED, TrialState.FAIL)}
    return StudyResult(folder, None if best is None else best.number,
                       None if best is None else best.value,
                       folder / BEST_FILE if best is not None else None,
                       counts[TrialState.COMPLETE], counts[TrialState.PRUNED],
                       counts[TrialState.FAIL])


def _best(study, TrialState):
    complete = study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))
    return max(complete, key=lambda t: t.value) if complete else None


def _short(value: Any) -> str:
    return f"{value:.4g}" if isinstance(value, float) else str(value)


def _trials_table(study, space: Sequence[Dimension]) -> str:
    """``trials.csv``: number, state, value, each drawn setting, run folder."""
    rows = io.StringIO()
    writer = csv.writer(rows, lineterminator="\n")
    writer.writerow(["trial", "state", MONITOR, *(d.name for d in space), "output"])
    for t in study.get_trials(deepcopy=False):
        drawn = _params_of(t.params, space) if len(t.params) == len(space) else {}
        writer.writerow([t.number, t.state.name.lower(), "" if t.value is None else t.value,
                         *(drawn.get(d.name, "") for d in space), t.user_attrs.get("output", "")])
    return rows.getvalue()
