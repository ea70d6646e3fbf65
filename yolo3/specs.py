"""The model-spec registry: every fact about a model variant, in one place.

A :class:`ModelSpec` knows its architecture (:mod:`yolo3.architectures`, from which both the Keras
body and the Darknet cfg are derived), its default anchors and masks, its output strides, its
input-size rule and the Darknet layouts whose weights load into it. Code elsewhere asks the
registry (:func:`get_spec`, :func:`spec_names`, :func:`spec_of_layers`, :func:`strides_for`) and
never compares variant names itself; adding a variant is one entry in :data:`SPECS` plus its tests.
The registry is data: the Keras bodies are built from a spec by :mod:`yolo3.bodies`, the cfg
layouts by :mod:`yolo3.darknet.layout`. No TensorFlow here.

Variants: ``yolov3`` (Darknet-53, three scales), ``yolov3-spp`` (YOLOv3 with spatial pyramid
pooling) and ``tiny`` (tiny YOLOv3, two scales). Backbone layouts (Darknet weights for the
``backbone_*`` layers only): ``darknet53``.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Collection, Dict, List, Optional, Sequence, Tuple, Union

import numpy as np

from yolo3 import architectures
from yolo3.errors import ArgumentError
from yolo3.masks import default_masks

Size = Union[int, Sequence[int]]
Describe = Callable[..., None]

__all__ = ["ModelSpec", "SPECS", "BACKBONES", "get_spec", "spec_names", "all_specs",
           "specs_preferring", "spec_of_layers", "layout_names", "layout", "check_input_size", "UnknownModelError",
           "InputSizeError", "strides_for"]


class UnknownVariantError(ArgumentError):
    """A variant or layout name that the registry does not know."""


UnknownModelError = UnknownVariantError  # the name before 1.3


class InputSizeError(ArgumentError):
    """An input size that the model cannot take."""


def check_input_size(size: Size, multiple: int = 32) -> Tuple[int, int]:
    """``size`` (int or ``(h, w)``) as ``(h, w)``; raises :class:`InputSizeError` unless both sides
    are positive multiples of ``multiple`` (the largest output stride). The one input-size check."""
    try:
        hw = (int(size), int(size)) if np.ndim(size) == 0 else tuple(int(v) for v in size)
    except (TypeError, ValueError):
        raise InputSizeError(f"input size {size!r} is not a number or an (h, w) pair") from None
    if len(hw) != 2:
        raise InputSizeError(f"input size {tuple(size)} must be one side or (height, width)")
    bad = [v for v in hw if v <= 0 or v % multiple]
    if bad:
        raise InputSizeError(f"input size {hw}: height and width must be multiples of {multiple} "
                             f"({bad[0]} is not a positive multiple of {multiple})")
    return hw  # type: ignore[return-value]


class _BlockRecorder:
    """A :class:`~yolo3.architectures.Net` that only records the block names, in order."""

    def __init__(self):
        self.current = 0
        self.blocks: List[str] = []

    def conv(self, block, filters, size, stride=1):
        self.blocks.append(block)
        return block

    def output(self, stride, filters):
        self.blocks.append(architectures.output_name(stride))
        return self.blocks[-1]

    def shortcut(self, name, source):
        return name

    def tap(self, name):
        return name

    def route(self, source):
        return source

    def concat(self, name, sources):
        return name

    def upsample(self, name):
        return name

    def maxpool(self, name, size, stride):
        return name


@dataclass(frozen=True)
class ModelSpec:
    """One model variant. ``anchors`` are Darknet's COCO anchors ``(w, h)`` in input pixels, sorted
    by area; ``strides`` are the output strides, largest first (the body's output order)."""

    name: str
    summary: str
    describe: Describe
    anchors: Tuple[Tuple[float, float], ...]
    strides: Tuple[int, ...]
    keras_name: str
    backbone: Optional[str] = None  # a backbone layout whose weights fit this body's backbone_*
    aliases: Tuple[str, ...] = field(default=())

    @property
    def num_scales(self) -> int:
        return len(self.strides)

    @property
    def max_stride(self) -> int:
        return max(self.strides)

    def default_anchors(self) -> np.ndarray:
        """Darknet's COCO anchors, ``(N, 2)`` float32 ``(w, h)`` pixels (a fresh copy)."""
        return np.asarray(self.anchors, dtype=np.float32).reshape(-1, 2)

    def default_masks(self, num_anchors: Optional[int] = None) -> List[List[int]]:
        """Anchor indices per output, largest stride first, for ``num_anchors`` anchors (default: the
        spec's): consecutive groups, the largest anchors on the largest stride."""
        return default_masks(len(self.anchors) if num_anchors is None else num_anchors,
                             self.num_scales)

    def anchors_per_scale(self, num_anchors: int) -> int:
        """Anchors per output for ``num_anchors`` anchors split evenly over the scales."""
        return len(self.default_masks(num_anchors)[0])

    def check_input_size(self, size: Size) -> Tuple[int, int]:
        """``(h, w)`` for ``size``, refused unless both are multiples of the largest stride."""
        return check_input_size(size, self.max_stride)

    def blocks(self) -> List[str]:
        """The convolution blocks (``backbone_stem``, ..., ``output_s32``) in Darknet cfg order."""
        recorder = _BlockRecorder()
        self.describe(recorder, 0)
        return recorder.blocks

    @property
    def darknet_sources(self) -> Tuple[str, ...]:
        """Darknet layouts whose converted weights load into this body, best first."""
        return (self.name,) + ((self.backbone,) if self.backbone else ())


def _spec(name: str, summary: str, describe: Describe, anchors: Sequence[Tuple[float, float]],
          strides: Tuple[int, ...], keras_name: str, backbone: Optional[str] = None,
          aliases: Tuple[str, ...] = ()) -> ModelSpec:
    return ModelSpec(name, summary, describe, tuple(tuple(map(float, a)) for a in anchors), strides,
                     keras_name, backbone, aliases)


_YOLO_ANCHORS = ((10, 13), (16, 30), (33, 23), (30, 61), (62, 45), (59, 119), (116, 90), (156, 198),
                 (373, 326))
_TINY_ANCHORS = ((10, 14), (23, 27), (37, 58), (81, 82), (135, 169), (344, 319))

SPECS: Dict[str, ModelSpec] = {s.name: s for s in (
    _spec("yolov3", "YOLOv3: Darknet-53 backbone, three scales (yolov3.cfg)", architectures.yolov3,
          _YOLO_ANCHORS, (32, 16, 8), "yolov3_body", backbone="darknet53"),
    _spec("yolov3-spp", "YOLOv3 with spatial pyramid pooling in the stride-32 head (yolov3-spp.cfg)",
          architectures.yolov3_spp, _YOLO_ANCHORS, (32, 16, 8), "yolov3_spp_body",
          backbone="darknet53"),
    _spec("tiny", "Tiny YOLOv3: 7 convolutions with max pooling, two scales (yolov3-tiny.cfg)",
          architectures.tiny_yolov3, _TINY_ANCHORS, (32, 16), "tiny_yolov3_body",
          aliases=("yolov3-tiny", "tiny-yolov3")),
)}

# Darknet layouts that are not trainable variants: weights for the backbone_* layers only.
BACKBONES: Dict[str, Describe] = {"darknet53": architectures.darknet53_backbone}


def spec_names() -> List[str]:
    """Registered variant names (for command-line choices)."""
    return list(SPECS)


def all_specs() -> List[ModelSpec]:
    return list(SPECS.values())


def specs_preferring(variant: Optional[str] = None) -> List[ModelSpec]:
    """Every spec, ``variant``'s first (UnknownVariantError when it names none)."""
    if not variant:
        return all_specs()
    first = get_spec(variant)
    return [first] + [s for s in SPECS.values() if s is not first]


def get_spec(name: Union[str, ModelSpec]) -> ModelSpec:
    """The spec of variant ``name`` (or an alias such as ``yolov3-tiny``); a spec passes through."""
    if isinstance(name, ModelSpec):
        return name
    for spec in SPECS.values():
        if name == spec.name or name in spec.aliases:
            return spec
    raise UnknownVariantError(f"unknown variant {name!r}: expected one of {', '.join(SPECS)}")


def layout_names() -> List[str]:
    """Darknet layouts known to the registry: every variant and every backbone."""
    return list(SPECS) + list(BACKBONES)


def layout(name: str) -> Describe:
    """The architecture function of a variant or backbone layout ``name``."""
    if name in BACKBONES:
        return BACKBONES[name]
    try:
        return get_spec(name).describe
    except UnknownVariantError:
        raise UnknownVariantError(f"unknown layout {name!r}: choose from "
                                f"{tuple(layout_names())}") from None


def spec_of_layers(layer_names: Collection[str]) -> Optional[ModelSpec]:
    """The variant whose body has exactly these convolution blocks (a model's layer names), else
    None: how an unlabelled yolo3 body (built in memory, or saved before models carried their
    metadata) is recognised."""
    output = architectures.OUTPUT_PREFIX
    convs = {n for n in set(layer_names) if n.endswith("_conv") or n.startswith(output)}
    for spec in SPECS.values():
        wanted = {b if b.startswith(output) else f"{b}_conv" for b in spec.blocks()}
        if wanted == convs:
            return spec
    return None


def strides_for(num_scales: int) -> List[int]:
    """Output strides of a body with ``num_scales`` outputs, largest first, as the registered
    variants have them (every variant's strides start the longest list: ``[32, 16, 8]``)."""
    longest = max((spec.strides for spec in SPECS.values()), key=len)
    if not 1 <= num_scales <= len(longest):
        raise ValueError(f"a YOLOv3 body has 1 to {len(longest)} output scales, got {num_scales}")
    return list(longest[:num_scales])
