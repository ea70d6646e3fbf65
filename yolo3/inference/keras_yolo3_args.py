"""keras-yolo3's ``YOLO()`` arguments: its defaults, and its keywords resolved to yolo3's.

No TensorFlow here.
"""
from __future__ import annotations

import os

from yolo3.checkpoint.metadata import read_info, read_side_files

__all__ = ["KERAS_YOLO3_DEFAULTS", "resolve_yolo_kwargs"]

# keras-yolo3's yolo.py YOLO._defaults (paths relative to the working folder).
KERAS_YOLO3_DEFAULTS = {
    "model_path": "model_data/yolo.h5",
    "anchors_path": "model_data/yolo_anchors.txt",
    "classes_path": "model_data/coco_classes.txt",
    "score": 0.3,
    "iou": 0.45,
    "model_image_size": (416, 416),
    "gpu_num": 1,
}


_VIDEO_FLAGS = ("image", "input", "output")  # yolo_video.py's own flags, meaningless to YOLO
_FLAG_ALIASES = {"model": "model_path", "anchors": "anchors_path", "classes": "classes_path"}


def resolve_yolo_kwargs(model_path, anchors_path, classes_path, input_size, model_image_size,
                        flags: dict):
    """``(model_path, anchors_path, classes_path, input_size)`` for
    :class:`yolo3.inference.detector.YOLO` from its arguments and keras-yolo3's keyword arguments.

    ``flags`` are the extra keywords: yolo_video.py's ``model``, ``anchors``, ``classes`` (used
    unless the ``*_path`` argument is given) and ``image``, ``input``, ``output`` (ignored); any other
    is a TypeError, as for any unknown keyword. Without ``model_path`` the model is keras-yolo3's
    default ``model_data/yolo.h5``; a model that carries no anchors or classes (and has no side
    files) takes keras-yolo3's default ``model_data`` files when they exist. ``model_image_size``
    is keras-yolo3's ``(h, w)`` (``(None, None)``: each image's own size, rounded down to a multiple
    of 32 — returned as the input size ``"image"``).
    """
    named = {"model_path": model_path, "anchors_path": anchors_path, "classes_path": classes_path}
    for key, value in flags.items():
        if key in _FLAG_ALIASES:
            if named[_FLAG_ALIASES[key]] is None:
                named[_FLAG_ALIASES[key]] = value
        elif key not in _VIDEO_FLAGS:
            raise TypeError(f"YOLO() got an unexpected keyword argument {key!r}")
    model_path = named["model_path"] or KERAS_YOLO3_DEFAULTS["model_path"]
    anchors_path, classes_path = named["anchors_path"], named["classes_path"]
    if (anchors_path is None or classes_path is None) and os.path.isfile(model_path) \
            and read_info(model_path) is None:
        side = read_side_files(model_path)
        for fact, key in (("anchors", "anchors_path"), ("class_names", "classes_path")):
            default = KERAS_YOLO3_DEFAULTS[key]
            if named[key] is None and fact not in side and os.path.isfile(default):
                named[key] = default
        anchors_path, classes_path = named["anchors_path"], named["classes_path"]
    if model_image_size is not None:
        if input_size is not None:
            raise TypeError("give input_size or keras-yolo3's model_image_size, not both")
        size = tuple(model_image_size)
        input_size = "image" if size == (None, None) else size
    return model_path, anchors_path, classes_path, input_size
