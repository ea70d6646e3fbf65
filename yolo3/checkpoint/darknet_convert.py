"""Darknet cfg + weights -> Keras body (``.keras`` model or ``.weights.h5``) and sidecar files.

Keras layer names start with the Darknet kind and end with the cfg index, so they can be checked
against the cfg by eye and against OpenCV's ``conv_<index>``:
``pad_<i>``, ``conv_<i>``, ``bn_<i>``, ``<activation>_<i>`` (``leaky_<i>``, ``relu_<i>``,
``mish_<i>``, ``logistic_<i>``), ``shortcut_<i>``, ``route_<i>``, ``upsample_<i>``, ``maxpool_<i>``.
``[yolo]`` layers have no Keras layer: the body's outputs are their inputs (the raw maps), in cfg
order; a cfg without ``[yolo]`` (a backbone) outputs its last layer.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np

from yolo3.checkpoint.metadata import ModelInfo
from yolo3.checkpoint.metadata import write_sidecars as _write_sidecar_files
from yolo3.checkpoint.saving import atomic_save_model, atomic_save_weights
from yolo3.core.errors import DarknetError, PathLike
from yolo3.darknet import published as published_weights
from yolo3.darknet.cfg import (
    ConvSpec,
    DarknetCfg,
    Layer,
    MaxpoolSpec,
    RouteSpec,
    ShortcutSpec,
    UpsampleSpec,
    parse_cfg,
)
from yolo3.darknet.weights import ConvWeights, Header, in_channels, read_weights
from yolo3.data.annotations import well_known_classes
from yolo3.modeling.blocks import BlockNames, activation_layer, conv_block
from yolo3.modeling.keras_compat import producing_layer


def _conv_block(x, layer: Layer, kernel_initializer: str):
    s: ConvSpec = layer.spec
    i = layer.index
    same = s.stride == 1 and s.size % 2 == 1 and s.pad == s.size // 2
    # Darknet pads both sides and floors the output size: symmetric zero padding + 'valid'.
    padding = "same" if same else (s.pad if s.pad else "valid")
    names = BlockNames(conv=f"conv_{i}", bn=f"bn_{i}", act=f"{s.activation}_{i}", pad=f"pad_{i}")
    return conv_block(x, s.filters, s.size, names, stride=s.stride, padding=padding,
                      batch_normalize=s.batch_normalize, activation=s.activation,
                      kernel_initializer=kernel_initializer)


def build_model(cfg: DarknetCfg, input_shape: Tuple[Optional[int], Optional[int]] = (None, None),
                name: Optional[str] = None, kernel_initializer: str = "glorot_uniform"):
    """Keras functional model for ``cfg``; input ``(h, w, channels)``, RGB in [0, 1].

    ``kernel_initializer="zeros"`` skips drawing random kernels when weights are loaded next
    (it saves seconds on the full YOLOv3).
    """
    import keras
    from keras import layers
    inputs = keras.Input(shape=(*input_shape, cfg.channels), name="image")
    outs: List = []
    for layer in cfg.layers:
        x = outs[-1] if outs else inputs
        s = layer.spec
        i = layer.index
        if isinstance(s, ConvSpec):
            y = _conv_block(x, layer, kernel_initializer)
        elif isinstance(s, ShortcutSpec):
            y = layers.Add(name=f"shortcut_{i}")([outs[s.source], x])
            act = activation_layer(s.activation, f"{s.activation}_{i}")
            y = act(y) if act is not None else y
        elif isinstance(s, RouteSpec):
            srcs = [outs[j] for j in s.sources]
            y = (layers.Identity(name=f"route_{i}")(srcs[0]) if len(srcs) == 1
                 else layers.Concatenate(name=f"route_{i}")(srcs))
        elif isinstance(s, UpsampleSpec):
            y = layers.UpSampling2D(s.stride, interpolation="nearest", name=f"upsample_{i}")(x)
        elif isinstance(s, MaxpoolSpec):
            # TF 'same' pads (size-1)//2 before for stride 1 and nothing for 2/2: Darknet's padding.
            y = layers.MaxPooling2D(s.size, strides=s.stride, padding="same", name=f"maxpool_{i}")(x)
        else:  # [yolo]: the raw map passes through; decoding is the detector's job
            y = x
        outs.append(y)
    outputs = [outs[i] for i in cfg.output_indices()]
    stem = Path(cfg.path).stem if cfg.path else "darknet"
    return keras.Model(inputs, outputs if len(outputs) > 1 else outputs[0],
                       name=name or _keras_name(stem))


def _keras_name(stem: str) -> str:
    cleaned = "".join(c if c.isalnum() or c == "_" else "_" for c in stem)
    return cleaned or "darknet"


def load_darknet_weights(model, cfg: DarknetCfg, blocks: Dict[int, ConvWeights]) -> None:
    """Copy Darknet parameter blocks into the ``conv_<i>`` / ``bn_<i>`` layers of ``model``."""
    for layer in cfg.convs():
        w = blocks[layer.index]
        kernel = np.transpose(w.kernel, (2, 3, 1, 0))  # (out, in, h, w) -> (h, w, in, out)
        conv = model.get_layer(f"conv_{layer.index}")
        if w.gamma is None:
            conv.set_weights([kernel, w.bias])
        else:
            conv.set_weights([kernel])
            model.get_layer(f"bn_{layer.index}").set_weights([w.gamma, w.bias, w.mean, w.variance])


def conv_weights_from_model(model, cfg: DarknetCfg, layer: Layer,
                            conv_name: Optional[str] = None, bn_name: Optional[str] = None
                            ) -> ConvWeights:
    """Darknet parameter block of cfg conv ``layer`` from Keras layers (default ``conv_<i>``, ``bn_<i>``)."""
    s: ConvSpec = layer.spec
    conv = model.get_layer(conv_name or f"conv_{layer.index}")
    params = conv.get_weights()
    kernel = np.transpose(params[0], (3, 2, 0, 1))
    expected = (s.filters, in_channels(cfg, layer), s.size, s.size)
    if kernel.shape != expected:
        raise DarknetError(cfg.path, f"Keras layer {conv.name!r} has kernel (out, in, h, w) "
                                     f"{kernel.shape}, the cfg needs {expected}",
                           line=layer.line, where=f"[convolutional] layer {layer.index}")
    if s.batch_normalize:
        if len(params) != 1:
            raise DarknetError(cfg.path, f"Keras layer {conv.name!r} has a bias but the cfg conv is "
                                         f"batch-normalised", line=layer.line)
        gamma, beta, mean, var = model.get_layer(bn_name or f"bn_{layer.index}").get_weights()
        return ConvWeights(bias=beta, gamma=gamma, mean=mean, variance=var, kernel=kernel)
    if len(params) != 2:
        raise DarknetError(cfg.path, f"Keras layer {conv.name!r} has no bias but the cfg conv has no "
                                     f"batch norm", line=layer.line)
    return ConvWeights(bias=params[1], kernel=kernel)


@dataclass
class ConvertResult:
    """What :func:`convert` wrote and read."""
    out_path: Path
    anchors_path: Optional[Path]
    masks_path: Path
    anchors: Optional[np.ndarray]
    masks: List[List[int]]
    num_classes: Optional[int]
    input_size: Tuple[int, int]
    header: Header
    output_names: List[str] = field(default_factory=list)
    default_names: Optional[str] = None  # "COCO" / "VOC": the names stored without class_names
    published: Optional[published_weights.PublishedWeights] = None  # the weights, recognised by checksum

    def summary(self) -> str:
        lines = [f"wrote {self.out_path}"]
        if self.published is not None:
            lines.append(f"  weights: {self.published.describe()}, recognised by its checksum")
        lines += [f"  outputs: {', '.join(self.output_names)}",
                 f"  weights header: major={self.header.major} minor={self.header.minor} "
                 f"revision={self.header.revision} seen={self.header.seen}"]
        if self.anchors is not None:
            anchors = ",  ".join(f"{w:g},{h:g}" for w, h in self.anchors)
            lines += [f"  anchors: {anchors}  -> {self.anchors_path}",
                      f"  masks: {self.masks}  classes: {self.num_classes}  -> {self.masks_path}"]
            if self.default_names:
                lines.append(f"  class names: the {self.num_classes} {self.default_names} names "
                             "(no class list given; give one to name them otherwise)")
        else:
            lines.append(f"  no [yolo] layer (backbone); metadata -> {self.masks_path}")
        return "\n".join(lines)


def write_sidecars(out_path: PathLike, cfg: DarknetCfg, header: Header
                   ) -> Tuple[Optional[Path], Path]:
    """Write the anchors file (if the cfg has [yolo] layers) and the masks JSON beside ``out_path``
    (:func:`yolo3.checkpoint.metadata.write_sidecars`): for ``.weights.h5`` outputs, and for tools
    that read them; ``.keras`` outputs also carry the same facts inside."""
    anchors, masks, num_classes = cfg.yolo_info()
    return _write_sidecar_files(out_path, anchors, masks, num_classes, (cfg.height, cfg.width),
                                header.as_list())


def model_info(cfg: DarknetCfg, header: Header,
               class_names: Optional[Sequence[str]] = None) -> Optional[ModelInfo]:
    """The :class:`~yolo3.checkpoint.metadata.ModelInfo` of a converted cfg (None for a backbone
    without ``[yolo]`` layers). ``class_names`` must have the cfg's class count; without them an
    80-class (20-class) model gets the COCO (VOC) names its pretrained weights were trained on."""
    anchors, masks, num_classes = cfg.yolo_info()
    if anchors is None:
        return None
    known = well_known_classes(num_classes)
    if class_names is None and known is not None:
        class_names = known[1]
    if class_names is not None and len(class_names) != num_classes:
        raise DarknetError(cfg.path, f"{len(class_names)} class names for the {num_classes} classes "
                                     "of the cfg's [yolo] layers")
    return ModelInfo(anchors=anchors, masks=masks, num_classes=num_classes,
                     class_names=list(class_names) if class_names is not None else None,
                     input_size=(cfg.height, cfg.width), darknet_header=header.as_list())


def convert(cfg_path: PathLike, weights_path: PathLike, out_path: PathLike,
            progress: bool = True, class_names: Optional[Sequence[str]] = None) -> ConvertResult:
    """Convert Darknet ``cfg_path`` + ``weights_path`` to ``out_path`` (``.keras`` or ``.weights.h5``).

    A ``.keras`` output carries its anchors, masks, class count (and ``class_names`` when given),
    input size and weights header (:mod:`yolo3.checkpoint.metadata`); side files are written beside
    it too. Nothing is written when the inputs are bad.
    """
    out = Path(out_path)
    if not (out.name.endswith(".keras") or out.name.endswith(".weights.h5")):
        raise DarknetError(out, "output must end with .keras (model) or .weights.h5 (weights only)")
    cfg = parse_cfg(cfg_path)
    try:
        header, blocks = read_weights(weights_path, cfg, progress=progress)
    except DarknetError as error:  # a clearer cause where there is one (a web page, a cut download)
        reason = published_weights.refusal(weights_path) if os.path.isfile(weights_path) else None
        if reason is None:
            raise
        raise DarknetError(weights_path, reason) from error
    info = model_info(cfg, header, class_names)
    model = build_model(cfg, kernel_initializer="zeros")
    load_darknet_weights(model, cfg, blocks)
    del blocks
    if out.name.endswith(".keras"):
        atomic_save_model(model, out, info)
    else:
        atomic_save_weights(model, out)
    anchors_path, masks_path = write_sidecars(out, cfg, header)
    anchors, masks, num_classes = cfg.yolo_info()
    names = [producing_layer(t).name for t in model.outputs]
    known = well_known_classes(num_classes) if class_names is None and anchors is not None else None
    return ConvertResult(out_path=out, anchors_path=anchors_path, masks_path=masks_path,
                         anchors=anchors, masks=masks, num_classes=num_classes,
                         input_size=(cfg.height, cfg.width), header=header, output_names=names,
                         default_names=known[0] if known is not None and out.name.endswith(".keras")
                         else None, published=published_weights.identify(weights_path))
