"""The loss's options as one frozen object: what both heads' losses take besides the head.

The anchor head reads them all; the anchor-free head reads ``box_gain``, ``class_gain``,
``class_weights`` and ``focal_gamma`` (the settings check refuses the anchor head's own settings
for it: :data:`yolo3.config.train_config.ANCHOR_HEAD_SETTINGS`). Every value is checked here by
the one rule of its setting (:func:`yolo3.config.train_config.check_value`). No TensorFlow here.
"""
from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any, Dict, Mapping, Optional, Sequence, Tuple

import numpy as np

from yolo3.config.train_config import check_value

__all__ = ["LEGACY_NAMES", "LossOptions", "check_gains"]

# the names a loss layer's config had before the options travelled whole (0.x model files), and
# keras-yolo3's: each maps to its option's one name
LEGACY_NAMES = {"ignore_thresh": "ignore_iou"}


@dataclass(frozen=True)
class LossOptions:
    """``ignore_iou``: a prediction that is not a positive but overlaps a true box by more is left
    out of the confidence loss; ``box_loss``: mse, giou, diou or ciou; ``label_smoothing``;
    ``objectness``: a positive's confidence target, one or its box's IoU; ``box_gain`` and
    ``class_gain``: the box and class terms' weights against the confidence term;
    ``class_weights``: ``(C,)`` each positive weighted by its class (None: all 1);
    ``focal_gamma``: the class term's focal exponent (0: plain cross-entropy). The defaults are
    keras-yolo3's loss."""

    ignore_iou: float = 0.5
    box_loss: str = "mse"
    label_smoothing: float = 0.0
    objectness: str = "one"
    box_gain: float = 1.0
    class_gain: float = 1.0
    class_weights: Optional[Tuple[float, ...]] = None
    focal_gamma: float = 0.0

    def __post_init__(self):
        for setting in ("ignore_iou", "box_loss", "label_smoothing", "objectness", "box_gain",
                        "class_gain", "focal_gamma"):
            check_value(setting, getattr(self, setting))
        if self.class_weights is not None:
            weights = tuple(float(w) for w in np.asarray(self.class_weights).reshape(-1))
            if not weights or not all(np.isfinite(w) and w >= 0 for w in weights):
                raise ValueError(f"class weights must be non-negative numbers, got {weights}")
            object.__setattr__(self, "class_weights", weights)

    @classmethod
    def from_recipe(cls, recipe: Any, class_weights: Optional[Sequence[float]] = None
                    ) -> "LossOptions":
        """The options of a run's :class:`~yolo3.config.train_config.RecipeSettings` and the class
        weights computed from its data (None: off)."""
        return cls(ignore_iou=recipe.ignore_iou, box_loss=recipe.box_loss,
                   label_smoothing=recipe.label_smoothing, objectness=recipe.objectness,
                   box_gain=recipe.box_gain, class_gain=recipe.class_gain,
                   class_weights=class_weights, focal_gamma=recipe.focal_gamma)

    def to_config(self) -> Dict[str, Any]:
        """The options as plain values (a loss layer's config: JSON-serialisable)."""
        config = {f.name: getattr(self, f.name) for f in fields(self)}
        if self.class_weights is not None:
            config["class_weights"] = list(self.class_weights)
        return config

    @classmethod
    def from_config(cls, config: Optional[Mapping[str, Any]]) -> "LossOptions":
        """The options of :meth:`to_config`'s dict, or of the separate keywords a loss layer's
        config held in 0.x model files (``ignore_thresh`` read as ``ignore_iou``: LEGACY_NAMES);
        None gives the defaults. TypeError naming an unknown key."""
        known = {f.name for f in fields(cls)}
        values: Dict[str, Any] = {}
        for key, value in dict(config or {}).items():
            name = LEGACY_NAMES.get(key, key)
            if name not in known:
                raise TypeError(f"{key!r} is not a loss option (the options: {sorted(known)})")
            values[name] = value
        return cls(**values)

    @classmethod
    def split_keywords(cls, kwargs: Dict[str, Any]) -> Dict[str, Any]:
        """Take the loss options' keywords (their names or LEGACY_NAMES) out of ``kwargs``, which
        keeps the rest (a loss layer's base keywords), and return them."""
        names = {f.name for f in fields(cls)} | set(LEGACY_NAMES)
        return {key: kwargs.pop(key) for key in list(kwargs) if key in names}

    def for_classes(self, num_classes: int) -> "LossOptions":
        """These options, checked for ``num_classes`` classes (ValueError unless there is one
        class weight per class)."""
        if self.class_weights is not None and len(self.class_weights) != int(num_classes):
            raise ValueError(f"{len(self.class_weights)} class weights for {num_classes} classes")
        return self


def check_gains(box_gain: float, class_gain: float) -> None:
    """SettingError (a ValueError) naming the setting when a loss gain is not a positive finite
    number: :class:`LossOptions`' own check (0.2's ``yolo3.loss.check_gains``)."""
    LossOptions(box_gain=box_gain, class_gain=class_gain)
