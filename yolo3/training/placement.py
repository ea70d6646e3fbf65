"""The placement step of training: replica devices and the tf.distribute strategy, the global
batch and the steps per epoch, the training precision and XLA on this machine."""
from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, List, Optional

import keras

from yolo3.config.precision import gpu_capabilities, resolve_training_precision
from yolo3.config.train_config import ConfigError, TrainConfig
from yolo3.core.errors import SettingError
from yolo3.training.distribute import (
    ClusterTask,
    broadcast_from_chief,
    cluster_task,
    make_strategy,
    replica_devices,
)
from yolo3.training.jax_cluster import SINGLE, ProcessGroup, current_group, join_cluster
from yolo3.training.recipe import (
    use_jit,
)

if TYPE_CHECKING:  # tf.distribute runs on the TensorFlow backend only
    import tensorflow as tf

logger = logging.getLogger(__name__)


@dataclass
class Placement:
    """Devices and strategy: ``devices`` for the replica wrapper, or a tf.distribute strategy."""

    strategy: Optional[tf.distribute.Strategy]
    devices: List[str]
    replicas: int
    global_batch: int
    steps: int
    task: ClusterTask
    group: ProcessGroup = SINGLE  # the processes of a JAX run (yolo3.training.jax_cluster)

    def scope(self):
        """A fresh strategy scope (one cannot be entered twice), or a no-op without a strategy."""
        return self.strategy.scope() if self.strategy else NullScope()

    @property
    def uses_wrapper(self) -> bool:
        return self.strategy is None and len(self.devices) >= 2

    def describe(self, strategy: str) -> str:
        """How the replicas run, for the stage line: ``strategy`` (the setting) where it is in
        use, ``one device`` where nothing splits the batch."""
        return strategy if self.strategy is not None or self.uses_wrapper else "one device"


def pick_strategy(config: TrainConfig, num_records: int, task: Optional[ClusterTask] = None,
                  num_val_records: Optional[int] = None) -> Placement:
    """Replica devices and strategy; the global batch (per-replica batch x replicas) and the steps
    per epoch. With ``cpu_replicas`` the logical CPU devices must already exist (the CLI makes them
    first thing: :func:`yolo3.training.distribute.configure_logical_cpus`, or on JAX
    :func:`yolo3.training.jax_parallel.force_host_devices`). On JAX the wrapper runs through
    Keras's distribution API; on PyTorch training runs on one device (several are refused,
    naming the settings). ``num_val_records``: the validation images, which on JAX must fill one
    global batch (refused before anything is written)."""
    refuse_devices_off_tensorflow(config)
    group = current_group()
    if group.several:  # the wrapper spans every process's devices
        devices = cluster_devices()
        task = ClusterTask(group.count, "jax", group.index, group.chief)
    elif keras.backend.backend() == "jax":
        devices = jax_replica_devices(config)
    else:
        devices = replica_devices(config.hardware.gpus or None,
                                  config.hardware.cpu_replicas or None)
    strategy = make_strategy(config.hardware.strategy,
                             devices if config.hardware.strategy == "mirrored" else None)
    replicas = strategy.num_replicas_in_sync if strategy else max(1, len(devices))
    global_batch = config.hardware.batch_size * replicas
    if num_records < global_batch:
        raise ConfigError(f"batch_size {config.hardware.batch_size}: the {num_records} training "
                          f"images of {training_source(config)} are fewer than one global batch "
                          f"({config.hardware.batch_size} x {replicas} replicas)", "batch_size")
    steps = config.schedule.steps_per_epoch or num_records // global_batch
    if config.hardware.strategy != "wrapper":
        devices = []
    placement = Placement(strategy, devices, replicas, global_batch, steps,
                          task or cluster_task(), group)
    # JAX splits every batch evenly over the wrapper's devices: validation takes whole batches
    if (num_val_records is not None and placement.uses_wrapper
            and keras.backend.backend() == "jax" and num_val_records < global_batch):
        raise ConfigError(f"the {num_val_records} validation images are fewer than one global "
                          f"batch ({global_batch}): on JAX the replicas take whole batches; give "
                          "more validation images or a smaller batch_size", "batch_size",
                          "val_split")
    return placement


