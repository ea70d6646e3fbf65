"""Device setup and tf.distribute strategy selection.

- ``wrapper``: :func:`yolo3.training.parallel.multi_gpu_model` over ``/gpu:0..N-1`` or N logical
CPUs;
- ``mirrored``: ``tf.distribute.MirroredStrategy`` over the same devices (one machine);
- ``multiworker``: ``tf.distribute.MultiWorkerMirroredStrategy``, configured by ``TF_CONFIG``
  (``{"cluster": {"worker": ["host:port", ...]}, "task": {"type": "worker", "index": i}}``), one
  process per machine, each started with the same command.

The training model's loss output has shape ``(1,)``: a ``()`` output through an identity loss gets
gradients N times too large under a mirrored strategy with N replicas.
"""
from __future__ import annotations

import json
import os
from dataclasses import dataclass
from typing import TYPE_CHECKING, List, Optional, Sequence

import numpy as np

from yolo3.config.choices import STRATEGIES
from yolo3.core.errors import SettingError, Yolo3Error
from yolo3.modeling.keras_compat import build_from_element_spec, replace_step

if TYPE_CHECKING:  # each function below that runs TensorFlow imports it: the others serve every backend
    import tensorflow as tf

__all__ = ["configure_logical_cpus", "replica_devices", "make_strategy",
           "is_chief", "num_workers", "task_index", "cluster_task", "ClusterTask", "prepare_fit",
           "broadcast_from_chief"]



def configure_logical_cpus(n: int) -> List[str]:
    """Split the CPU into ``n`` logical devices; call before TensorFlow creates any tensor.

    Returns the device names. Raises ``RuntimeError`` (with advice) when TensorFlow has already
    initialised its devices with another layout.
    """
    import tensorflow as tf
    if n < 1:
        raise SettingError(f"cpu_replicas must be >= 1, got {n}", "cpu_replicas")
    cpu = tf.config.list_physical_devices("CPU")[0]
    try:
        tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * n)
    except RuntimeError as e:
        existing = tf.config.list_logical_devices("CPU")
        if len(existing) != n:
            raise RuntimeError(f"cannot make {n} logical CPU devices: TensorFlow is already "
                               f"initialised with {len(existing)} ({e}); configure them first thing "
                               "in the process") from e
    return [f"/cpu:{i}" for i in range(n)]


def replica_devices(gpus: Optional[int] = None, cpu_replicas: Optional[int] = None) -> List[str]:
    """Device names for ``gpus`` GPUs or ``cpu_replicas`` logical CPUs (already configured)."""
    if gpus and cpu_replicas:
        raise SettingError("give either gpus or cpu_replicas, not both", "gpus", "cpu_replicas")
    if gpus:
        import tensorflow as tf
        found = len(tf.config.list_physical_devices("GPU"))
        if gpus > found:
            raise SettingError(f"gpus {gpus} asked for, but this machine has {found} GPU(s)", "gpus")
        return [f"/gpu:{i}" for i in range(gpus)]
    if cpu_replicas:
        return [f"/cpu:{i}" for i in range(cpu_replicas)]
    return []


@dataclass(frozen=True)
class ClusterTask:
    """This process's place in a ``TF_CONFIG`` cluster (one worker, index 0, chief, without one)."""

    num_workers: int = 1
    task_type: Optional[str] = None
    index: int = 0
    is_chief: bool = True


def cluster_task() -> ClusterTask:
    """Read ``TF_CONFIG`` (the one reader); a single process without it. Malformed JSON is refused
    with a message naming the variable."""
    raw = os.environ.get("TF_CONFIG", "") or "{}"
    try:
        config = json.loads(raw)
        cluster = config.get("cluster", {})
        task = config.get("task", {})
        workers = len(cluster.get("worker", []))
        index = int(task.get("index", 0))
    except (ValueError, AttributeError, TypeError) as e:
        raise Yolo3Error(f"TF_CONFIG is not a cluster description ({e}): {raw[:200]}") from None
    task_type = task.get("type")
    chief = (not task or task_type == "chief"
             or (task_type == "worker" and index == 0 and "chief" not in cluster))
    return ClusterTask(max(1, workers), task_type, index, chief)


