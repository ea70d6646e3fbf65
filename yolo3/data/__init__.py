"""Data: annotation files -> records -> tf.data batches; augmentation; the synthetic dataset.

``annotations``: :class:`Record`, :func:`load_annotations` (text / VOC XML / COCO JSON),
:func:`write_annotations`; ``pipeline``: :func:`make_dataset` (the letterbox is
:mod:`yolo3.ops.letterbox`); ``images``: :func:`load_image`; ``synthetic``:
:func:`make_synthetic_dataset`. Submodules are imported on use, so reading annotations does not load
TensorFlow.
"""
from yolo3.data.annotations import Record, coco_class_names, load_annotations, write_annotations
from yolo3.data.images import load_image

__all__ = ["Record", "load_annotations", "write_annotations", "coco_class_names", "load_image"]
