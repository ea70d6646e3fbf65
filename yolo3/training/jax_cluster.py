"""Training across processes and hosts on JAX, on JAX's own distributed runtime
(``jax.distributed``; docs/guide.md, "Several machines").

Every process runs the same command with its own index. :func:`join_cluster` starts JAX's
runtime (before JAX's first computation); ``jax.devices()`` then lists every process's devices,
and the replica wrapper's ``keras.distribution.DataParallel`` spans them all: each step's global
batch is assembled from each process's share (``jax.make_array_from_process_local_data``) and
XLA's collectives (NCCL on GPUs, Gloo on CPUs) sum the gradients. :class:`ProcessGroup` is a
process's view of the run: its index and the count, which share of a list it takes, the
gathering of host arrays, and a :meth:`~ProcessGroup.local` scope in which a model built and run
stays on this process's devices (evaluation, batch-norm statistics).

A process that dies is noticed by the others at their next collective (at once) or by the
runtime's heartbeat (:data:`HEARTBEAT_S`): :func:`lost_process` turns the collective's failure
into :class:`ProcessLost`.
"""
from __future__ import annotations

import contextlib
import logging
import socket
import time
import zlib
from dataclasses import dataclass
from typing import Dict, Iterator, List, Optional, Sequence

import numpy as np

from yolo3.config.train_config import coordinator_address
from yolo3.core.errors import CommandFailed, SettingError
from yolo3.core.log import NOTICE

logger = logging.getLogger(__name__)

__all__ = ["ProcessGroup", "ProcessLost", "ProcessRefused", "join_cluster", "current_group", "check_same_settings",
           "lost_process", "HEARTBEAT_S"]

HEARTBEAT_S = 20  # the runtime ends a process whose peer stopped answering for this long
PROBE_EVERY_S = 1.0


class ProcessLost(CommandFailed):
    """Another process of the cluster stopped (killed, out of memory, its machine gone): every
    other one ends with this, exit status 1. ``--resume`` on all of them goes on from the last
    checkpoint."""


class ProcessRefused(CommandFailed):
    """Another process of the cluster refused the run before it started (its output says why)."""


@dataclass(frozen=True)
class ProcessGroup:
    """This process's place among the ``count`` processes of a run (``index`` 0 writes)."""

    index: int = 0
    count: int = 1

    @property
    def chief(self) -> bool:
        return self.index == 0

    @property
    def several(self) -> bool:
        return self.count > 1

    def share(self, n: int) -> List[int]:
        """The indices of ``n`` items (images, batches) this process takes: every ``count``-th
        from its own index, so that the shares differ by at most one item and cover them all."""
        return list(range(self.index, int(n), self.count))

    def allgather(self, array: np.ndarray) -> np.ndarray:
        """Every process's ``array`` (same shape and dtype everywhere), stacked in process order:
        ``(count, *array.shape)``. Every process must call it at the same point."""
        array = np.asarray(array)
        if not self.several:
            return array[None]
        from jax.experimental import multihost_utils  # JAX's own collective across processes
        try:
            return np.asarray(multihost_utils.process_allgather(array, tiled=False))
        except Exception as e:  # noqa: BLE001 - a lost process named; anything else as it is
            lost = lost_process(e, self)
            if lost is None:
                raise
            raise lost from None

    def gather_rows(self, rows: np.ndarray) -> np.ndarray:
        """Every process's ``rows`` (``(n_i, k)``, ``n_i`` may differ), concatenated in process
        order: ``(sum n_i, k)``."""
        rows = np.asarray(rows)
        if not self.several:
            return rows
        counts = self.allgather(np.array([len(rows)], np.int64))[:, 0]
        padded = np.zeros((int(counts.max()),) + rows.shape[1:], rows.dtype)
        padded[:len(rows)] = rows
        every = self.allgather(padded)
        return np.concatenate([part[:int(n)] for part, n in zip(every, counts)])

    @contextlib.contextmanager
    def agreed(self) -> Iterator[None]:
        """The block's checks end alike on every process: one whose block raises tells the
        others, which then raise :class:`ProcessRefused` naming it, so that no process waits for
        one that gave up. The block must hold no collective of its own."""
        if not self.several:
            yield
            return
        try:
            yield
        except BaseException:
            self.allgather(np.array([1], np.int8))
            raise
        votes = self.allgather(np.array([0], np.int8))[:, 0]
        if votes.any():
            refused = [int(i) for i in np.nonzero(votes)[0]]
            raise ProcessRefused(f"process(es) {refused} of this run refused to start (their own "
                                 f"output says why); process {self.index} stops too")

    @contextlib.contextmanager
    def local(self) -> Iterator[None]:
        """Models built and run inside stay on this process's devices (no distribution), so that
        each process can run one on its own share; nothing changes with one process."""
        if not self.several:
            yield
            return
        import keras
        previous = keras.distribution.distribution()
        keras.distribution.set_distribution(None)
        try:
            yield
        finally:
            keras.distribution.set_distribution(previous)


SINGLE = ProcessGroup()


