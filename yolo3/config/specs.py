"""The model-spec registry: every fact about a model variant, in one place.

A :class:`ModelSpec` knows its architecture (:mod:`yolo3.config.architectures`, from which both the
Keras body and the Darknet cfg are derived), its default anchors and masks, its output strides, its
input-size rule and the Darknet layouts whose weights load into it. Code elsewhere asks the
registry (:func:`get_spec`, :func:`spec_names`, :func:`spec_of_layers`, :func:`strides_for`) and
never compares variant names itself; adding a variant is one entry in :data:`SPECS` plus its tests.
The registry is data: the Keras bodies are built from a spec by :mod:`yolo3.modeling.bodies`, the
cfg layouts by :mod:`yolo3.darknet.layout`. No TensorFlow here.

Variants: ``yolov3`` (Darknet-53, three scales), ``yolov3-spp`` (YOLOv3 with spatial pyramid
pooling) and ``tiny`` (tiny YOLOv3, two scales), each with Darknet's anchor head; ``tiny-af`` and
``yolov3-af``, the same networks with an anchor-free decoupled head
(:mod:`yolo3.config.anchor_free_head`: no anchors, no Darknet form; Darknet weights of their base
variant load into everything but the head). Backbone layouts (Darknet weights for the ``backbone_*``
layers only): ``darknet53``.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Collection, Dict, List, Optional, Sequence, Tuple, Union

import numpy as np

from yolo3.config import architectures
from yolo3.config.anchor_free_head import AnchorFreeHead
from yolo3.config.heads import AnchorHead, Head
from yolo3.config.masks import default_masks
from yolo3.core.errors import ArgumentError, SettingError

Size = Union[int, Sequence[int]]
Describe = Callable[..., None]

__all__ = ["ModelSpec", "SPECS", "BACKBONES", "get_spec", "spec_names", "all_specs", "anchor_specs",
           "specs_preferring", "spec_of_layers", "layout_names", "layout", "check_input_size",
           "multi_scale_sizes", "multi_scale_shapes", "UnknownModelError", "InputSizeError",
           "strides_for"]


class UnknownVariantError(ArgumentError):
    """A variant or layout name that the registry does not know."""


UnknownModelError = UnknownVariantError  # the name before 1.3


class InputSizeError(SettingError):
    """An input size that the model cannot take (the setting ``input_size``, ``--input-size`` on
    the command line, unless another is named)."""

    def __init__(self, message: str, *settings: str):
        super().__init__(message, *(settings or ("input_size",)))


def check_input_size(size: Size, multiple: int = 32) -> Tuple[int, int]:
    """``size`` (int or ``(h, w)``) as ``(h, w)``; raises :class:`InputSizeError` unless both sides
    are positive multiples of ``multiple`` (the largest output stride). The one input-size check."""
    try:
        hw = (int(size), int(size)) if np.ndim(size) == 0 else tuple(int(v) for v in size)
    except (TypeError, ValueError):
        raise InputSizeError(f"input_size {size!r} is not a number or an (h, w) pair") from None
    if len(hw) != 2:
        raise InputSizeError(f"input_size {tuple(size)} must be one side or (height, width)")
    bad = [v for v in hw if v <= 0 or v % multiple]
    if bad:
        raise InputSizeError(f"input_size {hw}: height and width must be multiples of {multiple} "
                             f"({bad[0]} is not a positive multiple of {multiple})")
    return hw  # type: ignore[return-value]


def multi_scale_sizes(smallest: int, largest: int, stride: int) -> Tuple[int, ...]:
    """The longer sides of multi-scale training: multiples of ``stride`` in ``[smallest, largest]``;
    :class:`InputSizeError` unless both ends are such multiples with ``smallest <= largest``."""
    if smallest % stride or largest % stride or not 0 < smallest <= largest:
        raise InputSizeError(f"sizes need multiples of {stride} with MIN <= MAX, got {smallest} "
                             f"and {largest}")
    return tuple(range(smallest, largest + 1, stride))


def multi_scale_shapes(smallest: int, largest: int, hw: Tuple[int, int], stride: int
                       ) -> Tuple[Tuple[int, int], ...]:
    """The input shapes ``(h, w)`` of multi-scale training for an input of ``hw``: the longer side
    takes each of :func:`multi_scale_sizes`, the shorter follows at the input's aspect (rounded to
    a multiple of ``stride``, at least ``stride``)."""
    h, w = hw
    shapes: List[Tuple[int, int]] = []
    for side in multi_scale_sizes(smallest, largest, stride):
        scale = side / max(h, w)
        shape = tuple(max(stride, int(round(v * scale / stride)) * stride) for v in (h, w))
        if shape not in shapes:
            shapes.append(shape)  # type: ignore[arg-type]
    return tuple(shapes)


class _BlockRecorder:
    """A :class:`~yolo3.config.architectures.Net` that only records the block names, in order."""

    def __init__(self):
        self.current = 0
        self.blocks: List[str] = []

    def conv(self, block, filters, size, stride=1):
        self.blocks.append(block)
        return block

    def output(self, stride, filters):
        self.blocks.append(architectures.output_name(stride))
        return self.blocks[-1]

    def predict(self, name, filters):
        self.blocks.append(name)
        return name

    def join_output(self, stride, sources):
        return architectures.output_name(stride)

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
    by area (none for an anchor-free head); ``strides`` are the output strides, largest first (the
    body's output order); ``head`` the variant's head facts (:mod:`yolo3.config.heads`: Darknet's
    anchor head of these anchors and the default masks, or an anchor-free head), which answer for
    its kind; ``base`` the anchor-head variant an anchor-free one is made from (its Darknet
    layout)."""

    name: str
    summary: str
    describe: Describe
    anchors: Tuple[Tuple[float, float], ...]
    strides: Tuple[int, ...]
    keras_name: str
    backbone: Optional[str] = None  # a backbone layout whose weights fit this body's backbone_*
    aliases: Tuple[str, ...] = field(default=())
    base: Optional[str] = None
    head: Head = field(kw_only=True)

    @property
    def anchor_free(self) -> bool:
        return self.head.anchor_free

    @property
    def num_scales(self) -> int:
        return len(self.strides)

    @property
    def max_stride(self) -> int:
        return max(self.strides)

    def default_head(self) -> Head:
        """The variant's head (:mod:`yolo3.config.heads`): its anchor-free head, or the anchor head
        of Darknet's COCO anchors and the default masks."""
        return self.head

    def default_anchors(self) -> np.ndarray:
        """Darknet's COCO anchors, ``(N, 2)`` float32 ``(w, h)`` pixels (a fresh copy)."""
        return np.asarray(self.anchors, dtype=np.float32).reshape(-1, 2)

    def default_masks(self, num_anchors: Optional[int] = None) -> List[List[int]]:
        """Anchor indices per output, largest stride first, for ``num_anchors`` anchors (default: the
        spec's): consecutive groups, the largest anchors on the largest stride. An anchor-free
        variant has none (ValueError)."""
        try:
            return self.head.masks_for(num_anchors)
        except ValueError as e:
            raise ValueError(f"variant {self.name!r}: {e}") from None

    def output_filters(self, num_classes: int, anchors_per_scale: Optional[int] = None) -> int:
        """Channels of each body output: ``anchors_per_scale * (5 + num_classes)`` (default: the
        spec's anchors per scale), or the anchor-free head's ``4 * reg_max + num_classes``."""
        return self.head.channels(num_classes, anchors_per_scale)

    def anchors_per_scale(self, num_anchors: int) -> int:
        """Anchors per output for ``num_anchors`` anchors split evenly over the scales."""
        return len(self.default_masks(num_anchors)[0])

    def check_input_size(self, size: Size) -> Tuple[int, int]:
        """``(h, w)`` for ``size``, refused unless both are multiples of the largest stride."""
        return check_input_size(size, self.max_stride)

    def multi_scale_shapes(self, smallest: int, largest: int, hw: Tuple[int, int]
                           ) -> Tuple[Tuple[int, int], ...]:
        """The input shapes of multi-scale training from ``smallest`` to ``largest`` for an input of
        ``hw``, at this variant's largest stride (:func:`multi_scale_shapes`)."""
        return multi_scale_shapes(smallest, largest, hw, self.max_stride)

    def blocks(self) -> List[str]:
        """The convolution blocks (``backbone_stem``, ..., ``output_s32``) in Darknet cfg order."""
        recorder = _BlockRecorder()
        self.describe(recorder, 0)
        return recorder.blocks

    @property
    def darknet_layout(self) -> Optional[str]:
        """The Darknet layout of this body (a cfg it converts to and from), None where Darknet
        has no layer for its head (``darknet_layer`` of the head's facts: an anchor-free one)."""
        return self.name if self.default_head().darknet_layer else None

    @property
    def darknet_sources(self) -> Tuple[str, ...]:
        """Darknet layouts whose converted weights load into this body, best first (a variant
        made from a ``base``: the base's, all but the output convolutions)."""
        first = self.base or self.name
        return (first,) + ((self.backbone,) if self.backbone else ())


