"""Darknet cfg files: parsing into typed layer specs, shape checks, and writing cfg text back.

A cfg is a list of ``[section]`` headers, each followed by ``key = value`` lines. The first section
is ``[net]``; every later section is a layer, numbered from 0 in file order (Darknet's and OpenCV's
index: OpenCV names its convolutions ``conv_<index>``). Supported layers:

- ``[convolutional]``: batch_normalize, filters, size, stride, pad/padding, activation
  (leaky, linear, relu, mish, logistic);
- ``[shortcut]``: from (one layer), activation;
- ``[route]``: layers (one to four, negative = relative, else absolute);
- ``[upsample]``: stride (nearest neighbour);
- ``[maxpool]``: size, stride (stride 1 with any size, or size = stride = 2);
- ``[yolo]``: mask, anchors, classes (its input is the raw map the detector decodes).

Anything else is refused with a :class:`~yolo3.core.errors.DarknetError` naming the file, line and
section. This module has no Keras dependency; :mod:`yolo3.checkpoint.darknet_convert` builds the
Keras graph.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict, List, Optional, Sequence, Tuple, Union

import numpy as np

from yolo3.core.errors import DarknetError, PathLike
from yolo3.core.limits import beyond_limit

ACTIVATIONS = ("leaky", "linear", "relu", "mish", "logistic")
MAX_ROUTE_INPUTS = 4
LAYER_TYPES = ("convolutional", "shortcut", "route", "upsample", "maxpool", "yolo")
_ALIASES = {"conv": "convolutional", "max": "maxpool"}


@dataclass
class ConvSpec:
    """``[convolutional]``: ``pad`` is the padding in pixels on each side (Darknet semantics)."""
    filters: int
    size: int
    stride: int
    pad: int
    batch_normalize: bool
    activation: str


@dataclass
class ShortcutSpec:
    """``[shortcut]``: element-wise sum of the previous layer and layer ``source`` (absolute)."""
    source: int
    activation: str


@dataclass
class RouteSpec:
    """``[route]``: channel concatenation of absolute layer indices ``sources``."""
    sources: List[int]


@dataclass
class UpsampleSpec:
    """``[upsample]``: nearest-neighbour upsampling by an integer ``stride``."""
    stride: int


@dataclass
class MaxpoolSpec:
    """``[maxpool]``: max pooling; Darknet pads ``(size - 1) // 2`` top/left, output ``ceil(w / stride)``."""
    size: int
    stride: int


@dataclass
class YoloSpec:
    """``[yolo]``: decodes the previous layer with anchors ``anchors[mask]`` and ``classes`` classes."""
    mask: List[int]
    anchors: np.ndarray
    classes: int


Spec = Union[ConvSpec, ShortcutSpec, RouteSpec, UpsampleSpec, MaxpoolSpec, YoloSpec]


@dataclass
class Layer:
    """One cfg layer: its index, kind, typed spec, source line and output channels / stride."""
    index: int
    kind: str
    spec: Spec
    line: int
    channels: int = 0
    stride: int = 1  # total downsampling factor of its output relative to the input image

    @property
    def name(self) -> str:
        """``<kind>_<index>``, the prefix of this layer's Keras layer names."""
        short = {"convolutional": "conv"}.get(self.kind, self.kind)
        return f"{short}_{self.index}"


