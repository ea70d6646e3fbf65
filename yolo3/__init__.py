"""yolo3: YOLOv3 object detectors for TensorFlow 2 / Keras 3.

``import yolo3`` is light (no TensorFlow). The heavy parts load on first use:
``yolo3.YOLO`` (:class:`yolo3.inference.detector.YOLO`), ``yolo3.load_detector`` (any model file, on
the engine chosen for the machine), ``yolo3.build_body`` (:func:`yolo3.model.build_body`),
``yolo3.get_spec`` (:func:`yolo3.config.specs.get_spec`), ``yolo3.detect_video`` (keras-yolo3's, see
:func:`yolo3.inference.video.detect_video`). Loading a yolo3 ``.keras`` file through
:func:`yolo3.checkpoint.saving.load_keras_model` (what the detector, the converter and the tools do)
registers yolo3's serialisable Keras objects first.
"""
__version__ = "0.2.0"

_LAZY = {
    "YOLO": ("yolo3.inference.detector", "YOLO"),
    "load_detector": ("yolo3.inference.detector", "load_detector"),
    "build_body": ("yolo3.model", "build_body"),
    "get_spec": ("yolo3.config.specs", "get_spec"),
    "ModelInfo": ("yolo3.checkpoint.metadata", "ModelInfo"),
    "detect_video": ("yolo3.inference.video", "detect_video"),  # keras-yolo3's yolo.detect_video
}


def __getattr__(name):
    if name in _LAZY:
        import importlib
        module, attribute = _LAZY[name]
        return getattr(importlib.import_module(module), attribute)
    raise AttributeError(f"module 'yolo3' has no attribute {name!r}")


def __dir__():
    return sorted(list(globals()) + list(_LAZY))
