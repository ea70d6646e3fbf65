"""The detection head as one interface: what a body's raw maps mean, asked of the head.

Two heads, the same questions (:data:`Head`):

- :class:`AnchorHead`, Darknet's and keras-yolo3's: per cell of each output, ``A`` anchors x
  ``(tx, ty, tw, th, objectness, C class logits)``; its anchors ``(N, 2)`` pixels ``(w, h)`` and
  masks (anchor indices per output, largest stride first) say how to read them;
- :class:`~yolo3.config.anchor_free_head.AnchorFreeHead`, YOLOv8's decoupled head: per cell,
  ``4 x reg_max`` distance logits, then ``C`` class logits.

Each answers ``anchor_free``, ``strides``, ``num_scales``, ``anchors_per_scale`` (None without
anchors), ``channels(num_classes)`` (of every output), ``num_classes(channels)``,
``output_channels(num_classes)``, ``anchor_array()``, ``mask_lists()``,
``bias_priors(num_classes, cells, objects_per_image)`` (the initial biases of the convolutions
that end one output), ``with_found_anchors(find)`` (the kind with the anchors a model file gives,
where it has anchors), ``record()`` (what a model file keeps of it: None for the anchor head,
whose anchors and masks are fields of their own) and ``from_record(record)``. Kinds are found by
name in :mod:`yolo3.config.head_kinds`.
These are the heads' facts, as data (a variant's, a model file's); each kind's behaviour (its
training model, targets, decoding, output convolutions) is the class of :mod:`yolo3.heads` that
derives from them (:func:`yolo3.heads.registry.as_head` gives it). No TensorFlow here.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable, ClassVar, Dict, List, Optional, Sequence, Tuple, Union

import numpy as np

from yolo3.config.anchor_free_head import AnchorFreeHead
from yolo3.config.masks import default_masks, validate_masks

__all__ = ["ANCHOR_HEAD_STRIDES", "AnchorHead", "Head", "check_own_anchors", "head_of",
           "output_bias_priors", "resolved_head"]

# the strides of an anchor head's outputs, largest first: a body with n outputs has the first n
ANCHOR_HEAD_STRIDES = (32, 16, 8)


@dataclass(frozen=True)
class AnchorHead:
    """Darknet's anchor head: ``anchors`` ``((w, h), ...)`` input pixels sorted by area, and
    ``masks``, the anchor indices of each output, largest stride first."""

    anchors: Tuple[Tuple[float, float], ...]
    masks: Tuple[Tuple[int, ...], ...]
    kind: ClassVar[str] = "anchor"  # the head kind's name (yolo3.heads.registry)
    darknet_layer: ClassVar[bool] = True  # Darknet's [yolo] layer: a cfg can hold it
    anchor_free: ClassVar[bool] = False

    def __post_init__(self):
        anchors = np.asarray(self.anchors, dtype=np.float32).reshape(-1, 2)
        masks = validate_masks(self.masks, len(anchors))
        if len(masks) > len(ANCHOR_HEAD_STRIDES):
            raise ValueError(f"an anchor head has 1 to {len(ANCHOR_HEAD_STRIDES)} outputs, the "
                             f"masks {masks} describe {len(masks)}")
        object.__setattr__(self, "anchors", tuple((float(w), float(h)) for w, h in anchors))
        object.__setattr__(self, "masks", tuple(tuple(m) for m in masks))

    @classmethod
    def of(cls, anchors, masks: Optional[Sequence[Sequence[int]]] = None) -> "AnchorHead":
        """The head of ``anchors`` ``(N, 2)`` and ``masks`` (None: the default split,
        :func:`yolo3.config.masks.default_masks`)."""
        anchors = np.asarray(anchors, dtype=np.float32).reshape(-1, 2)
        return cls(anchors, default_masks(len(anchors)) if masks is None else masks)

    @property
    def strides(self) -> Tuple[int, ...]:
        return ANCHOR_HEAD_STRIDES[:len(self.masks)]

    @property
    def num_scales(self) -> int:
        return len(self.masks)

    def anchor_array(self) -> np.ndarray:
        """The anchors, ``(N, 2)`` float32 ``(w, h)`` pixels (a fresh copy)."""
        return np.asarray(self.anchors, dtype=np.float32).reshape(-1, 2)

    def mask_lists(self) -> List[List[int]]:
        return [list(m) for m in self.masks]

    @property
    def anchors_per_scale(self) -> int:
        return len(self.masks[0])

    def channels(self, num_classes: int, anchors_per_scale: Optional[int] = None) -> int:
        """Channels of each output for ``num_classes`` classes: ``A x (5 + C)`` (a body's outputs
        have as many anchors each; ``anchors_per_scale`` overrides this head's ``A``)."""
        per = self.anchors_per_scale if anchors_per_scale is None else int(anchors_per_scale)
        return per * (5 + int(num_classes))

    def masks_for(self, num_anchors: Optional[int] = None) -> List[List[int]]:
        """The default masks of ``num_anchors`` anchors (default: this head's count) over this
        head's outputs (:func:`yolo3.config.masks.default_masks`)."""
        return default_masks(len(self.anchors) if num_anchors is None else int(num_anchors),
                             self.num_scales)

    def output_channels(self, num_classes: int) -> List[int]:
        """The channels of each output for ``num_classes`` classes: ``len(mask) x (5 + C)``
        (a converted cfg's masks may differ in length)."""
        return [len(m) * (5 + int(num_classes)) for m in self.masks]

    def with_found_anchors(self, find: Callable[[], Tuple[Any, Any]]) -> "AnchorHead":
        """This kind with the anchors and masks a model file or its user gives: ``find()``
        returns ``(anchors (N, 2), masks)`` (its errors pass through). A kind without anchors
        returns itself and never calls ``find``."""
        anchors, masks = find()
        return type(self).of(anchors, masks)

    def num_classes(self, channels: int) -> int:
        """The class count of outputs with ``channels`` channels (the first output's anchors;
        ValueError when none fits)."""
        per = self.anchors_per_scale
        if channels % per or channels // per < 6:
            raise ValueError(f"{channels} output channels are not {per} anchors x (5 + classes)")
        return channels // per - 5

    def bias_priors(self, num_classes: int, cells: int, objects_per_image: float
                    ) -> Tuple[np.ndarray]:
        """The initial bias of the convolution that ends one output of ``cells`` cells:
        ``(output bias,)`` (:func:`output_bias_priors`)."""
        return (output_bias_priors(self.anchors_per_scale, num_classes, cells, self.num_scales,
                                   objects_per_image),)

    def record(self) -> Optional[Dict[str, Any]]:
        """What a model file records of the head: nothing (the anchors and masks are fields of
        their own, as every yolo3 model file has them)."""
        return None

    @classmethod
    def from_record(cls, record: Dict[str, Any]) -> "AnchorHead":
        """The head of a record holding its ``anchors`` and ``masks`` (ValueError without)."""
        try:
            return cls.of(record["anchors"], record.get("masks"))
        except (KeyError, TypeError) as e:
            raise ValueError(f"an anchor head's record without {e}") from None


def output_bias_priors(num_anchors: int, num_classes: int, cells: int, num_scales: int,
                       objects_per_image: float) -> np.ndarray:
    """The initial bias of one output convolution, ``(num_anchors * (5 + num_classes),)``, laid
    out per anchor as ``x, y, w, h, objectness, classes...``: zero for the box terms; for the
    objectness the logit of the expected share of positive anchors (``objects_per_image`` spread
    evenly over the scales and this scale's ``cells`` x ``num_anchors`` anchors), for the classes
    the logit of ``1 / num_classes``. A network that starts at these priors spends no steps
    unlearning a 0.5 objectness on every cell (the focal-loss paper's and YOLOv5's
    initialisation)."""
    positive = objects_per_image / (num_scales * cells * num_anchors)
    objectness = math.log(max(positive, 1e-6) / (1 - min(positive, 0.5)))
    p_class = min(0.99, 1.0 / max(1, num_classes))
    per_anchor = np.zeros(5 + num_classes, np.float32)
    per_anchor[4] = objectness
    per_anchor[5:] = math.log(p_class / (1 - p_class))
    return np.tile(per_anchor, num_anchors)


Head = Union[AnchorHead, AnchorFreeHead]


def head_of(anchors, masks: Optional[Sequence[Sequence[int]]], head: Optional[Any] = None
            ) -> Any:
    """The one head of a model's facts as yolo3 0.6 passes them: ``head`` when given (then
    ``anchors`` and ``masks`` are not read), else Darknet's anchor head of ``anchors`` and
    ``masks`` (None: the default split)."""
    return AnchorHead.of(anchors, masks) if head is None else head


def check_own_anchors(head: Any, anchors, masks: Optional[Sequence[Sequence[int]]]) -> None:
    """ValueError unless ``anchors`` ``(N, 2)`` and ``masks`` are empty or ``head``'s own."""
    given = np.asarray(anchors if anchors is not None else (), dtype=np.float32).reshape(-1, 2)
    if (len(given) and not np.array_equal(given, head.anchor_array())) or (
            masks and [list(m) for m in masks] != head.mask_lists()):
        raise ValueError(f"a {head.kind.replace('_', '-')} head's anchors and masks are its own: "
                         f"it takes no other ({len(given)} anchors, masks {masks!r} given)")


def resolved_head(find: Callable[[], Tuple[Any, Any]], *known: Optional[Any]) -> Any:
    """The head of a model file: the first of ``known`` that is given (the variant's facts, the
    file's own), with the anchors and masks ``find()`` gives where its kind has anchors
    (:meth:`AnchorHead.with_found_anchors`); none given: Darknet's anchor head of ``find()``'s
    anchors and masks (every model file before yolo3 0.2 holds one)."""
    for head in known:
        if head is not None:
            return head.with_found_anchors(find)
    return AnchorHead.of(*find())
