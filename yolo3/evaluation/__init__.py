"""Judging detections: COCO and VOC mAP (``metrics``), the confusion matrix and precision /
recall / F1 against confidence (``diagnostics``), drawing boxes and plots (``visualize``).

Imports ``data``, ``ops``, ``config`` and ``core``; no TensorFlow.
"""


def __getattr__(name: str):
    """``yolo3.evaluation`` was the metrics module until 0.3 (now :mod:`yolo3.evaluation.metrics`):
    its names still resolve here, with a DeprecationWarning, for one release."""
    import importlib
    import warnings
    metrics = importlib.import_module("yolo3.evaluation.metrics")
    if name.startswith("__") or not hasattr(metrics, name):
        raise AttributeError(f"module 'yolo3.evaluation' has no attribute {name!r}")
    warnings.warn(f"yolo3.evaluation.{name} is now yolo3.evaluation.metrics.{name}; the old path "
                  "works until the next release", DeprecationWarning, stacklevel=2)
    return getattr(metrics, name)
