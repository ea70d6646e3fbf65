"""The Darknet side of :mod:`yolo3.config.architectures`: cfg layers of a registered layout, and the
map between yolo3 block names and cfg indices.

:class:`DarknetNet` runs a variant's architecture function and writes cfg layers instead of Keras
layers, recording the cfg index of every yolo3 convolution block. From it come

- :func:`body_to_cfg_index`: ``{yolo3 block: cfg index}``, how converted Darknet weights
  (``conv_<i>`` / ``bn_<i>``) load into yolo3 bodies (:mod:`yolo3.checkpoint.weights`);
- :func:`layout_layers`: the cfg layers of a variant for given anchors, masks and classes, which
  the exporter writes (:mod:`yolo3.export.darknet`) and :func:`layout_cfg_text` returns as text.

No Keras here.
"""
from __future__ import annotations

import re
from typing import Collection, Dict, List, Optional, Sequence, Tuple

import numpy as np

from yolo3.config.architectures import output_name
from yolo3.config.specs import UnknownVariantError, get_spec, layout, layout_names
from yolo3.core.errors import DarknetError
from yolo3.darknet.cfg import (
    ConvSpec,
    Layer,
    MaxpoolSpec,
    RouteSpec,
    ShortcutSpec,
    UpsampleSpec,
    YoloSpec,
    format_cfg,
)

__all__ = ["DarknetNet", "body_to_cfg_index", "layout_blocks", "layout_layers", "layout_cfg_text",
           "block_layer_names", "converted_layer", "CONVERTED_NAME", "LAYOUT_KINDS"]

CONVERTED_NAME = re.compile(r"^(pad|conv|bn|leaky|relu|mish|logistic|shortcut|route|upsample|"
                            r"maxpool)_(\d+)$")


class DarknetNet:
    """:class:`yolo3.config.architectures.Net` appending Darknet cfg layers; points are cfg indices.

    A ``[yolo]`` layer follows each output convolution, with ``masks[k]`` for the k-th output; without
    ``anchors`` its spec is None and only the layout (the block -> index map) is meaningful.
    """

    def __init__(self, anchors: Optional[np.ndarray] = None,
                 masks: Sequence[Sequence[int]] = (), classes: int = 0):
        self.anchors, self.masks, self.classes = anchors, [list(m) for m in masks], classes
        self.layers: List[Layer] = []
        self.blocks: Dict[int, str] = {}  # cfg index -> yolo3 block
        self.num_outputs = 0

    @property
    def current(self) -> int:
        return len(self.layers) - 1

    def _add(self, kind: str, spec) -> int:
        self.layers.append(Layer(index=len(self.layers), kind=kind, spec=spec, line=0))
        return self.current

    def conv(self, block, filters, size, stride=1):
        index = self._add("convolutional", ConvSpec(filters=filters, size=size, stride=stride,
                                                    pad=size // 2, batch_normalize=True,
                                                    activation="leaky"))
        self.blocks[index] = block
        return index

    def output(self, stride, filters):
        index = self._add("convolutional", ConvSpec(filters=filters, size=1, stride=1, pad=0,
                                                    batch_normalize=False, activation="linear"))
        self.blocks[index] = output_name(stride)
        spec = None if self.anchors is None else YoloSpec(
            mask=self.masks[self.num_outputs], anchors=self.anchors, classes=self.classes)
        self._add("yolo", spec)  # the layer counts for the indices even without its spec
        self.num_outputs += 1
        return index

    def shortcut(self, name, source):
        return self._add("shortcut", ShortcutSpec(source=source, activation="linear"))

    def tap(self, name):
        return self.current

    def route(self, source):
        return self._add("route", RouteSpec(sources=[source]))

    def concat(self, name, sources):
        return self._add("route", RouteSpec(sources=list(sources)))

    def upsample(self, name):
        return self._add("upsample", UpsampleSpec(stride=2))

    def maxpool(self, name, size, stride):
        return self._add("maxpool", MaxpoolSpec(size=size, stride=stride))


