"""Keras body -> Darknet cfg + weights (loadable by Darknet and ``cv2.dnn.readNetFromDarknet``).

Two kinds of model are understood:

- a yolo3 body of a registered variant (layers ``backbone_*``, ``head_s32_*``, ``output_s32`` ...):
  its cfg comes from the variant's architecture (:mod:`yolo3.darknet.layout`), the output filters
  from the model;
- a converted model (layers ``conv_<i>``, ``bn_<i>`` ... from
:mod:`yolo3.checkpoint.darknet_convert`): the
  cfg is rebuilt from the Keras graph, layer by cfg index.

Either way the cfg text is parsed back with :func:`~yolo3.darknet.cfg.parse_cfg_text` (which checks
every shape), and weights are written in that cfg's convolution order, each block checked against
the cfg's shapes.
"""
from __future__ import annotations

from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np

from yolo3.checkpoint.darknet_convert import conv_weights_from_model
from yolo3.config.masks import default_masks
from yolo3.config.specs import get_spec, spec_of_layers
from yolo3.core.errors import ArgumentError, DarknetError, PathLike
from yolo3.core.fileio import atomic_write, write_text_atomic
from yolo3.darknet.cfg import (
    ConvSpec,
    Layer,
    MaxpoolSpec,
    RouteSpec,
    ShortcutSpec,
    UpsampleSpec,
    YoloSpec,
    format_cfg,
    parse_cfg_text,
)
from yolo3.darknet.layout import CONVERTED_NAME, block_layer_names, layout_layers
from yolo3.darknet.weights import Header, write_weights
from yolo3.modeling.keras_compat import inbound_tensors, producing_layer

CONVERTED = "converted"
_ACTS = ("leaky", "relu", "mish", "logistic")


def _net(height: int, width: int, channels: int) -> Dict[str, str]:
    return {"batch": "1", "subdivisions": "1", "width": str(width), "height": str(height),
            "channels": str(channels)}


def _producers(layer) -> List[str]:
    """Names of the layers whose outputs feed ``layer`` (first inbound node)."""
    return [producing_layer(t).name for t in inbound_tensors(layer)]


def _index_of(name: str, model) -> int:
    m = CONVERTED_NAME.match(name)
    if not m:
        raise DarknetError(None, f"layer {name!r} of model {model.name!r} is not a converted "
                                 f"Darknet layer (expected names like conv_12)")
    return int(m.group(2))


def _converted_layers(model, anchors, masks, classes) -> Tuple[List[Layer], Dict[int, Tuple[str, Optional[str]]]]:
    """Rebuild cfg layers from a converted model's ``<kind>_<index>`` layers."""
    groups: Dict[int, Dict[str, object]] = {}
    for layer in model.layers:
        m = CONVERTED_NAME.match(layer.name)
        if m:
            groups.setdefault(int(m.group(2)), {})[m.group(1)] = layer
        elif not layer.name == model.layers[0].name:
            raise DarknetError(None, f"layer {layer.name!r} is not a converted Darknet layer")
    out_names = [producing_layer(t).name for t in model.outputs]
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
    """The registered variant of a yolo3 body (``'yolov3'``, ``'tiny'``, ...) or ``'converted'``
    (``conv_<i>`` names); DarknetError for anything else."""
    names = {l.name for l in model.layers}
    spec = spec_of_layers(names)
    if spec is not None:
        return spec.name
    if "conv_0" in names:
        return CONVERTED
    raise DarknetError(None, f"model {model.name!r} is neither a yolo3 body (output_s32 ...) nor a "
                             f"converted Darknet model (conv_0 ...)")


def export_darknet(model, cfg_out: PathLike, weights_out: PathLike,
                   anchors: Optional[np.ndarray] = None,
                   masks: Optional[Sequence[Sequence[int]]] = None,
                   num_classes: Optional[int] = None, header: Optional[Header] = None,
                   input_size: Tuple[int, int] = (416, 416)) -> str:
    """Write ``model`` as a Darknet cfg and weights; returns the cfg text.

    anchors: ``(N, 2)`` (w, h); default: the variant's COCO anchors for yolo3 bodies (required for
    a converted model with [yolo] layers). masks: per output, largest stride first; default the
    variant's (:meth:`yolo3.config.specs.ModelSpec.default_masks`, tiny: ``[[3, 4, 5], [0, 1,
    2]]``). num_classes: default from the output filters. input_size: ``(height, width)`` for
    ``[net]``.
    """
    kind = model_kind(model)
    n_out = len(model.outputs)
    spec = None if kind == CONVERTED else get_spec(kind)
    if spec is not None and spec.darknet_layout is None:
        raise ArgumentError(f"a {spec.name} body has an anchor-free head, which Darknet has no "
                            f"layer for: it has no Darknet cfg (a {spec.base} body has)")
    if anchors is None and spec is not None:
        anchors = spec.default_anchors()
    if anchors is not None:
        anchors = np.asarray(anchors, dtype=np.float32).reshape(-1, 2)
        if masks is None:
            masks = (spec.default_masks(len(anchors)) if spec is not None
                     else default_masks(len(anchors), n_out))
    if masks:  # an empty list: a backbone without [yolo] layers
        masks = [[int(i) for i in m] for m in masks]
        if len(masks) != n_out:
            raise DarknetError(None, f"{len(masks)} anchor masks for a model with {n_out} outputs")
    out_filters = int(model.outputs[0].shape[-1])
    if masks and num_classes is None:
        num_classes = out_filters // len(masks[0]) - 5
    channels = int(model.inputs[0].shape[-1])
    if spec is None:
        layers, conv_names = _converted_layers(model, anchors, masks or [], num_classes)
    else:
        layers, blocks = layout_layers(spec.name, anchors, masks, num_classes, out_filters)
        names = {l.name for l in model.layers}
        conv_names = {i: block_layer_names(block, names) for i, block in blocks.items()}
    text = format_cfg(_net(*input_size, channels), layers)
    cfg = parse_cfg_text(text, cfg_out)  # checks every shape, including [yolo] channel counts
    blocks_out = [conv_weights_from_model(model, cfg, l, *conv_names[l.index]) for l in cfg.convs()]
    # each file written whole or not at all; the weights (large, the one that can fail) first, so
    # a failed export leaves no cfg without its weights
    atomic_write(weights_out, lambda tmp: write_weights(tmp, header or Header(), blocks_out))
    write_text_atomic(cfg_out, text)
    return text
