"""What every detection head kind answers: the facts of its outputs and the behaviour that
differs between kinds (issue 69: the head as a strategy).

A head kind is one class deriving from its facts (a frozen dataclass in :mod:`yolo3.config`:
strides, channels, anchors ..., what a model file records) and from :class:`Head`, which names the
behaviour every kind owns:

- ``training_model(body, num_classes, max_boxes, options)``: ``[image, *targets] -> loss (1,)``;
- ``target_encoding(num_classes, assign_iou, true_boxes)``: the targets both input pipelines
  encode for that training model (:class:`yolo3.data.dataset_config.TargetEncoding`);
- ``raw_boxes_and_scores(outputs, num_classes, image_hw, input_hw)``: every candidate's box
  ``(batch, N, 4)`` ``x1, y1, x2, y2`` original-image pixels and scores ``(batch, N, C)``;
  :meth:`Head.decode` adds the threshold and per-class NMS;
- ``output_layer_groups(body)``: the convolutions that end each output, largest stride first
  (where the bias priors, ``bias_priors``, go).

And, with defaults for a kind that has no anchors: ``refit_anchors(choose)`` (the head with the
anchors a run chooses: a file, k-means), ``anchor_sizes()`` (the anchors a plot draws beside the
boxes), ``run_files()`` (what a run folder holds of the head beside the model files) and
``describe()`` (a few words for a report).

Sizes are ``(h, w)``. Callers hold a head (:func:`yolo3.heads.registry.as_head`) and ask it; they
never test its kind. Keras is imported here (the training model); ``yolo3.config``'s facts stay
free of it.
"""
from __future__ import annotations

import abc
import dataclasses
from typing import Callable, ClassVar, Dict, List, Optional, Sequence, Tuple

import keras
import numpy as np

from yolo3.config.loss_options import LossOptions
from yolo3.data.dataset_config import TargetEncoding
from yolo3.ops.decode import network_input_hw, select_detections

__all__ = ["Head"]


