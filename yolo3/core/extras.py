"""Optional packages: what each feature needs and how to install it, in one place.

A feature asks :func:`require` for its package; one that is not installed is an
:class:`~yolo3.core.errors.ArgumentError` naming the feature and the install command, never a bare
``ImportError``. Nothing is imported here until asked for.
"""
from __future__ import annotations

import importlib
import importlib.util
from types import ModuleType

from yolo3.core.errors import ArgumentError

# the yolo3 extra (setup.py) that brings each optional package, and its own name on PyPI
EXTRAS = {
    "openvino": ("openvino", "openvino"),
    "nncf": ("openvino", "nncf"),
    "onnx": ("export", "onnx"),
    "tf2onnx": ("export", "tf2onnx"),
    "onnxruntime": ("export", "onnxruntime"),
    "ai_edge_litert": ("export", "ai-edge-litert"),
    "matplotlib": ("plot", "matplotlib"),
    "skimage": ("bench", "scikit-image"),
    # tracking: Roboflow's motion trackers (no PyTorch), TrackEval's HOTA/IDF1/MOTA
    "trackers": ("track", "trackers"),
    "supervision": ("track", "supervision"),
    "trackeval": ("track", "trackeval"),
    "tensorboard": (None, "tensorboard"),
    # experiment trackers (yolo3 train --tracker)
    "mlflow": ("mlflow", "mlflow"),
    "wandb": ("wandb", "wandb"),
    # the search over settings (yolo3 tune)
    "optuna": ("tune", "optuna"),
    # export, OpenVINO and tf.data: a JAX or PyTorch install trains and detects without it
    "tensorflow": (None, "tensorflow"),
    # core dependencies whose PyPI name is not their module's (an install with --no-deps)
    "cv2": (None, "opencv-python"),
    "yaml": (None, "pyyaml"),
    "PIL": (None, "pillow"),
}

__all__ = ["EXTRAS", "install_hint", "installed", "require"]


def install_hint(package: str) -> str:
    """How to install ``package`` (a top-level module name): its yolo3 extra, or the package."""
    extra, name = EXTRAS.get(package, (None, package))
    if extra is None:
        return f"pip install {name}"
    return f"pip install 'yolo3[{extra}]' (or {name})"


def installed(package: str) -> bool:
    """Whether ``package`` (a top-level module name) can be imported, without importing it."""
    try:
        return importlib.util.find_spec(package) is not None
    except (ImportError, ValueError):  # a finder that refuses it, a module without a spec
        return False


def require(module: str, purpose: str) -> ModuleType:
    """``import module`` (``a.b`` allowed), or an ArgumentError saying ``purpose`` needs it and
    how to install it."""
    try:
        return importlib.import_module(module)
    except ImportError:
        package = module.split(".")[0]
        raise ArgumentError(f"{purpose} needs {EXTRAS.get(package, (None, package))[1]}: "
                            f"{install_hint(package)}") from None
