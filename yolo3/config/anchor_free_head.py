"""The anchor-free head's facts: how its raw maps are laid out and where its cells sit.

yolo3 bodies end in one of two kinds of detection head:

- the **anchor head** (YOLOv3's, Darknet's): per cell of each output, ``A`` anchors x ``(tx, ty,
  tw, th, objectness, C class logits)``; a model's anchors and masks say how to read it
  (:mod:`yolo3.config.masks`, :class:`yolo3.checkpoint.metadata.ModelInfo`);
- the **anchor-free head** (:class:`AnchorFreeHead`, the decoupled head of YOLOv8): per cell of
  each output of stride ``s``, ``4 x reg_max`` logits, then ``C`` class logits. The logits are
  four distributions over ``0 .. reg_max - 1`` strides: the distances from the cell's centre to
  the box's left, top, right and bottom sides, each read as the distribution's expectation
  (distribution focal loss, "DFL"). No anchors, no objectness: a class's score is its sigmoid.

No TensorFlow here.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable, ClassVar, Dict, List, Optional, Tuple

import numpy as np

__all__ = ["AF_PRIOR_DISTANCE", "ANCHOR_FREE", "AnchorFreeHead", "anchor_free_bias_priors"]

ANCHOR_FREE = "anchor_free"  # the head's kind, as model files record it
# an anchor-free head starts every box side at this many strides from its cell's centre (a box
# three strides wide, about the size of an anchor on its scale). Measured on three realistic sets at
# 192 px: +8% mAP@0.5:0.95 over YOLOv8's start (docs/recipe.md: The anchor-free variants)
AF_PRIOR_DISTANCE = 1.5


@dataclass(frozen=True)
class AnchorFreeHead:
    """An anchor-free head with outputs of ``strides`` (largest first, the body's output order)
    and ``reg_max`` distance bins per side."""

    strides: Tuple[int, ...]
    reg_max: int
    kind: ClassVar[str] = ANCHOR_FREE  # the head kind's name (yolo3.heads.registry)
    darknet_layer: ClassVar[bool] = False  # Darknet has no layer for it: no cfg holds it
    anchor_free: ClassVar[bool] = True
    anchors_per_scale: ClassVar[None] = None  # no anchors

    def __post_init__(self):
        strides = tuple(int(s) for s in self.strides)
        if not strides or any(s <= 0 for s in strides):
            raise ValueError(f"an anchor-free head needs positive strides, got {self.strides!r}")
        if int(self.reg_max) < 2:
            raise ValueError(f"reg_max must be at least 2 distance bins, got {self.reg_max!r}")
        object.__setattr__(self, "strides", strides)
        object.__setattr__(self, "reg_max", int(self.reg_max))

    @property
    def num_scales(self) -> int:
        return len(self.strides)

    @property
    def box_channels(self) -> int:
        """The distance logits per cell: ``4 * reg_max`` (left, top, right, bottom)."""
        return 4 * self.reg_max

    def channels(self, num_classes: int, anchors_per_scale: None = None) -> int:
        """Channels of each output for ``num_classes`` classes (no anchors: ``anchors_per_scale``
        is not read)."""
        return self.box_channels + int(num_classes)

    def masks_for(self, num_anchors: Optional[int] = None) -> List[List[int]]:
        """No anchors, so no masks: ValueError."""
        raise ValueError("an anchor-free head has no anchors or masks")

    def output_channels(self, num_classes: int) -> List[int]:
        """The channels of each output for ``num_classes`` classes."""
        return [self.channels(num_classes)] * self.num_scales

    def with_found_anchors(self, find: Callable[[], Tuple[Any, Any]]) -> "AnchorFreeHead":
        """No anchors: this head, ``find`` never called."""
        return self

    def num_classes(self, channels: int) -> int:
        """The class count of outputs with ``channels`` channels (ValueError when none fits)."""
        classes = int(channels) - self.box_channels
        if classes < 1:
            raise ValueError(f"{channels} output channels leave no class after the "
                             f"{self.box_channels} distance logits of reg_max {self.reg_max}")
        return classes

    def anchor_array(self) -> np.ndarray:
        """No anchors: ``(0, 2)``."""
        return np.zeros((0, 2), np.float32)

    def mask_lists(self) -> List[List[int]]:
        return []

    def bias_priors(self, num_classes: int, cells: int, objects_per_image: float
                    ) -> Tuple[np.ndarray, np.ndarray]:
        """The initial biases of the two convolutions that end one output of ``cells`` cells:
        ``(distance biases, class biases)`` (:func:`anchor_free_bias_priors`)."""
        return anchor_free_bias_priors(self.reg_max, num_classes, cells, objects_per_image)

    def record(self) -> Dict[str, Any]:
        """What a model file records of the head (:meth:`to_dict`)."""
        return self.to_dict()

    def to_dict(self) -> Dict[str, Any]:
        return {"kind": ANCHOR_FREE, "strides": list(self.strides), "reg_max": self.reg_max}

    @classmethod
    def from_record(cls, record: Dict[str, Any]) -> "AnchorFreeHead":
        """The head a model file records (:meth:`from_dict`)."""
        return cls.from_dict(record)

    @classmethod
    def from_dict(cls, data: Dict[str, Any]) -> "AnchorFreeHead":
        """The head a model file records (ValueError for another kind or missing facts)."""
        if not isinstance(data, dict) or data.get("kind") != ANCHOR_FREE:
            raise ValueError(f"not an anchor-free head: {data!r}")
        try:
            return cls(tuple(data["strides"]), int(data["reg_max"]))
        except (KeyError, TypeError) as e:
            raise ValueError(f"anchor-free head without {e}") from None


def anchor_free_bias_priors(reg_max: int, num_classes: int, cells: int,
                            objects_per_image: float) -> Tuple[np.ndarray, np.ndarray]:
    """The initial biases of an anchor-free head's two predictions at an output of ``cells``
    cells: the distance logits ``(4 * reg_max,)``, each side's ``-lambda * k`` for bin ``k``, so
    that every side starts at an expected :data:`AF_PRIOR_DISTANCE` strides (YOLOv8 starts every
    bin alike: an expectation of ``(reg_max - 1) / 2`` strides, boxes far larger than most objects
    at a small input); and the class logits ``(num_classes,)`` at the logit of ``objects_per_image
    / (cells * num_classes)`` (YOLOv8's prior, ``5 / C / cells``, with the data's objects per
    image)."""
    bins = np.arange(int(reg_max), dtype=np.float64)
    low, high = -50.0, 50.0  # the expectation falls as lambda rises: bisect for the prior
    for _ in range(200):
        lam = (low + high) / 2
        weights = np.exp(-lam * bins - np.max(-lam * bins))
        if np.sum(weights * bins) / np.sum(weights) > AF_PRIOR_DISTANCE:
            low = lam
        else:
            high = lam
    p = min(0.5, max(1e-6, objects_per_image / (max(1, cells) * max(1, num_classes))))
    return (np.tile(-lam * bins, 4).astype(np.float32),
            np.full(int(num_classes), math.log(p / (1.0 - p)), np.float32))
