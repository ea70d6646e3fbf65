"""Run a module as ``python -m`` does with TensorFlow unimportable:
``python tests/without_tensorflow.py MODULE ARGS...`` (what a machine with Keras and JAX or
PyTorch, and no TensorFlow, sees; tests/features/test_backends.py)."""
from __future__ import annotations

import importlib.abc
import runpy
import sys


class NoTensorFlow(importlib.abc.MetaPathFinder):
    """Refuses ``tensorflow`` and its submodules as if they were not installed."""

    def find_spec(self, name, path, target=None):
        if name == "tensorflow" or name.startswith("tensorflow."):
            raise ModuleNotFoundError(f"No module named {name!r} (made unimportable)", name=name)
        return None


if __name__ == "__main__":
    sys.meta_path.insert(0, NoTensorFlow())
    module, sys.argv = sys.argv[1], [sys.argv[1], *sys.argv[2:]]
    runpy.run_module(module, run_name="__main__", alter_sys=True)