def join_processes(config: TrainConfig) -> ProcessGroup:
    """Join JAX's distributed runtime where ``coordinator`` says so (first thing in a run: before
    JAX's first computation; yolo3.training.jax_cluster); the group this process belongs to
    (one process without a coordinator). ConfigError naming ``coordinator`` off JAX."""
    hardware = config.hardware
    if not hardware.coordinator:
        return current_group()
    backend = keras.backend.backend()
    if backend != "jax":
        raise ConfigError(f"coordinator: several processes train through JAX's distributed "
                          f"runtime, not on the {backend} backend (KERAS_BACKEND=jax); on "
                          "TensorFlow use strategy multiworker with TF_CONFIG", "coordinator")
    try:
        return join_cluster(hardware.coordinator, hardware.num_processes, hardware.process_id,
                            hardware.cluster_timeout,
                            list(range(hardware.gpus)) if hardware.gpus else None)
    except SettingError as e:
        raise ConfigError(str(e), *e.settings) from None


def cluster_devices() -> List[str]:
    """Every device of every process of the JAX runtime, as the wrapper names them."""
    import jax  # on the jax backend only (a run of several processes)
    return [f"/{d.platform}:{d.id}" for d in jax.devices()]


def jax_replica_devices(config: TrainConfig) -> List[str]:
    """The wrapper's devices on JAX (``/gpu:i`` or ``/cpu:i``), checked against those JAX sees
    (a ConfigError naming the setting, with JAX's advice); none for one device."""
    from yolo3.training.jax_parallel import jax_devices  # imports JAX: on the jax backend only
    gpus, cpus = config.hardware.gpus, config.hardware.cpu_replicas
    if gpus and cpus:
        raise ConfigError("give either gpus or cpu_replicas, not both", "gpus", "cpu_replicas")
    count, kind, setting = (gpus, "gpu", "gpus") if gpus else (cpus, "cpu", "cpu_replicas")
    if not count or count < 2:
        return []
    names = [f"/{kind}:{i}" for i in range(count)]
    try:
        jax_devices(devices=names)
    except ValueError as e:
        raise ConfigError(f"{setting} {count}: {e}", setting) from None
    return names


def refuse_devices_off_tensorflow(config: TrainConfig) -> None:
    """The ``mirrored`` / ``multiworker`` strategies are tf.distribute's: on another Keras backend
    a ConfigError names them; on PyTorch ``gpus`` and ``cpu_replicas`` too (training runs on one
    device there). On JAX the wrapper takes them (Keras's distribution API)."""
    backend = keras.backend.backend()
    if backend == "tensorflow":
        return
    if backend == "jax":
        if config.hardware.strategy != "wrapper":
            raise ConfigError(f"strategy {config.hardware.strategy}: tf.distribute runs on "
                              "TensorFlow; on the jax backend the wrapper splits each batch "
                              "(gpus or cpu_replicas), through Keras's distribution API",
                              "strategy")
        return
    asked = [name for name, value in (("gpus", config.hardware.gpus),
                                      ("cpu_replicas", config.hardware.cpu_replicas))
             if value and value > 1]
    if config.hardware.strategy != "wrapper":
        asked.append("strategy")
    if asked:
        raise ConfigError(f"{', '.join(asked)}: training places its replicas through TensorFlow; "
                          f"on the {backend} backend it trains on one device (from Python, "
                          "multi_gpu_model wraps a template on JAX: docs/guide.md)", *asked)


def training_precision(config: TrainConfig) -> str:
    """The dtype policy ``config.recipe.precision`` means on this machine (see
    :func:`yolo3.config.precision.resolve_training_precision`): GPUs count when ``gpus`` asks for
    them."""
    return resolve_training_precision(config.recipe.precision, gpu=on_gpu(config))


def on_gpu(config: TrainConfig) -> bool:
    if config.hardware.cpu_replicas:
        return False
    return bool(gpu_capabilities())


def use_xla(config: TrainConfig, placement: Placement) -> bool:
    """XLA for the step: never for the replica wrapper (it keeps its per-device placement). On
    JAX always, unless ``jit`` is ``off`` (XLA is JAX's compiler: without it the step runs op by
    op); on PyTorch only when ``jit`` is ``on`` (``torch.compile``)."""
    backend = keras.backend.backend()
    if backend == "jax":
        return config.recipe.jit != "off"
    if backend != "tensorflow":
        return config.recipe.jit == "on"
    return use_jit(config.recipe.jit, on_gpu(config)) and not placement.uses_wrapper


def sharing(placement: Placement):
    """How non-chief workers learn the chief's figures: an all-reduce over the multi-worker
    strategy (so early stopping decides alike everywhere); None in a single process."""
    if placement.strategy is None or placement.task.num_workers <= 1:
        return None
    return lambda values: broadcast_from_chief(placement.strategy, values, placement.task.is_chief)


def training_source(config: TrainConfig) -> str:
    return config.data.data_file or config.data.annotations


class NullScope:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False
