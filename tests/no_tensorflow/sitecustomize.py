"""Makes TensorFlow unimportable in every Python process started with this folder on
``PYTHONPATH`` (and the processes they start): what a machine with Keras and JAX or PyTorch, and
no TensorFlow, sees (tests/features/test_backends.py). The path
finder is wrapped so that it does not see ``tensorflow``: ``import tensorflow`` raises
``ModuleNotFoundError`` and ``importlib.util.find_spec("tensorflow")`` gives None, exactly as
where it is not installed (libraries such as PyTorch's compiler probe for it that way)."""
import importlib.abc
import importlib.machinery
import sys


class NoTensorFlow(importlib.abc.MetaPathFinder):
    """The path finder, blind to ``tensorflow`` and its submodules."""

    def find_spec(self, name, path=None, target=None):
        if name == "tensorflow" or name.startswith("tensorflow."):
            return None
        return importlib.machinery.PathFinder.find_spec(name, path, target)

    def invalidate_caches(self):
        importlib.machinery.PathFinder.invalidate_caches()


sys.meta_path[:] = [NoTensorFlow() if finder is importlib.machinery.PathFinder else finder
                    for finder in sys.meta_path]