LAYOUT_KINDS = tuple(layout_names())


def _run(kind: str, net: DarknetNet, out_filters: int) -> DarknetNet:
    try:
        describe = layout(kind)
    except UnknownVariantError as e:
        raise DarknetError(None, str(e)) from None
    describe(net, out_filters)
    return net


def body_to_cfg_index(kind: str) -> Dict[str, int]:
    """``{yolo3 conv block: cfg layer index}`` of the registered layout ``kind`` (a variant such as
    ``'yolov3'``, ``'tiny'``, ``'yolov3-spp'``, or the backbone ``'darknet53'``).

    The layout is Darknet's own (yolov3.cfg, yolov3-tiny.cfg, yolov3-spp.cfg, darknet53.cfg: the
    first 75 layers of the YOLOv3 cfgs are darknet53.cfg's). Blocks are ``backbone_stem``, ...,
    ``output_s32``; see :func:`block_layer_names` for their Keras layers.
    """
    net = _run(kind, DarknetNet(), 0)
    return {block: index for index, block in net.blocks.items()}


def layout_blocks(kind: str) -> List[str]:
    """The convolution blocks of layout ``kind`` in cfg order (a variant's: ``spec.blocks()``)."""
    return [block for block, _ in sorted(body_to_cfg_index(kind).items(), key=lambda kv: kv[1])]


def layout_layers(kind: str, anchors: np.ndarray, masks: Sequence[Sequence[int]], classes: int,
                  out_filters: Optional[int] = None) -> Tuple[List[Layer], Dict[int, str]]:
    """Cfg layers of variant ``kind`` (``[yolo]`` layers with ``anchors``, ``masks``, ``classes``)
    and ``{cfg index: yolo3 block}`` of its convolutions. ``out_filters`` (the output convolutions'
    filters) defaults to ``len(masks[0]) * (classes + 5)``."""
    if out_filters is None:
        out_filters = len(masks[0]) * (classes + 5)
    net = _run(kind, DarknetNet(np.asarray(anchors, np.float32).reshape(-1, 2), masks, classes),
               out_filters)
    return net.layers, net.blocks


def layout_cfg_text(kind: str, num_classes: int = 80, anchors: Optional[np.ndarray] = None,
                    masks: Optional[Sequence[Sequence[int]]] = None,
                    input_size: Tuple[int, int] = (416, 416)) -> str:
    """A complete Darknet cfg for variant ``kind`` (default: the spec's COCO anchors and masks),
    e.g. to benchmark or convert without Darknet's own cfg files. An anchor-free variant has
    none: UnknownVariantError naming its base, before its anchors are asked for."""
    layout(kind)
    spec = get_spec(kind)
    anchors = spec.default_anchors() if anchors is None else anchors
    masks = spec.default_masks(len(anchors)) if masks is None else masks
    layers, _ = layout_layers(spec.name, anchors, masks, num_classes)
    net = {"batch": "1", "subdivisions": "1", "width": str(input_size[1]),
           "height": str(input_size[0]), "channels": "3"}
    return format_cfg(net, layers)


def block_layer_names(block: str, layer_names: Collection[str]) -> Tuple[str, Optional[str]]:
    """``(conv, bn)`` layer names of yolo3 block ``block`` in a model with ``layer_names``.

    A Darknet conv block has ``<block>_conv`` and ``<block>_bn``; an output conv is ``<block>``
    itself (bn ``None``).
    """
    if f"{block}_conv" in layer_names:
        return f"{block}_conv", f"{block}_bn"
    if block in layer_names:
        return block, None
    raise DarknetError(None, f"the model has no layer {block!r} or {block + '_conv'!r}: "
                             f"not a yolo3 body")


def converted_layer(name: str) -> Optional[Tuple[str, int]]:
    """``(kind, cfg index)`` of a converted model's layer name (``'bn_12'`` -> ``('bn', 12)``)."""
    m = CONVERTED_NAME.match(name)
    return (m.group(1), int(m.group(2))) if m else None
