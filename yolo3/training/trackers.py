"""Experiment trackers (``--tracker mlflow|wandb``): the run logged where its team looks.

A tracker gets, from the chief only:

- at the start, the resolved settings and the data's figures as parameters (``data.*``);
- at each epoch's end, every logged value (``loss``, ``val_loss``, ``mAP50``, ``mAP50_95`` ...)
  and the learning rate (``lr``), at step = the epoch (from 0, across stages);
- at the end, the run's pictures, ``report.html``, ``history.csv`` and the final model as
  artifacts, and the run's status (finished, failed, killed).

MLflow logs to ``MLFLOW_TRACKING_URI`` (its local store, ``./mlflow.db`` and ``./mlruns``, where
that is unset), in the experiment ``MLFLOW_EXPERIMENT_NAME`` (default ``yolo3``). Weights &
Biases logs to the project ``WANDB_PROJECT`` (default ``yolo3``), online or with
``WANDB_MODE=offline``. The tracker's run id is kept in the run folder (``tracker.json``), so that
``--resume`` goes on logging into the same run.

A tracker never stops training: the first call that fails (a server that cannot be reached,
one that goes away in the middle, an account not logged in) logs one warning, and the tracker
is silent from then on; every file of the run is in its folder as without one. Calls to an MLflow
server give up after a few seconds (two retries, 15 s each) unless ``MLFLOW_HTTP_REQUEST_*`` say
otherwise.
"""
from __future__ import annotations

import contextlib
import logging
import math
import os
import time
from pathlib import Path
from typing import Any, Callable, Dict, Iterator, List, Mapping, Optional, Sequence

import keras
import numpy as np

logger = logging.getLogger(__name__)

__all__ = ["Tracker", "MLflowTracker", "WandbTracker", "make_tracker", "TrackerCallback",
           "flat_parameters", "run_artifacts", "TRACKER_FILE"]

TRACKER_FILE = "tracker.json"  # in the run folder: which tracker run this run logs to
_MLFLOW_HTTP = {"MLFLOW_HTTP_REQUEST_MAX_RETRIES": "2", "MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR": "1",
                "MLFLOW_HTTP_REQUEST_TIMEOUT": "15"}
_PARAMETER_CHARS = 6000  # MLflow's limit on a parameter's value
_BATCH = 100  # MLflow's limit on parameters per call


def flat_parameters(summary: Mapping[str, Any]) -> Dict[str, str]:
    """``run.json``'s settings and data figures as flat ``name -> text`` parameters (the data's
    under ``data.``; a list as its comma-joined items; None as ``None``)."""
    def text(value: Any) -> str:
        if isinstance(value, (list, tuple)):
            value = ",".join(str(v) for v in value)
        return str(value)[:_PARAMETER_CHARS]
    flat = {name: text(value) for name, value in summary.get("settings", {}).items()}
    for name, value in summary.get("dataset", {}).items():
        if isinstance(value, dict):  # boxes per class
            flat.update({f"data.{name}.{k}": text(v) for k, v in value.items()})
        else:
            flat[f"data.{name}"] = text(value)
    return flat


def run_artifacts(folder: Path, final_model: Optional[Path]) -> List[Path]:
    """What a tracker keeps of a finished run in ``folder``: its pictures (top-level ``.png`` and
    ``.jpg``), ``report.html``, ``history.csv``, ``run.json`` and the final model, those that
    exist, in a stable order."""
    names = sorted(p for p in folder.iterdir() if p.is_file() and p.suffix in (".png", ".jpg"))
    named = [folder / n for n in ("report.html", "history.csv", "run.json")]
    if final_model is not None:
        named.append(Path(final_model))
    return names + [p for p in named if p.is_file()]


class Tracker:
    """One run in an experiment tracker. Each call is guarded (:meth:`_guarded`): the first
    failure warns once and turns the tracker off; training never sees it."""

    kind = "tracker"

    def __init__(self, run_name: str, output: Path):
        self.run_name = run_name
        self.output = Path(output)
        self.failed = False
        self.run_id: Optional[str] = None

    @property
    def where(self) -> str:
        """Where the tracker logs (a URI, a project), for messages."""
        return self.kind

    def _guarded(self, what: str, call: Callable[[], Any]) -> Any:
        if self.failed:
            return None
        try:
            return call()
        except Exception as e:  # any failure of a tracker: training goes on
            self.failed = True
            reason = str(e).strip().splitlines()[0][:300] if str(e).strip() else ""
            logger.warning("%s: %s at %s failed (%s%s); training goes on without it, and every "
                           "file of the run is in %s", self.kind, what, self.where,
                           type(e).__name__, f": {reason}" if reason else "", self.output)
            return None

    def start(self, parameters: Mapping[str, str], resume_id: Optional[str] = None) -> None:
        """Open the run (or, resuming, ``resume_id``'s run) and log ``parameters`` (new runs)."""
        self._guarded("starting the run", lambda: self._start(parameters, resume_id))

    def log_epoch(self, epoch: int, values: Mapping[str, float]) -> None:
        """Log the epoch's finite values at step ``epoch``."""
        finite = {k: float(v) for k, v in values.items()
                  if isinstance(v, (int, float, np.floating, np.integer)) and math.isfinite(float(v))}
        if self.run_id is not None and finite:
            self._guarded(f"logging epoch {epoch + 1}", lambda: self._log(epoch, finite))

    def finish(self, artifacts: Sequence[Path], status: str) -> None:
        """Upload ``artifacts`` (files) and close the run as ``status``: ``finished``, ``failed``
        or ``killed``."""
        if self.run_id is not None:
            self._guarded("uploading the run's files", lambda: self._upload(artifacts))
            self._guarded("closing the run", lambda: self._close(status))

    def _start(self, parameters: Mapping[str, str], resume_id: Optional[str]) -> None:
        raise NotImplementedError

    def _log(self, epoch: int, values: Dict[str, float]) -> None:
        raise NotImplementedError

    def _upload(self, artifacts: Sequence[Path]) -> None:
        raise NotImplementedError

    def _close(self, status: str) -> None:
        raise NotImplementedError