def _spec(name: str, summary: str, describe: Describe, anchors: Sequence[Tuple[float, float]],
          strides: Tuple[int, ...], keras_name: str, backbone: Optional[str] = None,
          aliases: Tuple[str, ...] = ()) -> ModelSpec:
    anchors = tuple(tuple(map(float, a)) for a in anchors)
    head = AnchorHead.of(anchors, default_masks(len(anchors), len(strides)))  # Darknet's
    return ModelSpec(name, summary, describe, anchors, strides, keras_name, backbone, aliases,
                     head=head)


def _anchor_free(base: ModelSpec, name: str, summary: str, reg_max: int, class_width: int,
                 network: Optional[Describe] = None,
                 strides: Optional[Tuple[int, ...]] = None) -> ModelSpec:
    """The anchor-free variant of ``base``: ``network`` (default: the base's) with ``strides``
    (default: the base's), every output a decoupled head with ``reg_max`` distance bins per side
    and class branches ``class_width`` wide. The base's weights load into the layers it shares."""
    strides = tuple(strides or base.strides)
    describe = architectures.anchor_free(network or base.describe, reg_max,
                                         class_width=class_width)
    return ModelSpec(name, summary, describe, (), strides, f"{base.keras_name}_af",
                     base.backbone, head=AnchorFreeHead(strides, reg_max), base=base.name)


