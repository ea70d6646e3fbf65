"""The detection heads: each kind one class that owns its behaviour (the training model and its
loss, the targets, decoding, its output convolutions) beside its facts, and the registry of kinds
(:mod:`yolo3.heads.registry`). The floor above :mod:`yolo3.modeling`, :mod:`yolo3.data` and
:mod:`yolo3.ops`, whose functions the heads call. yolo3 0.2's ``yolo3.heads`` names
(``AnchorFreeHead``, ``ANCHOR_FREE``) are here again."""
from yolo3.config.anchor_free_head import ANCHOR_FREE
from yolo3.heads.anchor import AnchorHead
from yolo3.heads.anchor_free import AnchorFreeHead
from yolo3.heads.base import Head
from yolo3.heads.registry import as_head, head_kinds, register, unregister

__all__ = ["ANCHOR_FREE", "AnchorFreeHead", "AnchorHead", "Head", "as_head", "head_kinds",
           "register", "unregister"]
