"""yolo3.core.cpus: the usable cores are the process's affinity, which a narrower affinity
narrows, and every count built on them follows (the data workers' default, the benchmarks')."""
from __future__ import annotations

import os

import pytest

from yolo3.core.cpus import usable_cores


def test_the_usable_cores_are_the_affinity():
    assert usable_cores() == len(os.sched_getaffinity(0)) >= 1


def test_a_narrowed_affinity_narrows_every_count(monkeypatch):
    from yolo3.benchmarks.machine import cores
    from yolo3.data.numpy_pipeline import default_workers
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0})
    assert usable_cores() == cores() == default_workers() == 1
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(64)))
    assert usable_cores() == cores() == 64 and default_workers() == 32  # the workers' cap


def test_without_affinity_the_machines_count(monkeypatch):
    monkeypatch.delattr(os, "sched_getaffinity")
    monkeypatch.setattr(os, "cpu_count", lambda: None)
    assert usable_cores() == 1
    monkeypatch.setattr(os, "cpu_count", lambda: 6)
    assert usable_cores() == 6


@pytest.mark.parametrize("module", ["yolo3.cli.flags", "yolo3.benchmarks.machine",
                                    "yolo3.data.numpy_pipeline"])
def test_no_other_module_counts_cores_itself(module):
    import importlib
    import inspect
    source = inspect.getsource(importlib.import_module(module))
    assert "sched_getaffinity" not in source and "cpu_count" not in source
