"""YOLOv8's decoupled anchor-free head as a head kind: its facts
(:class:`yolo3.config.anchor_free_head.AnchorFreeHead`: strides, ``reg_max`` distance bins) and
its behaviour: the padded boxes as targets (assigned in the loss), the task-aligned loss
(:mod:`yolo3.modeling.anchor_free_loss`), distance decoding
(:func:`yolo3.ops.decode.anchor_free_boxes_and_scores`), two prediction convolutions per scale
``(distances, classes)``."""
from __future__ import annotations

from typing import List, Sequence, Tuple

import keras

from yolo3.config import anchor_free_head as facts
from yolo3.config.loss_options import LossOptions
from yolo3.data.dataset_config import TargetEncoding
from yolo3.heads.base import Head, same_facts
from yolo3.modeling.anchor_free_loss import anchor_free_training_model
from yolo3.modeling.bodies import prediction_layer_names
from yolo3.ops.decode import anchor_free_boxes_and_scores

__all__ = ["AnchorFreeHead"]


class AnchorFreeHead(facts.AnchorFreeHead, Head):
    """The anchor-free head (see the module docstring): ``AnchorFreeHead(strides, reg_max)``."""

    def training_model(self, body: keras.Model, num_classes: int, max_boxes: int,
                       options: LossOptions = LossOptions()) -> keras.Model:
        return anchor_free_training_model(body, self, num_classes, max_boxes, options)

    def target_encoding(self, num_classes: int, assign_iou: float = 1.0,
                        true_boxes: bool = True) -> TargetEncoding:
        """The padded boxes alone (the loss assigns them to cells; ``assign_iou`` and
        ``true_boxes`` are the anchor head's)."""
        return TargetEncoding(None, num_classes, true_boxes=True)

    def raw_boxes_and_scores(self, outputs: Sequence, num_classes: int, image_hw,
                             input_hw) -> Tuple:
        return anchor_free_boxes_and_scores(outputs, self, num_classes, input_hw, image_hw)

    def output_layer_groups(self, body: keras.Model) -> List[Tuple[str, ...]]:
        return [prediction_layer_names(stride) for stride in self.strides]

    def __eq__(self, other):
        return same_facts(self, other, facts.AnchorFreeHead)

    __hash__ = facts.AnchorFreeHead.__hash__
