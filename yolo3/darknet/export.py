"""Keras body -> Darknet cfg + weights (loadable by Darknet and ``cv2.dnn.readNetFromDarknet``).

Two kinds of model are understood:

- a yolo3 body (:func:`yolo3.model.yolo_body` / ``tiny_yolo_body``, layers ``backbone_*``,
  ``head_s32_*``, ``output_s32`` ...): the YOLOv3 or tiny cfg is generated from an explicit table of
  (cfg layer -> yolo3 layer name), with filter counts read from the model;
- a converted model (layers ``conv_<i>``, ``bn_<i>`` ... from :mod:`yolo3.darknet.convert`): the
  cfg is rebuilt from the Keras graph, layer by cfg index.

Either way the cfg text is parsed back with :func:`~yolo3.darknet.cfg.parse_cfg_text` (which checks
every shape), and weights are written in that cfg's convolution order, each block checked against
the cfg's shapes.
"""
from __future__ import annotations

import re
from pathlib import Path
from typing import Callable, Collection, Dict, List, Optional, Sequence, Tuple

import numpy as np

from yolo3.darknet.cfg import (ConvSpec, Layer, MaxpoolSpec, RouteSpec, ShortcutSpec, UpsampleSpec,
                               YoloSpec, format_cfg, parse_cfg_text)
from yolo3.darknet.convert import conv_weights_from_model
from yolo3.darknet.weights import Header, write_weights
from yolo3.errors import DarknetError, PathLike

_CONVERTED_NAME = re.compile(r"^(pad|conv|bn|leaky|relu|mish|logistic|shortcut|route|upsample|"
                             r"maxpool)_(\d+)$")
_ACTS = ("leaky", "relu", "mish", "logistic")
# Darknet-53 stages: (yolo3 name, residual blocks); the stride-8 and stride-16 taps end s3 and s4.
_DARKNET53_STAGES = (("s1", 1), ("s2", 2), ("s3", 8), ("s4", 8), ("s5", 4))
_TINY_BACKBONE = 7  # backbone_conv0 .. backbone_conv6


def _net(height: int, width: int, channels: int) -> Dict[str, str]:
    return {"batch": "1", "subdivisions": "1", "width": str(width), "height": str(height),
            "channels": str(channels)}


class _Builder:
    """Appends cfg layers and records the yolo3 block behind each conv (cfg index -> block name).

    Without a model only the layout is recorded (specs are ``None``): :func:`body_to_cfg_index`.
    """

    def __init__(self, model=None):
        self.model = model
        self.layers: List[Layer] = []
        self.blocks: Dict[int, str] = {}  # cfg index -> yolo3 block name
        self.conv_names: Dict[int, Tuple[str, Optional[str]]] = {}  # cfg index -> (conv, bn)

    @property
    def last(self) -> int:
        return len(self.layers) - 1

    def add(self, kind: str, spec) -> int:
        self.layers.append(Layer(index=len(self.layers), kind=kind, spec=spec, line=0))
        return self.last

    def conv(self, block: str, stride: int = 1) -> int:
        """A Darknet conv block ``block`` (``_conv``/``_bn``), or a plain output conv ``block``."""
        spec = None
        if self.model is not None:
            names = block_layer_names(block, {l.name for l in self.model.layers})
            spec = self._conv_spec(*names, stride)
        index = self.add("convolutional", spec)
        self.blocks[index] = block
        if self.model is not None:
            self.conv_names[index] = names
        return index

    def _conv_spec(self, conv_name: str, bn_name: Optional[str], stride: int) -> ConvSpec:
        size = int(self.model.get_layer(conv_name).kernel_size[0])
        return ConvSpec(filters=int(self.model.get_layer(conv_name).filters), size=size,
                        stride=stride, pad=size // 2, batch_normalize=bn_name is not None,
                        activation="leaky" if bn_name is not None else "linear")

    def yolo(self, mask, anchors, classes) -> int:
        spec = None if self.model is None else YoloSpec(mask=list(mask), anchors=anchors,
                                                        classes=classes)
        return self.add("yolo", spec)


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


def _darknet53_layers(b: _Builder) -> Tuple[int, int]:
    """Darknet-53 (cfg layers 0..74 of yolov3.cfg and darknet53.cfg); returns the c3, c4 indices."""
    b.conv("backbone_stem")
    taps = []
    for stage, blocks in _DARKNET53_STAGES:
        b.conv(f"backbone_{stage}_down", stride=2)
        for j in range(1, blocks + 1):
            b.conv(f"backbone_{stage}_b{j}_conv1")
            b.conv(f"backbone_{stage}_b{j}_conv2")
            b.add("shortcut", ShortcutSpec(source=b.last - 2, activation="linear"))
        taps.append(b.last)
    return taps[2], taps[3]  # c3 (end of s3), c4 (end of s4)


