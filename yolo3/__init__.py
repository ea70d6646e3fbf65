"""yolo3: YOLOv3 object detectors for Keras 3, on TensorFlow, JAX and PyTorch.

The package's folders are its architecture, each importing only from the folders below it
(``.importlinter``; docs/architecture.md): ``core`` (errors, files, paths, logging), ``config``
(the variant registry and settings, as data), ``ops`` (box geometry, anchors, letterbox, target
assignment, decoding), ``data`` (annotation layouts, the input pipeline), ``darknet`` (Darknet's
file formats), ``modeling`` (Keras bodies and losses), ``evaluation`` (mAP, diagnostics,
drawing), ``checkpoint`` (model files), ``inference`` (detectors and engines), ``training``,
``export``, ``cli`` and ``benchmarks``. At the top level only faces: ``model`` and ``utils``
(keras-yolo3's module names, behind them ``compat``) and ``moved`` (the module paths before the
folders, which still import for one release, with a warning).

``import yolo3`` is light (no TensorFlow). The heavy parts load on first use:
``yolo3.YOLO`` (:class:`yolo3.inference.detector.YOLO`), ``yolo3.load_detector`` (any model file,
on the engine chosen for the machine), ``yolo3.build_body`` (:func:`yolo3.model.build_body`),
``yolo3.get_spec`` (:func:`yolo3.config.specs.get_spec`), ``yolo3.detect_video`` (keras-yolo3's,
see :func:`yolo3.inference.video.detect_video`), ``yolo3.Tracker``
(:class:`yolo3.inference.tracking.Tracker`: IDs frame by frame). Loading a yolo3 ``.keras`` file through
:func:`yolo3.checkpoint.saving.load_keras_model` (what the detector, the converter and the tools
do) registers yolo3's serialisable Keras objects first.
"""
from yolo3 import moved as _moved
from yolo3.core.version import __version__

__all__ = ["__version__"]

_moved.install()

_LAZY = {
    "YOLO": ("yolo3.inference.detector", "YOLO"),
    "load_detector": ("yolo3.inference.detector", "load_detector"),
    "build_body": ("yolo3.modeling.bodies", "build_body"),
    "get_spec": ("yolo3.config.specs", "get_spec"),
    "ModelInfo": ("yolo3.checkpoint.metadata", "ModelInfo"),
    "detect_video": ("yolo3.inference.video", "detect_video"),  # keras-yolo3's yolo.detect_video
    "Tracker": ("yolo3.inference.tracking", "Tracker"),
}


def __getattr__(name):
    if name in _LAZY:
        import importlib
        module, attribute = _LAZY[name]
        return getattr(importlib.import_module(module), attribute)
    raise AttributeError(f"module 'yolo3' has no attribute {name!r}")


def __dir__():
    return sorted(list(globals()) + list(_LAZY))
