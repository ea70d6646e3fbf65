"""Darknet's anchor head as a head kind: its facts (:class:`yolo3.config.heads.AnchorHead`:
anchors ``(N, 2)`` pixels ``(w, h)``, masks per output) and its behaviour: the ``y_true`` maps
and padded boxes as targets, keras-yolo3's loss (:mod:`yolo3.modeling.loss`), anchor decoding
(:func:`yolo3.ops.decode.anchor_boxes_and_scores`), one output convolution per scale."""
from __future__ import annotations

from typing import Callable, Dict, List, Sequence, Tuple

import keras
import numpy as np

from yolo3.config import heads as facts
from yolo3.config.loss_options import LossOptions
from yolo3.config.masks import default_masks
from yolo3.data.dataset_config import TargetEncoding
from yolo3.heads.base import Head, same_facts
from yolo3.modeling.bodies import output_layer_names
from yolo3.modeling.loss import yolo_training_model
from yolo3.ops.anchors import format_anchors
from yolo3.ops.decode import anchor_boxes_and_scores

__all__ = ["AnchorHead"]


class AnchorHead(facts.AnchorHead, Head):
    """The anchor head (see the module docstring); made like its facts: ``AnchorHead(anchors,
    masks)`` or ``AnchorHead.of(anchors, masks=None)``."""

    def training_model(self, body: keras.Model, num_classes: int, max_boxes: int,
                       options: LossOptions = LossOptions()) -> keras.Model:
        return yolo_training_model(body, self.anchor_array(), num_classes, options,
                                   anchor_mask=self.mask_lists(), max_boxes=max_boxes)

    def target_encoding(self, num_classes: int, assign_iou: float = 1.0,
                        true_boxes: bool = True) -> TargetEncoding:
        return TargetEncoding(self.anchor_array(), num_classes, self.mask_lists(), assign_iou,
                              true_boxes=true_boxes)

    def raw_boxes_and_scores(self, outputs: Sequence, num_classes: int, image_hw,
                             input_hw) -> Tuple:
        return anchor_boxes_and_scores(outputs, self.anchor_array(), self.mask_lists(),
                                       num_classes, input_hw, image_hw)

    def output_layer_groups(self, body: keras.Model) -> List[Tuple[str, ...]]:
        return [(name,) for name in output_layer_names(body)]

    def refit_anchors(self, choose: Callable[[np.ndarray], np.ndarray]) -> "AnchorHead":
        """The head of ``choose(anchors)``, split over as many outputs by the default masks."""
        anchors = np.asarray(choose(self.anchor_array()), np.float32).reshape(-1, 2)
        return AnchorHead(anchors, default_masks(len(anchors), self.num_scales))

    def anchor_sizes(self) -> np.ndarray:
        return self.anchor_array()

    def run_files(self) -> Dict[str, str]:
        """``anchors.txt``: the run's anchors, Darknet's ``w,h, w,h`` line."""
        return {"anchors.txt": format_anchors(self.anchor_array())}

    def describe(self) -> str:
        """``anchor head, anchors 10,14, 23,27, ...`` (Darknet's line)."""
        return f"anchor head, anchors {format_anchors(self.anchor_array()).strip()}"

    def __eq__(self, other):
        return same_facts(self, other, facts.AnchorHead)

    __hash__ = facts.AnchorHead.__hash__