def num_workers() -> int:
    """Number of workers in ``TF_CONFIG`` (1 without it)."""
    return cluster_task().num_workers


def is_chief() -> bool:
    """True for the process that writes outputs: worker 0 (or the chief) or a single process."""
    return cluster_task().is_chief


def task_index() -> int:
    """This worker's index in ``TF_CONFIG`` (0 without it)."""
    return cluster_task().index


def make_strategy(name: str, devices: Optional[List[str]] = None) -> Optional[tf.distribute.Strategy]:
    """The strategy for ``name``: None for ``wrapper`` (no strategy needed), else a tf.distribute one."""
    if name not in STRATEGIES:
        raise SettingError(f"unknown strategy {name!r}: expected one of {STRATEGIES}", "strategy")
    if name == "wrapper":
        return None
    import tensorflow as tf
    if name == "mirrored":
        return tf.distribute.MirroredStrategy(devices=devices or None)
    if "TF_CONFIG" not in os.environ:
        raise SettingError("strategy multiworker needs the TF_CONFIG environment variable "
                           "(cluster worker addresses and this task's index)", "strategy")
    return tf.distribute.MultiWorkerMirroredStrategy()


def prepare_fit(model, dataset: tf.data.Dataset, strategy: Optional[tf.distribute.Strategy]) -> None:
    """Work around two Keras 3.15 failures of ``fit``/``evaluate`` under ``MultiWorkerMirroredStrategy``.

    1. Before the first step Keras reduces the first distributed batch with one nested
       ``strategy.reduce`` only to learn its shapes; this strategy cannot reduce a nested structure
       ("Attempt to convert a value (PerReplica ...) to a Tensor"). The compiled loss and metrics are
       built here from ``dataset.element_spec`` instead, and that step is turned off for ``model``.
    2. Each step's logs are reduced over workers with ``strategy.reduce("MEAN", v, axis=0)``, which
       fails on the scalar ``loss`` ("Invalid reduction dimension 0 for input with 0 dimensions");
       the train and test steps of ``model`` return shape-(1,) logs, reduced to the mean scalar.

    Nothing changes for other strategies. Call after ``compile``.
    """
    if strategy is None:
        return
    import tensorflow as tf
    if not isinstance(strategy, tf.distribute.MultiWorkerMirroredStrategy):
        return
    with strategy.scope():
        build_from_element_spec(model, dataset.element_spec)
    replace_step(model, "train_step", _rank1_logs)
    replace_step(model, "test_step", _rank1_logs)


def _rank1_logs(step):
    """``step`` with every scalar tensor in its logs reshaped to ``(1,)``."""
    import tensorflow as tf
    def wrapped(data):
        logs = step(data)
        return {k: tf.reshape(v, [1]) if tf.is_tensor(v) and v.shape.rank == 0 else v
                for k, v in logs.items()}
    return wrapped


def broadcast_from_chief(strategy: tf.distribute.Strategy, values: Sequence[float],
                         is_chief_worker: bool) -> List[float]:
    """The chief's ``values`` on every worker: a SUM all-reduce to which only the chief's first
    replica contributes (the others add zeros). Every worker must call it at the same point."""
    import tensorflow as tf
    mine = np.asarray(values, np.float32) if is_chief_worker else np.zeros(len(values), np.float32)

    def contribution():
        context = tf.distribute.get_replica_context()
        first = tf.equal(context.replica_id_in_sync_group, 0)
        return tf.where(first, tf.constant(mine), tf.zeros_like(mine))

    total = strategy.reduce(tf.distribute.ReduceOp.SUM, strategy.run(contribution), axis=None)
    return [float(v) for v in np.asarray(total)]
