"""Makes TensorFlow unimportable in every Python process started with this folder on
``PYTHONPATH`` (and the processes they start): what a machine with Keras and JAX or PyTorch, and
no TensorFlow, sees (tests/features/test_backends.py)."""
import importlib.abc
import sys


class NoTensorFlow(importlib.abc.MetaPathFinder):
    """Refuses ``tensorflow`` and its submodules as if they were not installed."""

    def find_spec(self, name, path, target=None):
        if name == "tensorflow" or name.startswith("tensorflow."):
            raise ModuleNotFoundError(f"No module named {name!r} (made unimportable)", name=name)
        return None


sys.meta_path.insert(0, NoTensorFlow())
