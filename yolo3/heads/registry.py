"""Head kinds by name: each kind's behaviour class in the one table of kinds
(:mod:`yolo3.config.head_kinds`), and the head that answers for a head's facts (a variant's, a
model file's). Adding a kind is one module (its facts dataclass and its
:class:`~yolo3.heads.base.Head` class) and one :func:`register` call."""
from __future__ import annotations

import dataclasses
from typing import Dict, Type

import keras

from yolo3.config.head_kinds import KINDS
from yolo3.config.loss_options import LossOptions
from yolo3.heads.anchor import AnchorHead
from yolo3.heads.anchor_free import AnchorFreeHead
from yolo3.heads.base import Head

__all__ = ["as_head", "head_kinds", "register", "training_model", "unregister"]



def register(head_type: Type[Head]) -> Type[Head]:
    """Add the head kind ``head_type`` (its ``kind`` names it) to the one table of kinds
    (:data:`yolo3.config.head_kinds.KINDS`): a :class:`~yolo3.heads.base.Head` (TypeError
    otherwise); another class under a kind's name already taken is a ValueError (its facts may be
    replaced by it). Returns ``head_type`` (usable as a class decorator)."""
    if not (isinstance(head_type, type) and issubclass(head_type, Head)):
        raise TypeError(f"{head_type!r} is not a yolo3.heads.Head: a kind owns its behaviour")
    return KINDS.register(head_type)


def unregister(kind: str) -> None:
    """Remove the head kind ``kind`` (a test's own kind, once it is done)."""
    KINDS.unregister(kind)


def head_kinds() -> Dict[str, Type[Head]]:
    """The registered kinds, name -> class (a copy)."""
    return {kind: cls for kind, cls in KINDS.as_dict().items() if issubclass(cls, Head)}


def as_head(facts: object) -> Head:
    """The head of ``facts``: itself when it is a :class:`~yolo3.heads.base.Head`, else the
    registered kind of its ``kind`` made of its fields (a variant's or a model file's facts).
    A kind nobody registered is a ValueError naming it."""
    if isinstance(facts, Head):
        return facts
    head_type = KINDS.get(getattr(facts, "kind", None))
    fields = {f.name: getattr(facts, f.name) for f in dataclasses.fields(facts)}
    return head_type(**fields)


def training_model(body: keras.Model, head: object, num_classes: int, max_boxes: int,
                   options: LossOptions = LossOptions()) -> keras.Model:
    """yolo3 0.6's ``yolo3.modeling.heads.training_model``: ``as_head(head).training_model(body,
    num_classes, max_boxes, options)``."""
    return as_head(head).training_model(body, num_classes, max_boxes, options)


register(AnchorHead)
register(AnchorFreeHead)
