"""A quiet start: TensorFlow's C++ start-up notices kept off the terminal.

``import tensorflow`` writes half a dozen lines to the process's stderr before its logging reads
``TF_CPP_MIN_LOG_LEVEL`` (absl's "before absl::InitializeLog()" notice, oneDNN's and the CPU
feature guard's information, "Could not find cuda drivers"), and the first look for GPUs on a
machine without CUDA drivers adds "failed call to cuInit". Users read them as errors. While a
command runs (not with ``--verbose`` or ``--debug``), :class:`QuietTensorFlow` imports TensorFlow
with file descriptor 2 captured and looks for GPUs, then writes back every captured line but those
notices: TensorFlow's real warnings and errors still reach the user.
"""
from __future__ import annotations

import contextlib
import importlib.abc
import importlib.machinery
import os
import re
import sys
import tempfile
from typing import Iterator, List

# what TensorFlow prints while it starts, and nothing else: absl's notice, INFO lines ("I0000
# 00:00:... file.cc:N] ..."), the feature guard's second line
_NOTICES = (re.compile(r"^WARNING: All log messages before absl::InitializeLog\(\) is called"),
            re.compile(r"^I\d{4} [\d:. ]+\d+ [\w.]+:\d+\] "),
            re.compile(r"^To enable the following instructions: "))
_NO_DRIVER = "Could not find cuda drivers on your machine"
_CUINIT = re.compile(r"^E\d{4} [\d:. ]+\d+ cuda_platform\.cc:\d+\] failed call to cuInit")

__all__ = ["QuietTensorFlow", "quiet_tensorflow", "start_up_lines_kept"]


def start_up_lines_kept(lines: List[str]) -> List[str]:
    """The lines of TensorFlow's start that a user should see: all but the notices (and the cuInit
    failure of a machine without CUDA drivers, which has no GPU to report on)."""
    no_driver = any(_NO_DRIVER in line for line in lines)
    return [line for line in lines if not any(p.match(line) for p in _NOTICES)
            and not (no_driver and _CUINIT.match(line))]


@contextlib.contextmanager
def _captured_fd2() -> Iterator[List[str]]:
    """File descriptor 2 (what C++ code writes to) into a temporary file; its lines in the list
    once the block ends."""
    lines: List[str] = []
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile(mode="w+b") as tmp:
        os.dup2(tmp.fileno(), 2)
        try:
            yield lines
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
            tmp.seek(0)
            lines.extend(tmp.read().decode("utf-8", "replace").splitlines())


class _QuietLoader(importlib.abc.Loader):
    def __init__(self, loader):
        self.loader = loader

    def create_module(self, spec):
        return self.loader.create_module(spec)

    def exec_module(self, module) -> None:
        with _captured_fd2() as lines:
            self.loader.exec_module(module)
            module.config.list_physical_devices("GPU")  # cuInit's notice, here too
        for line in start_up_lines_kept(lines):
            print(line, file=sys.stderr)


class QuietTensorFlow(importlib.abc.MetaPathFinder):
    """Imports ``tensorflow`` through :class:`_QuietLoader` (first in ``sys.meta_path``)."""

    def find_spec(self, fullname, path=None, target=None):
        if fullname != "tensorflow":
            return None
        spec = None
        for finder in sys.meta_path:  # the others, in their order: one may refuse TensorFlow
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(fullname, path, target)
            if spec is not None:
                break
        if spec is None or spec.loader is None:
            return None
        spec.loader = _QuietLoader(spec.loader)
        return spec


@contextlib.contextmanager
def quiet_tensorflow(enabled: bool = True) -> Iterator[None]:
    """While the block runs, a first ``import tensorflow`` keeps its start-up notices off the
    terminal (nothing happens when TensorFlow is already imported, or with ``enabled`` False)."""
    if not enabled or "tensorflow" in sys.modules:
        yield
        return
    finder = QuietTensorFlow()
    sys.meta_path.insert(0, finder)
    try:
        yield
    finally:
        if finder in sys.meta_path:
            sys.meta_path.remove(finder)