def current_group() -> ProcessGroup:
    """The group of the JAX runtime this process joined (one process when it joined none, or on
    another backend)."""
    import keras
    if keras.backend.backend() != "jax":
        return SINGLE
    import jax
    if not jax.distributed.is_initialized():
        return SINGLE
    return ProcessGroup(jax.process_index(), jax.process_count())


def _wait_for(address: str, timeout_s: float) -> None:
    """Return once something accepts connections at ``address``; CommandFailed naming it and the
    time waited when nothing does within ``timeout_s``."""
    host, port = coordinator_address(address)
    deadline = time.monotonic() + timeout_s
    last = ""
    while True:
        try:
            with socket.create_connection((host, port), timeout=PROBE_EVERY_S):
                return
        except OSError as e:
            last = e.strerror or str(e)
        if time.monotonic() >= deadline:
            raise CommandFailed(
                f"coordinator {address}: nothing answered there within {timeout_s:g} s "
                f"(--cluster-timeout; last: {last}). Start process 0 with the same --coordinator "
                "(it listens there), check the host name and that the port is open between the "
                "machines")
        time.sleep(PROBE_EVERY_S)


def join_cluster(coordinator: str, num_processes: Optional[int] = None,
                 process_id: Optional[int] = None, timeout_s: int = 300,
                 local_device_ids: Optional[Sequence[int]] = None) -> ProcessGroup:
    """Start JAX's distributed runtime in this process: ``coordinator`` ``HOST:PORT`` (process 0
    listens there) with ``num_processes`` and this ``process_id``, or ``"auto"`` (what
    ``jax.distributed`` detects: SLURM, Open MPI, Kubernetes ...). Call before JAX's first
    computation. Waits at most ``timeout_s`` for the others; a second call returns the group."""
    import jax
    if jax.distributed.is_initialized():
        return current_group()
    auto = coordinator == "auto"
    if not auto and process_id:  # process 0 is the coordinator: the others wait for it
        _wait_for(coordinator, timeout_s)
    jax.config.update("jax_cpu_collectives_implementation", "gloo")  # CPU devices' collectives
    options = dict(initialization_timeout=int(timeout_s), heartbeat_timeout_seconds=HEARTBEAT_S)
    if not auto:
        options.update(coordinator_address=coordinator, num_processes=num_processes,
                       process_id=process_id)
    if local_device_ids is not None:
        options["local_device_ids"] = list(local_device_ids)
    where = "the cluster's environment" if auto else coordinator
    logger.log(NOTICE, "joining JAX's distributed runtime at %s%s (waiting at most %d s for "
               "every process)", where, "" if auto else
               f" as process {process_id} of {num_processes}", timeout_s)
    try:
        jax.distributed.initialize(**options)
    except RuntimeError as e:
        raise SettingError(f"coordinator {coordinator}: JAX's distributed runtime cannot start "
                           f"in this process ({e}); join it first thing, before any JAX "
                           "computation", "coordinator") from None
    except ValueError as e:  # auto: no cluster environment found
        raise SettingError(f"coordinator {coordinator}: {e}", "coordinator") from None
    group = current_group()
    logger.log(NOTICE, "process %d of %d; %d devices in all, %d here", group.index, group.count,
               len(jax.devices()), len(jax.local_devices()))
    return group


def _fingerprint(value: object) -> int:
    return zlib.crc32(repr(value).encode())


def check_same_settings(group: ProcessGroup, settings: Dict[str, object]) -> None:
    """SettingError naming the first setting whose value differs between processes (each
    process's value is compared by a checksum of its text). Every process calls it with the same
    names, at the same point, before the first step."""
    if not group.several:
        return
    names = sorted(settings)
    mine = np.array([_fingerprint(settings[n]) for n in names], np.int64)
    every = group.allgather(mine)
    for column, name in enumerate(names):
        values = every[:, column]
        if (values != values[0]).any():
            differing = [int(i) for i in np.nonzero(values != mine[column])[0]]
            raise SettingError(
                f"{name} differs between the processes of this run: process {group.index} has "
                f"{settings[name]!r}, process(es) {differing} another value; every process must "
                "be started with the same settings and data", name)


_PEER_FAILURES = ("gloo", "connection reset", "heartbeat", "coordination service",
                  "connection refused", "nccl", "unavailable")


def lost_process(error: BaseException, group: ProcessGroup) -> Optional[ProcessLost]:
    """The :class:`ProcessLost` that ``error`` (raised by a collective) means in a run of
    several processes, or None when it is something else."""
    if not group.several:
        return None
    text = str(error)
    if not any(word in text.lower() for word in _PEER_FAILURES):
        return None
    first = text.strip().splitlines()[0] if text.strip() else type(error).__name__
    others = [i for i in range(group.count) if i != group.index]
    which = (f"process {others[0]}" if len(others) == 1 else
             f"one of processes {', '.join(map(str, others))}")
    return ProcessLost(
        f"process {group.index} of {group.count}: another process of this run stopped "
        f"({which}; its own output says why); the collective failed: {first[:300]}. Start "
        "every process again with --resume to go on from the last checkpoint")
