"""Head kinds by name: the one table from a kind's name (what a model file records) to its class.

The built-in kinds start as their facts (:class:`yolo3.config.heads.AnchorHead`,
:class:`yolo3.config.anchor_free_head.AnchorFreeHead`), so a model file's head is read without
Keras; :mod:`yolo3.heads` puts each kind's behaviour class (a subclass of its facts) in their
place when it is imported (:func:`yolo3.heads.registry.register`), and a new kind is one module
and one such call. No TensorFlow or Keras here.
"""
from __future__ import annotations

from typing import Any, Dict, Optional, Sequence

from yolo3.config.anchor_free_head import AnchorFreeHead
from yolo3.config.heads import AnchorHead

__all__ = ["HeadKinds", "head_of_record"]


class HeadKinds:
    """Name -> head class. :data:`KINDS` is the one table the library reads."""

    def __init__(self, *built_in: type):
        self._built_in = {cls.kind: cls for cls in built_in}
        self._kinds: Dict[str, type] = dict(self._built_in)

    def register(self, head_type: type) -> type:
        """Add ``head_type`` under its ``kind`` (a class attribute). A built-in kind's facts are
        replaced by a subclass of them (its behaviour) once; any other class under a taken name
        is a ValueError naming the one registered."""
        kind = head_type.kind
        current = self._kinds.get(kind)
        facts_only = current is not None and current is self._built_in.get(kind)
        if current not in (None, head_type) and not (facts_only and issubclass(head_type,
                                                                                current)):
            raise ValueError(f"a head kind named {kind!r} is registered already "
                             f"({current.__qualname__})")
        self._kinds[kind] = head_type
        return head_type

    def unregister(self, kind: str) -> None:
        """Remove ``kind`` (a test's own kind, once it is done); a built-in kind goes back to
        its facts."""
        self._kinds.pop(kind, None)
        if kind in self._built_in:
            self._kinds[kind] = self._built_in[kind]

    def get(self, kind: Optional[str]) -> type:
        """The class of ``kind`` (ValueError naming the known kinds when none is registered)."""
        if kind not in self._kinds:
            raise ValueError(f"no head kind {kind!r} is registered (known: "
                             f"{', '.join(sorted(self._kinds))})")
        return self._kinds[kind]

    def as_dict(self) -> Dict[str, type]:
        """The registered kinds, name -> class (a copy)."""
        return dict(self._kinds)


KINDS = HeadKinds(AnchorHead, AnchorFreeHead)


def head_of_record(record: Optional[Dict[str, Any]], anchors: Any = (),
                   masks: Optional[Sequence[Sequence[int]]] = None) -> Any:
    """The head a model file records: ``record`` is what the head's ``record()`` wrote (a dict
    naming its ``kind``; ValueError for an unknown kind or bad facts), or None for Darknet's
    anchor head, whose ``anchors`` ``(N, 2)`` and ``masks`` are fields of their own."""
    if record is None:
        return AnchorHead.of(anchors, masks)
    if not isinstance(record, dict):
        raise ValueError(f"a head's record is a mapping, not {record!r}")
    return KINDS.get(record.get("kind")).from_record(record)