def _yolov3_layers(b: _Builder, anchors, masks, classes) -> None:
    c3, c4 = _darknet53_layers(b)
    skips = {16: c4, 8: c3}
    for scale, stride in enumerate((32, 16, 8)):
        if stride != 32:
            b.add("route", RouteSpec(sources=[branch]))
            b.conv(f"head_s{stride}_reduce")
            b.add("upsample", UpsampleSpec(stride=2))
            b.add("route", RouteSpec(sources=[b.last, skips[stride]]))
        for k in range(1, 6):
            b.conv(f"head_s{stride}_conv{k}")
        branch = b.last
        b.conv(f"head_s{stride}_conv6")
        b.conv(f"output_s{stride}")
        b.yolo(masks[scale], anchors, classes)


def _tiny_layers(b: _Builder, anchors, masks, classes) -> None:
    c4 = None
    for i in range(_TINY_BACKBONE):
        b.conv(f"backbone_conv{i}")
        if i == 4:
            c4 = b.last
        if i < _TINY_BACKBONE - 2:
            b.add("maxpool", MaxpoolSpec(size=2, stride=2))
        elif i == _TINY_BACKBONE - 2:
            b.add("maxpool", MaxpoolSpec(size=2, stride=1))
    branch = b.conv("head_s32_conv1")
    b.conv("head_s32_conv2")
    b.conv("output_s32")
    b.yolo(masks[0], anchors, classes)
    b.add("route", RouteSpec(sources=[branch]))
    b.conv("head_s16_reduce")
    b.add("upsample", UpsampleSpec(stride=2))
    b.add("route", RouteSpec(sources=[b.last, c4]))
    b.conv("head_s16_conv1")
    b.conv("output_s16")
    b.yolo(masks[1], anchors, classes)


# Darknet layouts by kind: yolo3 bodies (with their cfgs' [yolo] layers) and the bare backbone.
_LAYOUTS: Dict[str, Callable[..., None]] = {
    "yolov3": _yolov3_layers,
    "tiny": _tiny_layers,
    "darknet53": lambda b, anchors, masks, classes: _darknet53_layers(b),
}
LAYOUT_KINDS = tuple(_LAYOUTS)


def body_to_cfg_index(kind: str) -> Dict[str, int]:
    """``{yolo3 conv block: cfg layer index}`` for ``kind`` (``'yolov3'``, ``'tiny'``, ``'darknet53'``).

    The layout is the one :func:`export_darknet` writes, i.e. Darknet's yolov3.cfg, yolov3-tiny.cfg
    and darknet53.cfg (its layers 0..74 are yolov3.cfg's). Blocks are ``backbone_stem``, ...,
    ``output_s32``; see :func:`block_layer_names` for their Keras layers.
    """
    if kind not in _LAYOUTS:
        raise DarknetError(None, f"unknown model kind {kind!r}: choose from {LAYOUT_KINDS}")
    b = _Builder()
    _LAYOUTS[kind](b, None, [()] * 3, 0)
    return {block: index for index, block in b.blocks.items()}


def converted_layer(name: str) -> Optional[Tuple[str, int]]:
    """``(kind, cfg index)`` of a converted model's layer name (``'bn_12'`` -> ``('bn', 12)``)."""
    m = _CONVERTED_NAME.match(name)
    return (m.group(1), int(m.group(2))) if m else None


def _producers(layer) -> List[str]:
    """Names of the layers whose outputs feed ``layer`` (first inbound node)."""
    node = layer._inbound_nodes[0]
    return [t._keras_history.operation.name for t in node.input_tensors]


def _index_of(name: str, model) -> int:
    m = _CONVERTED_NAME.match(name)
    if not m:
        raise DarknetError(None, f"layer {name!r} of model {model.name!r} is not a converted "
                                 f"Darknet layer (expected names like conv_12)")
    return int(m.group(2))