@dataclass
class DarknetCfg:
    """A parsed cfg: ``[net]`` options and the layers with resolved indices and channel counts."""
    path: Optional[str]
    net: Dict[str, str]
    layers: List[Layer]
    width: int = 416
    height: int = 416
    channels: int = 3

    def convs(self) -> List[Layer]:
        """Convolutional layers in cfg (= weights file) order."""
        return [l for l in self.layers if l.kind == "convolutional"]

    def yolo_layers(self) -> List[Layer]:
        return [l for l in self.layers if l.kind == "yolo"]

    def output_indices(self) -> List[int]:
        """Layers whose outputs the body returns: the input of each ``[yolo]``, else the last layer."""
        yolos = self.yolo_layers()
        if yolos:
            return [l.index - 1 for l in yolos]
        return [self.layers[-1].index]

    def conv_flops(self, height: Optional[int] = None, width: Optional[int] = None) -> float:
        """Floating-point operations of the convolutions for one ``height x width`` image (default
        the ``[net]`` size), 2 per multiply-add as Darknet counts its BFLOPs (65.9e9 for YOLOv3-416)."""
        h, w = height or self.height, width or self.width
        total = 0.0
        for layer in self.convs():
            spec = layer.spec
            c_in = self.layers[layer.index - 1].channels if layer.index else self.channels
            out_h, out_w = -(-h // layer.stride), -(-w // layer.stride)
            total += 2.0 * spec.size * spec.size * c_in * spec.filters * out_h * out_w
        return total

    def yolo_info(self) -> Tuple[Optional[np.ndarray], List[List[int]], Optional[int]]:
        """``(anchors, masks, num_classes)`` from the ``[yolo]`` layers (``None, [], None`` if none)."""
        yolos = self.yolo_layers()
        if not yolos:
            return None, [], None
        first = yolos[0].spec
        for l in yolos[1:]:
            if l.spec.classes != first.classes or not np.array_equal(l.spec.anchors, first.anchors):
                raise self.error("all [yolo] layers must share anchors and classes", l)
        return first.anchors.copy(), [list(l.spec.mask) for l in yolos], first.classes

    def error(self, reason: str, layer: Optional[Layer] = None) -> DarknetError:
        if layer is None:
            return DarknetError(self.path, reason)
        return DarknetError(self.path, reason, line=layer.line,
                            where=f"[{layer.kind}] layer {layer.index}")


@dataclass
class _Section:
    kind: str
    line: int
    options: Dict[str, str] = field(default_factory=dict)
    option_lines: Dict[str, int] = field(default_factory=dict)


def _split_sections(text: str, path: Optional[str]) -> List[_Section]:
    sections: List[_Section] = []
    for line_no, raw in enumerate(text.splitlines(), start=1):
        line = raw.split("#", 1)[0].split(";", 1)[0].strip()
        if not line:
            continue
        if line.startswith("["):
            if not line.endswith("]") or len(line) < 3:
                raise DarknetError(path, f"malformed section header {line!r}", line=line_no)
            kind = line[1:-1].strip().lower()
            sections.append(_Section(_ALIASES.get(kind, kind), line_no))
            continue
        if "=" not in line:
            raise DarknetError(path, f"expected 'key = value', got {line!r}", line=line_no)
        if not sections:
            raise DarknetError(path, "option before the first [section]", line=line_no)
        key, value = (s.strip() for s in line.split("=", 1))
        sections[-1].options[key] = value
        sections[-1].option_lines[key] = line_no
    return sections


class _Options:
    """Typed access to one section's options, with errors that name the line."""

    def __init__(self, section: _Section, path: Optional[str], where: str):
        self.s, self.path, self.where = section, path, where
        self.used = set()

    def _err(self, key: str, reason: str) -> DarknetError:
        line = self.s.option_lines.get(key, self.s.line)
        return DarknetError(self.path, reason, line=line, where=self.where)

    def int(self, key: str, default: Optional[int] = None, minimum: Optional[int] = None,
            limit: Optional[str] = None) -> int:
        """The option ``key`` as an integer, at least ``minimum``, and within ``limit``, a kind
        of :data:`yolo3.core.limits.LIMITS` (a size yolo3 allocates by)."""
        self.used.add(key)
        if key not in self.s.options:
            if default is None:
                raise self._err(key, f"missing required option {key!r}")
            return default
        raw = self.s.options[key]
        try:
            value = int(raw)
        except ValueError:
            raise self._err(key, f"option {key}={raw!r} is not an integer") from None
        if minimum is not None and value < minimum:
            raise self._err(key, f"option {key}={value} must be >= {minimum}")
        reason = beyond_limit(limit, value, f"option {key}") if limit else None
        if reason:
            raise self._err(key, reason)
        return value

    def ints(self, key: str, default: Optional[List[int]] = None) -> List[int]:
        self.used.add(key)
        if key not in self.s.options:
            if default is None:
                raise self._err(key, f"missing required option {key!r}")
            return list(default)
        raw = self.s.options[key]
        try:
            return [int(v) for v in raw.split(",") if v.strip()]
        except ValueError:
            raise self._err(key, f"option {key}={raw!r} is not a list of integers") from None

    def floats(self, key: str) -> List[float]:
        self.used.add(key)
        raw = self.s.options.get(key, "")
        try:
            return [float(v) for v in raw.split(",") if v.strip()]
        except ValueError:
            raise self._err(key, f"option {key}={raw!r} is not a list of numbers") from None

    def str(self, key: str, default: str) -> str:
        self.used.add(key)
        return self.s.options.get(key, default).strip().lower()

    def refuse(self, key: str, allowed: Sequence[str]) -> None:
        """Refuse option ``key`` unless its value is in ``allowed`` (options that change the math)."""
        if key in self.s.options and self.s.options[key].strip() not in allowed:
            raise self._err(key, f"option {key}={self.s.options[key]} is not supported")


def _activation(opts: _Options) -> str:
    act = opts.str("activation", "linear")
    if act not in ACTIVATIONS:
        raise opts._err("activation", f"activation {act!r} is not supported "
                                      f"(expected one of {', '.join(ACTIVATIONS)})")
    return act


def _resolve(index: int, ref: int, opts: _Options, key: str) -> int:
    target = index + ref if ref < 0 else ref
    if not 0 <= target < index:
        raise opts._err(key, f"{key} refers to layer {ref} (absolute {target}), which does not "
                             f"exist before layer {index}")
    return target


def _parse_layer(section: _Section, index: int, path: Optional[str]) -> Spec:
    where = f"[{section.kind}] layer {index}"
    opts = _Options(section, path, where)
    kind = section.kind
    if kind == "convolutional":
        opts.refuse("groups", ["1"])
        opts.refuse("dilation", ["1"])
        opts.refuse("binary", ["0"])
        opts.refuse("xnor", ["0"])
        size = opts.int("size", 1, minimum=1, limit="kernel")
        pad = size // 2 if opts.int("pad", 0) else opts.int("padding", 0, minimum=0)
        return ConvSpec(filters=opts.int("filters", 1, minimum=1, limit="filters"), size=size,
                        stride=opts.int("stride", 1, minimum=1, limit="stride"), pad=pad,
                        batch_normalize=bool(opts.int("batch_normalize", 0)),
                        activation=_activation(opts))
    if kind == "shortcut":
        refs = opts.ints("from")
        if len(refs) != 1:
            raise opts._err("from", "[shortcut] with more than one 'from' layer is not supported")
        opts.refuse("weights_type", ["none"])
        return ShortcutSpec(source=_resolve(index, refs[0], opts, "from"),
                            activation=_activation(opts))
    if kind == "route":
        opts.refuse("groups", ["1"])
        refs = opts.ints("layers")
        if not 1 <= len(refs) <= MAX_ROUTE_INPUTS:
            raise opts._err("layers", f"[route] needs 1 to {MAX_ROUTE_INPUTS} layers, got {len(refs)}")
        return RouteSpec(sources=[_resolve(index, r, opts, "layers") for r in refs])
    if kind == "upsample":
        stride = opts.int("stride", 2, minimum=1, limit="stride")
        if "scale" in section.options and float(section.options["scale"]) != 1:
            raise opts._err("scale", "[upsample] scale other than 1 is not supported")
        return UpsampleSpec(stride=stride)
    if kind == "maxpool":
        size = opts.int("size", 1, minimum=1, limit="kernel")
        stride = opts.int("stride", 1, minimum=1, limit="stride")
        if "padding" in section.options and opts.int("padding") != size - 1:
            raise opts._err("padding", "[maxpool] padding other than size-1 is not supported")
        if stride != 1 and not size == stride == 2:
            raise opts._err("stride", f"[maxpool] size={size} stride={stride} is not supported "
                                      f"(use stride 1, or size 2 with stride 2)")
        return MaxpoolSpec(size=size, stride=stride)
    if kind == "yolo":
        classes = opts.int("classes", 20, minimum=1, limit="classes")
        anchors = np.asarray(opts.floats("anchors"), dtype=np.float32)
        if anchors.size == 0 or anchors.size % 2:
            raise opts._err("anchors", "[yolo] anchors must be a non-empty list of width,height pairs")
        anchors = anchors.reshape(-1, 2)
        num = opts.int("num", len(anchors))
        if num != len(anchors):
            raise opts._err("num", f"[yolo] num={num} but {len(anchors)} anchors are listed")
        mask = opts.ints("mask", list(range(num)))
        for m in mask:
            if not 0 <= m < num:
                raise opts._err("mask", f"[yolo] mask index {m} is outside the {num} anchors")
        return YoloSpec(mask=mask, anchors=anchors, classes=classes)
    raise DarknetError(path, f"section [{kind}] is not supported (supported: "
                             f"{', '.join(LAYER_TYPES)})", line=section.line, where=f"layer {index}")


def _infer_shapes(cfg: DarknetCfg) -> None:
    """Fill ``channels`` and ``stride`` of each layer; check that every layer fits its inputs."""
    layers = cfg.layers
    for layer in layers:
        prev_c = layers[layer.index - 1].channels if layer.index else cfg.channels
        prev_s = layers[layer.index - 1].stride if layer.index else 1
        spec = layer.spec
        if layer.kind in ("convolutional", "maxpool", "upsample", "yolo") and layer.index:
            if layers[layer.index - 1].kind == "yolo":
                raise cfg.error("a layer cannot take a [yolo] layer's output as input", layer)
        if isinstance(spec, ConvSpec):
            layer.channels, layer.stride = spec.filters, prev_s * spec.stride
        elif isinstance(spec, MaxpoolSpec):
            layer.channels, layer.stride = prev_c, prev_s * spec.stride
        elif isinstance(spec, UpsampleSpec):
            if prev_s % spec.stride:
                raise cfg.error(f"upsampling stride-{prev_s} features by {spec.stride} "
                                f"does not give an integer stride", layer)
            layer.channels, layer.stride = prev_c, prev_s // spec.stride
        elif isinstance(spec, ShortcutSpec):
            src = layers[spec.source]
            if src.kind == "yolo":
                raise cfg.error(f"[shortcut] from a [yolo] layer ({src.index}) is not supported", layer)
            if (src.channels, src.stride) != (prev_c, prev_s):
                raise cfg.error(f"[shortcut] adds layer {src.index} ({src.channels} channels, "
                                f"stride {src.stride}) to layer {layer.index - 1} ({prev_c} "
                                f"channels, stride {prev_s}): shapes differ", layer)
            layer.channels, layer.stride = prev_c, prev_s
        elif isinstance(spec, RouteSpec):
            srcs = [layers[i] for i in spec.sources]
            for s in srcs:
                if s.kind == "yolo":
                    raise cfg.error(f"[route] to a [yolo] layer ({s.index}) is not supported", layer)
            if len({s.stride for s in srcs}) > 1:
                raise cfg.error("[route] concatenates layers of different strides: "
                                + ", ".join(f"{s.index} (stride {s.stride})" for s in srcs), layer)
            layer.channels, layer.stride = sum(s.channels for s in srcs), srcs[0].stride
        elif isinstance(spec, YoloSpec):
            expected = len(spec.mask) * (spec.classes + 5)
            if prev_c != expected:
                raise cfg.error(f"[yolo] input has {prev_c} channels but mask, classes give "
                                f"{len(spec.mask)} * ({spec.classes} + 5) = {expected}", layer)
            layer.channels, layer.stride = prev_c, prev_s


def parse_cfg_text(text: str, path: Optional[PathLike] = None) -> DarknetCfg:
    """Parse cfg ``text``; ``path`` is only used in error messages."""
    spath = None if path is None else str(path)
    sections = _split_sections(text, spath)
    if not sections or sections[0].kind not in ("net", "network"):
        raise DarknetError(spath, "a cfg must start with a [net] section",
                           line=sections[0].line if sections else None)
    net_sec = sections[0]
    net_opts = _Options(net_sec, spath, "[net]")
    cfg = DarknetCfg(path=spath, net=dict(net_sec.options), layers=[],
                     width=net_opts.int("width", 416, minimum=1, limit="image side"),
                     height=net_opts.int("height", 416, minimum=1, limit="image side"),
                     channels=net_opts.int("channels", 3, minimum=1, limit="channels"))
    for index, section in enumerate(sections[1:]):
        spec = _parse_layer(section, index, spath)
        cfg.layers.append(Layer(index=index, kind=section.kind, spec=spec, line=section.line))
    if not cfg.layers:
        raise DarknetError(spath, "the cfg has no layers after [net]")
    _infer_shapes(cfg)
    return cfg


def parse_cfg(path: PathLike) -> DarknetCfg:
    """Read and parse a Darknet cfg file."""
    try:
        with open(path, encoding="utf-8-sig") as f:
            text = f.read()
    except OSError as e:
        raise DarknetError(path, f"cannot read cfg file: {e.strerror or e}") from None
    except UnicodeDecodeError:
        raise DarknetError(path, "cfg file is not UTF-8 text") from None
    return parse_cfg_text(text, path)


def _fmt_num(v: float) -> str:
    return str(int(round(v))) if abs(v - round(v)) < 1e-9 else f"{v:g}"


def format_layer(layer: Layer) -> str:
    """One layer as cfg text (the options that define it; relative references as Darknet writes)."""
    s = layer.spec
    if isinstance(s, ConvSpec):
        body = [f"batch_normalize={int(s.batch_normalize)}"] if s.batch_normalize else []
        pad = ["pad=1"] if s.pad == s.size // 2 else [f"padding={s.pad}"]
        body += [f"filters={s.filters}", f"size={s.size}", f"stride={s.stride}", *pad,
                 f"activation={s.activation}"]
    elif isinstance(s, ShortcutSpec):
        body = [f"from={s.source - layer.index}", f"activation={s.activation}"]
    elif isinstance(s, RouteSpec):
        refs = [str(i - layer.index) if i >= layer.index - 4 else str(i) for i in s.sources]
        body = ["layers = " + ", ".join(refs)]
    elif isinstance(s, UpsampleSpec):
        body = [f"stride={s.stride}"]
    elif isinstance(s, MaxpoolSpec):
        body = [f"size={s.size}", f"stride={s.stride}"]
    else:
        anchors = ",  ".join(f"{_fmt_num(w)},{_fmt_num(h)}" for w, h in s.anchors)
        body = ["mask = " + ",".join(str(m) for m in s.mask), f"anchors = {anchors}",
                f"classes={s.classes}", f"num={len(s.anchors)}"]
    return f"[{layer.kind}]\n" + "\n".join(body) + "\n"


def format_cfg(net: Dict[str, str], layers: Sequence[Layer]) -> str:
    """Cfg text for ``[net]`` options and ``layers``."""
    net_text = "[net]\n" + "".join(f"{k}={v}\n" for k, v in net.items())
    return "\n".join([net_text, *(format_layer(l) for l in layers)])


def equivalent(a: DarknetCfg, b: DarknetCfg) -> bool:
    """Same layers with the same specs (comments, option order and [net] training options ignored)."""
    if (a.channels, len(a.layers)) != (b.channels, len(b.layers)):
        return False
    for la, lb in zip(a.layers, b.layers):
        if la.kind != lb.kind or type(la.spec) is not type(lb.spec):
            return False
        if isinstance(la.spec, YoloSpec):
            if (la.spec.mask != lb.spec.mask or la.spec.classes != lb.spec.classes
                    or not np.array_equal(la.spec.anchors, lb.spec.anchors)):
                return False
        elif la.spec != lb.spec:
            return False
    return True