class Head(abc.ABC):
    """A detection head kind's behaviour (see the module docstring); its facts come from the
    config dataclass it also derives from."""

    kind: ClassVar[str]  # the kind's name (the registry's key)

    @abc.abstractmethod
    def training_model(self, body: keras.Model, num_classes: int, max_boxes: int,
                       options: LossOptions = LossOptions()) -> keras.Model:
        """``body``'s training model: its output is the loss ``(1,)`` (compile with
        ``identity_loss``), the ground truth padded to ``max_boxes`` boxes; ``options`` are
        checked against ``num_classes`` by the loss layer (``LossOptions.for_classes``)."""

    @abc.abstractmethod
    def target_encoding(self, num_classes: int, assign_iou: float = 1.0,
                        true_boxes: bool = True) -> TargetEncoding:
        """The targets the training model takes, as both input pipelines encode them."""

    @abc.abstractmethod
    def raw_boxes_and_scores(self, outputs: Sequence, num_classes: int, image_hw,
                             input_hw) -> Tuple:
        """Every candidate before any threshold: boxes ``(batch, N, 4)`` ``x1, y1, x2, y2``
        pixels of the original images (``image_hw`` ``(h, w)`` shared or ``(batch, 2)``;
        unclipped) and scores ``(batch, N, C)``; ``input_hw`` the network input ``(h, w)``."""

    @abc.abstractmethod
    def output_layer_groups(self, body: keras.Model) -> List[Tuple[str, ...]]:
        """The names of the convolutions that end each output of ``body``, largest stride
        first, in the order of ``bias_priors``' arrays."""

    def refit_anchors(self, choose: Callable[[np.ndarray], np.ndarray]) -> "Head":
        """This head with the anchors ``choose(its anchors (N, 2))`` returns, the outputs as
        many; a kind without anchors returns itself and never calls ``choose``. ValueError when
        the new anchors cannot be split over the outputs."""
        return self

    def anchor_sizes(self) -> Optional[np.ndarray]:
        """The anchors ``(N, 2)`` ``(w, h)`` input pixels a plot of the boxes' sizes shows, None
        for a kind without anchors."""
        return None

    def run_files(self) -> Dict[str, str]:
        """The text files a run folder holds of this head (name -> text) beside the model
        files, which carry every fact themselves."""
        return {}

    # -- the facts a kind without anchors need not write (its config dataclass may) ----------

    @property
    def num_scales(self) -> int:
        return len(self.strides)

    def num_classes(self, channels: int) -> int:
        """The class count whose ``channels(num_classes)`` is ``channels`` (ValueError when
        none is)."""
        for count in range(1, int(channels) + 1):
            if self.channels(count) == int(channels):
                return count
        raise ValueError(f"{channels} output channels fit no class count of a "
                         f"{self.kind.replace('_', '-')} head")

    def output_channels(self, num_classes: int) -> List[int]:
        """The channels of each output for ``num_classes`` classes."""
        return [self.channels(num_classes)] * self.num_scales

    def anchor_array(self) -> np.ndarray:
        """No anchors: ``(0, 2)``."""
        return np.zeros((0, 2), np.float32)

    def mask_lists(self) -> List[List[int]]:
        return []

    def with_found_anchors(self, find: Callable[[], Tuple]) -> "Head":
        """No anchors: this head, ``find`` never called."""
        return self

    def record(self) -> Dict[str, object]:
        """What a model file records of the head: its ``kind`` and its facts' fields (tuples as
        lists), which :meth:`from_record` reads back."""
        return {"kind": self.kind, **{f.name: _plain(getattr(self, f.name))
                                      for f in dataclasses.fields(self)}}

    @classmethod
    def from_record(cls, record: Dict[str, object]) -> "Head":
        """The head :meth:`record` wrote (ValueError naming a missing or unknown field)."""
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = set(record) - names - {"kind"}
        if unknown or not names <= set(record):
            raise ValueError(f"a {cls.kind!r} head's record has the fields {sorted(names)}, not "
                             f"{sorted(set(record) - {'kind'})}")
        return cls(**{name: _frozen(record[name]) for name in names})

    def describe(self) -> str:
        """The head in a few words, for a report line: its kind's name, with a hyphen."""
        return f"{self.kind.replace('_', '-')} head"

    def decode(self, outputs: Sequence, num_classes: int, image_hw, input_hw=None,
               max_boxes: int = 20, score_threshold: float = .6,
               iou_threshold: float = .5) -> Tuple:
        """Raw outputs of a batch -> ``boxes`` ``(batch, max_boxes, 4)`` ``x1, y1, x2, y2``
        original-image pixels clipped to the image, ``scores``, ``classes`` int32 and
        ``num_valid`` ``(batch,)`` (:func:`yolo3.ops.decode.select_detections`). ``input_hw``
        None: the first (stride-32) output's grid x 32."""
        input_hw = network_input_hw(outputs, input_hw)
        boxes, scores = self.raw_boxes_and_scores(outputs, num_classes, image_hw, input_hw)
        return select_detections(boxes, scores, image_hw, max_boxes, score_threshold,
                                 iou_threshold)


def _plain(value: object) -> object:
    """A fact as JSON keeps it: tuples as lists."""
    return [_plain(v) for v in value] if isinstance(value, tuple) else value


def _frozen(value: object) -> object:
    """A fact as a frozen dataclass keeps it: lists as tuples."""
    return tuple(_frozen(v) for v in value) if isinstance(value, list) else value


def same_facts(head: object, other: object, facts: type):
    """``head == other`` for a kind's head: True when ``other`` holds the same facts (the kind's
    head or its config dataclass ``facts``: a spec's head equals the head made of it),
    NotImplemented when ``other`` is no head of that kind."""
    if not isinstance(other, facts):
        return NotImplemented
    return all(getattr(head, f.name) == getattr(other, f.name) for f in dataclasses.fields(facts))
