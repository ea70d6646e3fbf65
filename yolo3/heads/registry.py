"""Head kinds by name: the one table that turns a head's facts (a variant's, a model file's)
into the head that answers for them. Adding a kind is one module (its facts dataclass and its
:class:`~yolo3.heads.base.Head` class) and one :func:`register` call."""
from __future__ import annotations

import dataclasses
from typing import Dict, Type

import keras

from yolo3.config.loss_options import LossOptions
from yolo3.heads.anchor import AnchorHead
from yolo3.heads.anchor_free import AnchorFreeHead
from yolo3.heads.base import Head

__all__ = ["as_head", "head_kinds", "register", "training_model", "unregister"]

_KINDS: Dict[str, Type[Head]] = {}


def register(head_type: Type[Head]) -> Type[Head]:
    """Add the head kind ``head_type`` (its ``kind`` names it; a kind of that name already
    registered is a ValueError). Returns ``head_type`` (usable as a class decorator)."""
    kind = head_type.kind
    if kind in _KINDS and _KINDS[kind] is not head_type:
        raise ValueError(f"a head kind named {kind!r} is registered already "
                         f"({_KINDS[kind].__qualname__})")
    _KINDS[kind] = head_type
    return head_type


def unregister(kind: str) -> None:
    """Remove the head kind ``kind`` (a test's own kind, once it is done)."""
    _KINDS.pop(kind, None)


def head_kinds() -> Dict[str, Type[Head]]:
    """The registered kinds, name -> class (a copy)."""
    return dict(_KINDS)


def as_head(facts: object) -> Head:
    """The head of ``facts``: itself when it is a :class:`~yolo3.heads.base.Head`, else the
    registered kind of its ``kind`` made of its fields (a variant's or a model file's facts).
    A kind nobody registered is a ValueError naming it."""
    if isinstance(facts, Head):
        return facts
    kind = getattr(facts, "kind", None)
    if kind not in _KINDS:
        raise ValueError(f"no head kind {kind!r} is registered (known: {', '.join(_KINDS)})")
    fields = {f.name: getattr(facts, f.name) for f in dataclasses.fields(facts)}
    return _KINDS[kind](**fields)


def training_model(body: keras.Model, head: object, num_classes: int, max_boxes: int,
                   options: LossOptions = LossOptions()) -> keras.Model:
    """yolo3 0.6's ``yolo3.modeling.heads.training_model``: ``as_head(head).training_model(body,
    num_classes, max_boxes, options)``."""
    return as_head(head).training_model(body, num_classes, max_boxes, options)


register(AnchorHead)
register(AnchorFreeHead)