_YOLO_ANCHORS = ((10, 13), (16, 30), (33, 23), (30, 61), (62, 45), (59, 119), (116, 90), (156, 198),
                 (373, 326))
_TINY_ANCHORS = ((10, 14), (23, 27), (37, 58), (81, 82), (135, 169), (344, 319))

_YOLOV3 = _spec("yolov3", "YOLOv3: Darknet-53 backbone, three scales (yolov3.cfg)",
                architectures.yolov3, _YOLO_ANCHORS, (32, 16, 8), "yolov3_body",
                backbone="darknet53")
_TINY = _spec("tiny", "Tiny YOLOv3: 7 convolutions with max pooling, two scales (yolov3-tiny.cfg)",
              architectures.tiny_yolov3, _TINY_ANCHORS, (32, 16), "tiny_yolov3_body",
              aliases=("yolov3-tiny", "tiny-yolov3"))

SPECS: Dict[str, ModelSpec] = {s.name: s for s in (
    _YOLOV3,
    _spec("yolov3-spp", "YOLOv3 with spatial pyramid pooling in the stride-32 head (yolov3-spp.cfg)",
          architectures.yolov3_spp, _YOLO_ANCHORS, (32, 16, 8), "yolov3_spp_body",
          backbone="darknet53"),
    _TINY,
    # distance bins: a side reaches reg_max - 1 strides from its cell; tiny-af's 8 bins and class
    # branch of 128 suit tiny's small inputs, yolov3-af keeps YOLOv8's 16 and widths (not
    # measured); tiny-af's stride-8 output gives the boxes that hold no coarser cell centre one
    # (both: docs/benchmarks.md, "Anchor-free variants")
    _anchor_free(_TINY, "tiny-af", "Tiny YOLOv3 with a stride-8 output and an anchor-free "
                 "decoupled head (YOLOv8's): no anchors; tiny's Darknet weights load into all but "
                 "the head and the stride-8 branch", 8, 128, architectures.tiny_yolov3_stride8,
                 (32, 16, 8)),
    _anchor_free(_YOLOV3, "yolov3-af", "YOLOv3 with an anchor-free decoupled head (YOLOv8's): no "
                 "anchors; Darknet-53 and yolov3 weights load into all but the head", 16, 256),
)}

# Darknet layouts that are not trainable variants: weights for the backbone_* layers only.
BACKBONES: Dict[str, Describe] = {"darknet53": architectures.darknet53_backbone}


def spec_names() -> List[str]:
    """Registered variant names (for command-line choices)."""
    return list(SPECS)


def all_specs() -> List[ModelSpec]:
    return list(SPECS.values())


def anchor_specs() -> List[ModelSpec]:
    """The variants with Darknet's anchor head: those with a Darknet layout, which Darknet and
    keras-yolo3 files can be."""
    return [s for s in SPECS.values() if s.darknet_layout]


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
    """Darknet layouts known to the registry: every variant with a Darknet form (the anchor
    heads) and every backbone."""
    return [s.name for s in SPECS.values() if s.darknet_layout] + list(BACKBONES)


def layout(name: str) -> Describe:
    """The architecture function of a variant or backbone layout ``name`` (an anchor-free
    variant has none: UnknownVariantError saying so)."""
    if name in BACKBONES:
        return BACKBONES[name]
    try:
        spec = get_spec(name)
    except UnknownVariantError:
        raise UnknownVariantError(f"unknown layout {name!r}: choose from "
                                f"{tuple(layout_names())}") from None
    if spec.darknet_layout is None:
        raise UnknownVariantError(f"variant {spec.name!r} has an anchor-free head, which Darknet "
                                  f"has no layer for: no Darknet layout (its base "
                                  f"{spec.base!r} has one)")
    return spec.describe


def spec_of_layers(layer_names: Collection[str]) -> Optional[ModelSpec]:
    """The variant whose body has exactly these convolution blocks (a model's layer names), else
    None: how an unlabelled yolo3 body (built in memory, or saved before models carried their
    metadata) is recognised."""
    output, pred = architectures.OUTPUT_PREFIX, architectures.PREDICTION_SUFFIX
    convs = {n for n in set(layer_names)
             if n.endswith("_conv") or n.endswith(pred) or n.startswith(output)}
    for spec in SPECS.values():
        wanted = {b if b.startswith(output) or b.endswith(pred) else f"{b}_conv"
                  for b in spec.blocks()}
        # one output layer per stride: the anchor head's convolution (a block already), or the
        # join of an anchor-free head's predictions (no weights, no block of its own)
        wanted |= {architectures.output_name(s) for s in spec.strides}
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