def _converted_layers(model, anchors, masks, classes) -> Tuple[List[Layer], Dict[int, Tuple[str, Optional[str]]]]:
    """Rebuild cfg layers from a converted model's ``<kind>_<index>`` layers."""
    groups: Dict[int, Dict[str, object]] = {}
    for layer in model.layers:
        m = _CONVERTED_NAME.match(layer.name)
        if m:
            groups.setdefault(int(m.group(2)), {})[m.group(1)] = layer
        elif not layer.name == model.layers[0].name:
            raise DarknetError(None, f"layer {layer.name!r} is not a converted Darknet layer")
    out_names = [t._keras_history.operation.name for t in model.outputs]
    yolo_at = [_index_of(n, model) + 1 for n in out_names] if masks else []
    if masks and len(masks) != len(out_names):
        raise DarknetError(None, f"{len(masks)} anchor masks for a model with {len(out_names)} "
                                 f"outputs")
    count = max(list(groups) + yolo_at) + 1
    layers: List[Layer] = []
    conv_names: Dict[int, Tuple[str, Optional[str]]] = {}
    for i in range(count):
        g = groups.get(i, {})
        act = next((a for a in _ACTS if a in g), "linear")
        if i in yolo_at:
            if g:
                raise DarknetError(None, f"cfg index {i} should be a [yolo] layer but the model "
                                         f"has {sorted(g)} there")
            spec, kind = YoloSpec(mask=list(masks[yolo_at.index(i)]), anchors=anchors,
                                  classes=classes), "yolo"
        elif "conv" in g:
            conv = g["conv"]
            size = int(conv.kernel_size[0])
            pad = size // 2 if conv.padding == "same" else 0
            if "pad" in g:
                pad = int(g["pad"].padding[0][0])
            spec = ConvSpec(filters=int(conv.filters), size=size, stride=int(conv.strides[0]),
                            pad=pad, batch_normalize="bn" in g, activation=act)
            kind = "convolutional"
            conv_names[i] = (conv.name, g["bn"].name if "bn" in g else None)
        elif "shortcut" in g:
            srcs = [_index_of(n, model) for n in _producers(g["shortcut"])]
            spec, kind = ShortcutSpec(source=srcs[0], activation=act), "shortcut"
        elif "route" in g:
            srcs = [_index_of(n, model) for n in _producers(g["route"])]
            spec, kind = RouteSpec(sources=srcs), "route"
        elif "upsample" in g:
            spec, kind = UpsampleSpec(stride=int(g["upsample"].size[0])), "upsample"
        elif "maxpool" in g:
            mp = g["maxpool"]
            spec, kind = MaxpoolSpec(size=int(mp.pool_size[0]), stride=int(mp.strides[0])), "maxpool"
        else:
            raise DarknetError(None, f"no layer for cfg index {i} in the model (and it is not the "
                                     f"[yolo] after an output): pass the anchor masks")
        layers.append(Layer(index=i, kind=kind, spec=spec, line=0))
    return layers, conv_names


def model_kind(model) -> str:
    """``'yolov3'``, ``'tiny'`` (yolo3 bodies) or ``'converted'`` (``conv_<i>`` names)."""
    names = {l.name for l in model.layers}
    if "output_s32" in names:
        return "yolov3" if "output_s8" in names else "tiny"
    if "conv_0" in names:
        return "converted"
    raise DarknetError(None, f"model {model.name!r} is neither a yolo3 body (output_s32 ...) nor a "
                             f"converted Darknet model (conv_0 ...)")


def export_darknet(model, cfg_out: PathLike, weights_out: PathLike,
                   anchors: Optional[np.ndarray] = None,
                   masks: Optional[Sequence[Sequence[int]]] = None,
                   num_classes: Optional[int] = None, header: Optional[Header] = None,
                   input_size: Tuple[int, int] = (416, 416)) -> str:
    """Write ``model`` as a Darknet cfg and weights; returns the cfg text.

    anchors: ``(N, 2)`` (w, h); default: yolo3's COCO anchors for yolo3 bodies (required for a
    converted model with [yolo] layers). masks: per output, largest stride first; default
    :func:`yolo3.anchors.default_masks` (tiny: ``[[3, 4, 5], [0, 1, 2]]``). num_classes: default
    from the output filters. input_size: ``(height, width)`` written to ``[net]``.
    """
    from yolo3.anchors import default_anchors, default_masks
    kind = model_kind(model)
    n_out = len(model.outputs)
    if anchors is None and kind != "converted":
        anchors = default_anchors(kind)
    if anchors is not None:
        anchors = np.asarray(anchors, dtype=np.float32).reshape(-1, 2)
        if masks is None:
            masks = default_masks(len(anchors))
    if masks:  # an empty list: a backbone without [yolo] layers
        masks = [[int(i) for i in m] for m in masks]
        if len(masks) != n_out:
            raise DarknetError(None, f"{len(masks)} anchor masks for a model with {n_out} outputs")
    if masks and num_classes is None:
        filters = int(model.outputs[0].shape[-1])
        num_classes = filters // len(masks[0]) - 5
    channels = int(model.inputs[0].shape[-1])
    if kind == "converted":
        layers, conv_names = _converted_layers(model, anchors, masks or [], num_classes)
    else:
        b = _Builder(model)
        _LAYOUTS[kind](b, anchors, masks, num_classes)
        layers, conv_names = b.layers, b.conv_names
    text = format_cfg(_net(*input_size, channels), layers)
    cfg = parse_cfg_text(text, cfg_out)  # checks every shape, including [yolo] channel counts
    blocks = [conv_weights_from_model(model, cfg, l, *conv_names[l.index]) for l in cfg.convs()]
    Path(cfg_out).write_text(text, encoding="utf-8")
    write_weights(weights_out, header or Header(), blocks)
    return text
