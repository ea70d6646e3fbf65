"""keras-yolo3's ``yolo3.model``: its public names with their contracts (a compatibility face).

``yolo_body``, ``tiny_yolo_body``, ``yolo_head``, ``box_iou`` and, from
:mod:`yolo3.compat.keras_yolo3`, ``yolo_eval`` (one image, boxes y1, x1, y2, x2),
``yolo_correct_boxes``, ``yolo_boxes_and_scores``, ``yolo_loss`` and ``preprocess_true_boxes`` with
keras-yolo3's default masks; plus yolo3's ``build_body`` and ``yolo_training_model``. The bodies
live in :mod:`yolo3.modeling.bodies`; nothing inside yolo3 imports this module.
"""
from __future__ import annotations

from yolo3.compat.keras_yolo3 import (
                          preprocess_true_boxes,
                          yolo_boxes_and_scores,
                          yolo_correct_boxes,
                          yolo_eval,
                          yolo_loss,
)
from yolo3.config.architectures import BACKBONE_PREFIX
from yolo3.modeling.blocks import BN_EPSILON, LEAKY_SLOPE
from yolo3.modeling.bodies import (
                          KerasNet,
                          block_names,
                          build_body,
                          build_spec_body,
                          output_layer_names,
                          tiny_yolo_body,
                          yolo_body,
)
from yolo3.modeling.loss import yolo_training_model
from yolo3.ops.box_ops import box_iou
from yolo3.ops.decode import yolo_head

__all__ = [
    "yolo_body", "tiny_yolo_body", "build_body", "yolo_head", "yolo_correct_boxes",
    "yolo_boxes_and_scores", "yolo_eval", "preprocess_true_boxes", "yolo_loss", "box_iou",
    "yolo_training_model", "BACKBONE_PREFIX", "output_layer_names", "KerasNet", "BN_EPSILON",
    "LEAKY_SLOPE", "block_names", "build_spec_body",
]
