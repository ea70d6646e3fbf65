"""A head's training model: the one place that picks the loss layer by the head
(:mod:`yolo3.config.heads`).

:func:`training_model` wraps a body into ``[image, *targets] -> loss (1,)``: the anchor head's
:func:`~yolo3.modeling.loss.yolo_training_model` (inputs ``image``, the ``y_true`` maps and the
padded ``true_boxes``) or the anchor-free head's
:func:`~yolo3.modeling.anchor_free_loss.anchor_free_training_model` (``image`` and
``true_boxes``), with the loss's options (:class:`~yolo3.config.loss_options.LossOptions`).
"""
from __future__ import annotations

import keras

from yolo3.config.heads import Head
from yolo3.config.loss_options import LossOptions
from yolo3.modeling.anchor_free_loss import anchor_free_training_model
from yolo3.modeling.loss import yolo_training_model

__all__ = ["training_model"]


def training_model(body: keras.Model, head: Head, num_classes: int, max_boxes: int,
                   options: LossOptions = LossOptions()) -> keras.Model:
    """``body``'s training model for ``head``: its output is the loss ``(1,)`` (compile with
    ``identity_loss``), the ground truth padded to ``max_boxes`` boxes so every shape is
    static."""
    options = options.for_classes(num_classes)
    if head.anchor_free:
        return anchor_free_training_model(body, head, num_classes, max_boxes, options)
    return yolo_training_model(body, head.anchor_array(), num_classes, options,
                               anchor_mask=head.mask_lists(), max_boxes=max_boxes)
