"""The JAX cluster's pieces: a process's share, the gathering of rows and detections, the
settings check, the coordinator that never answers, and a collective's failure named as a lost
process. Two real processes of JAX's runtime: tests/features/test_jax_processes.py."""
from __future__ import annotations

import socket
import time

import numpy as np
import pytest

from yolo3.core.errors import CommandFailed
from yolo3.training.callbacks import gather_detections
from yolo3.training.jax_cluster import (
    SINGLE,
    ProcessGroup,
    ProcessLost,
    _wait_for,
    check_same_settings,
    lost_process,
)


class TwoProcesses:
    """Stands for the group of process 0 of two: ``gather_rows`` joins this process's rows
    with the other's, given beforehand."""

    several, count, index = True, 2, 0

    def __init__(self, other_rows: np.ndarray):
        self.other_rows = other_rows

    def gather_rows(self, rows: np.ndarray) -> np.ndarray:
        return np.concatenate([rows, self.other_rows])


def test_the_shares_of_the_processes_cover_every_item_once():
    for count in (1, 2, 3, 5):
        shares = [ProcessGroup(i, count).share(11) for i in range(count)]
        assert sorted(sum(shares, [])) == list(range(11))
        assert max(map(len, shares)) - min(map(len, shares)) <= 1
    assert ProcessGroup(1, 2).share(0) == []


def test_one_process_gathers_its_own_arrays_and_agrees_without_collectives():
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    assert np.array_equal(SINGLE.allgather(x), x[None])
    rows = np.ones((4, 7))
    assert SINGLE.gather_rows(rows) is rows
    with SINGLE.agreed(), SINGLE.local():
        pass
    with pytest.raises(ValueError):  # a check's own error, untouched
        with SINGLE.agreed():
            raise ValueError("bad")
    check_same_settings(SINGLE, {"seed": 1})  # nothing to compare


def _dets(rng, keys):
    out = {}
    for k in keys:
        n = int(rng.integers(0, 4))
        boxes = np.sort(rng.uniform(0, 64, (n, 4)).astype(np.float32), axis=1)
        out[k] = (boxes, rng.uniform(0, 1, n).astype(np.float32),
                  rng.integers(0, 5, n).astype(np.int32))
    return out


def test_gathered_detections_are_every_processes_detections_of_every_image():
    rng = np.random.default_rng(0)
    count = 7
    everything = _dets(rng, range(count))
    mine = {k: everything[k] for k in ProcessGroup(0, 2).share(count)}
    theirs = {k: everything[k] for k in ProcessGroup(1, 2).share(count)}
    other_rows = [np.column_stack([np.full(len(s), k), b, s, c])
                  for k, (b, s, c) in theirs.items() if len(s)]
    group = TwoProcesses(np.concatenate(other_rows) if other_rows else np.zeros((0, 7)))
    merged = gather_detections(group, mine, count)
    assert sorted(merged) == list(range(count))
    for k in range(count):
        for got, want in zip(merged[k], everything[k]):
            assert got.dtype == want.dtype
            np.testing.assert_array_equal(got, want)
    empty = gather_detections(TwoProcesses(np.zeros((0, 7))), {}, 3)  # nothing detected at all
    assert all(b.shape == (0, 4) and s.shape == (0,) and c.shape == (0,)
               for b, s, c in empty.values())


def test_a_coordinator_that_never_answers_is_named_with_the_time_waited():
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    start = time.monotonic()
    with pytest.raises(CommandFailed) as caught:
        _wait_for(f"127.0.0.1:{port}", 1.5)
    assert time.monotonic() - start < 10
    message = str(caught.value)
    assert f"127.0.0.1:{port}" in message and "1.5 s" in message and "--cluster-timeout" in message


def test_a_listening_coordinator_is_found_at_once():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen(1)
        start = time.monotonic()
        _wait_for(f"127.0.0.1:{s.getsockname()[1]}", 30)
        assert time.monotonic() - start < 5


def test_a_failed_collective_is_a_lost_process_only_among_several():
    gloo = ValueError("UNKNOWN: Gloo AllGather failed: [pair.cc:538] Read error [127.0.0.1]:16519:"
                      " Connection reset by peer")
    lost = lost_process(gloo, ProcessGroup(0, 2))
    assert isinstance(lost, ProcessLost) and isinstance(lost, CommandFailed)
    assert "process 0 of 2" in str(lost) and "Connection reset by peer" in str(lost)
    assert "stopped (process 1;" in str(lost)
    assert "(one of processes 0, 2, 3;" in str(lost_process(gloo, ProcessGroup(1, 4)))
    assert "--resume" in str(lost)
    assert lost_process(gloo, SINGLE) is None
    assert lost_process(ValueError("shapes (3,) and (4,) differ"), ProcessGroup(1, 2)) is None