@contextlib.contextmanager
def _bounded_http() -> Iterator[None]:
    """MLflow's HTTP calls give up after a few seconds (its defaults retry for minutes), unless
    the user set ``MLFLOW_HTTP_REQUEST_*``; the environment is restored afterwards."""
    added = {k: v for k, v in _MLFLOW_HTTP.items() if k not in os.environ}
    os.environ.update(added)
    try:
        yield
    finally:
        for k in added:
            os.environ.pop(k, None)


class MLflowTracker(Tracker):
    """A run in MLflow, through ``MlflowClient`` (no global active run is touched)."""

    kind = "mlflow"

    def __init__(self, run_name: str, output: Path):
        super().__init__(run_name, output)
        from mlflow.tracking import MlflowClient  # the mlflow extra, imported when asked for
        self._client = MlflowClient()
        self._uri = self._client.tracking_uri

    @property
    def where(self) -> str:
        return self._uri

    def _guarded(self, what: str, call: Callable[[], Any]) -> Any:
        with _bounded_http():
            return super()._guarded(what, call)

    def _start(self, parameters: Mapping[str, str], resume_id: Optional[str]) -> None:
        from mlflow.entities import Param
        client = self._client
        if resume_id:
            client.update_run(resume_id, status="RUNNING")
            self.run_id = resume_id
            return
        name = os.environ.get("MLFLOW_EXPERIMENT_NAME") or "yolo3"
        experiment = client.get_experiment_by_name(name)
        experiment_id = (experiment.experiment_id if experiment is not None
                         else client.create_experiment(name))
        run = client.create_run(experiment_id, run_name=self.run_name,
                                tags={"yolo3.output": str(self.output)})
        self.run_id = run.info.run_id
        items = [Param(k, v) for k, v in parameters.items()]
        for i in range(0, len(items), _BATCH):
            client.log_batch(self.run_id, params=items[i:i + _BATCH])
        logger.info("mlflow: run %s in experiment %r at %s", self.run_id, name, self._uri)

    def _log(self, epoch: int, values: Dict[str, float]) -> None:
        from mlflow.entities import Metric
        now = int(time.time() * 1000)
        self._client.log_batch(self.run_id, metrics=[Metric(k, v, now, epoch)
                                                     for k, v in values.items()])

    def _upload(self, artifacts: Sequence[Path]) -> None:
        for path in artifacts:
            self._client.log_artifact(self.run_id, str(path))

    def _close(self, status: str) -> None:
        self._client.set_terminated(self.run_id, status=status.upper())


class WandbTracker(Tracker):
    """A run in Weights & Biases (``WANDB_MODE=offline`` keeps it on this machine until
    ``wandb sync``)."""

    kind = "wandb"

    def __init__(self, run_name: str, output: Path):
        super().__init__(run_name, output)
        self._run = None

    @property
    def where(self) -> str:
        return f"project {os.environ.get('WANDB_PROJECT') or 'yolo3'}"

    def _start(self, parameters: Mapping[str, str], resume_id: Optional[str]) -> None:
        import wandb  # the wandb extra, imported when asked for
        self._run = wandb.init(project=os.environ.get("WANDB_PROJECT") or "yolo3",
                               name=self.run_name, config=dict(parameters), id=resume_id,
                               resume="allow" if resume_id else None,
                               settings=wandb.Settings(console="off", quiet=True))
        self.run_id = self._run.id

    def _log(self, epoch: int, values: Dict[str, float]) -> None:
        self._run.log({**values, "epoch": epoch}, step=epoch)

    def _upload(self, artifacts: Sequence[Path]) -> None:
        for path in artifacts:
            self._run.save(str(path), base_path=str(Path(path).parent), policy="now")

    def _close(self, status: str) -> None:
        self._run.finish(exit_code=0 if status == "finished" else 1)


_KINDS = {"mlflow": MLflowTracker, "wandb": WandbTracker}


def make_tracker(kind: str, run_name: str, output: Path) -> Optional[Tracker]:
    """The tracker ``kind`` (``none``: None) for the run ``run_name`` writing into ``output``;
    one that cannot even be made (a broken install) warns and is None."""
    if kind == "none":
        return None
    try:
        return _KINDS[kind](run_name, output)
    except Exception as e:  # training goes on without it
        logger.warning("%s: setting up failed (%s: %s); training goes on without it", kind,
                       type(e).__name__, e)
        return None


class TrackerCallback(keras.callbacks.Callback):
    """Each epoch's logs and the optimiser's learning rate (``lr``) to ``tracker``."""

    def __init__(self, tracker: Tracker):
        super().__init__()
        self.tracker = tracker

    def on_epoch_end(self, epoch: int, logs: Optional[dict] = None) -> None:
        values = {k: v for k, v in (logs or {}).items() if np.ndim(v) == 0}
        optimizer = getattr(self.model, "optimizer", None)
        if optimizer is not None and "lr" not in values and "learning_rate" not in values:
            values["lr"] = float(keras.ops.convert_to_numpy(optimizer.learning_rate))
        self.tracker.log_epoch(epoch, {k: float(v) for k, v in values.items()})
