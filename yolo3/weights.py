"""Load weights into a body by layer name, skipping (and reporting) layers whose shapes differ.

Keras 3 ``.weights.h5`` files name layers by class and position, not by layer name, and
``load_weights(skip_mismatch=True)`` cannot match by name. So the source is first read into a model
of its own architecture (``.keras``: as saved; ``.weights.h5``: a yolo3 body rebuilt with the class
count read from the output convolutions; legacy Keras 2 ``.h5``: groups named after layers), then
copied layer by layer into the target by name. Typical use: pretrained COCO weights into a model with
another class count, where the ``output_s*`` layers are skipped.

keras-yolo3's ``.h5`` files (whole Keras 2 models written by its ``convert.py``, and ``save_weights``
of its training models) name layers ``conv2d_N``, ``batch_normalization_N`` in creation order, which
is Darknet's cfg order and the order of the variant's blocks (:meth:`yolo3.specs.ModelSpec.blocks`):
they are mapped by that order, and each batch norm's variance is raised by keras-yolo3's epsilon
(Keras's 1e-3) minus the body's (Darknet's 1e-6), so the outputs are keras-yolo3's.

A model converted from Darknet (:mod:`yolo3.darknet.convert`: layers ``conv_<i>``, ``bn_<i>`` named
by cfg index) is renamed to yolo3 names first, through :func:`yolo3.darknet.layout.body_to_cfg_index`
(derived from the same architecture as the bodies and the exporter's cfgs): a variant's own cfg into
its body, or a backbone cfg (darknet53.cfg, or any cfg starting with Darknet-53) into the
``backbone_*`` layers of the variants built on it (:attr:`yolo3.specs.ModelSpec.darknet_sources`).
"""
from __future__ import annotations

import os
import re
import zipfile
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Sequence, Set, Tuple

import keras
import numpy as np

from yolo3.darknet.layout import (LAYOUT_KINDS, block_layer_names, body_to_cfg_index,
                                  converted_layer, layout_blocks)
from yolo3.errors import Yolo3Error
from yolo3.keras_compat import all_layers
from yolo3.specs import get_spec, spec_of_layers, spec_names

__all__ = ["LoadReport", "load_weights_by_name", "read_layer_weights"]


class WeightsError(Yolo3Error, ValueError):
    """A weights file that cannot be read or matched to the model."""


@dataclass
class LoadReport:
    """Which target layers got weights and which were skipped (``(name, reason)``)."""

    loaded: List[str] = field(default_factory=list)
    skipped: List[Tuple[str, str]] = field(default_factory=list)
    darknet_layout: Optional[str] = None  # converted source: the cfg layout it was mapped by
    unmapped: List[str] = field(default_factory=list)  # converted source layers with no yolo3 name
    keras_yolo3: Optional[str] = None  # keras-yolo3 .h5 source: what was mapped, in words

    def summary(self) -> str:
        lines = [f"loaded {len(self.loaded)} layers, skipped {len(self.skipped)}"]
        if self.darknet_layout:
            lines.append(f"  converted Darknet model, mapped by the {self.darknet_layout} cfg layout")
        if self.keras_yolo3:
            lines.append(f"  keras-yolo3 .h5: {self.keras_yolo3}")
        lines += [f"  skipped {name}: {reason}" for name, reason in self.skipped]
        lines += [f"  not in the {self.darknet_layout} mapping (unused): {name}"
                  for name in self.unmapped]
        return "\n".join(lines)


def _layers_with_weights(model: keras.Model) -> Dict[str, keras.layers.Layer]:
    return {layer.name: layer for layer in all_layers(model)
            if layer.weights and not isinstance(layer, keras.Model)}


def _legacy_h5(path: str) -> Optional[Dict[str, List[np.ndarray]]]:
    """Keras 2 HDF5 files (``save_weights``, or ``save`` under ``model_weights``): top-level
    ``layer_names`` and per-layer ``weight_names``; ``{layer: [arrays in weight_names order]}``.
    Batch norms come as ``[gamma, beta, moving_mean, moving_variance]`` whatever the stored order."""
    import h5py
    with h5py.File(path, "r") as f:
        root = f["model_weights"] if "model_weights" in f else f
        if "layer_names" not in root.attrs:
            return None
        out = {}
        for raw in root.attrs["layer_names"]:
            name = raw.decode() if isinstance(raw, bytes) else str(raw)
            group = root[name]
            names = [n.decode() if isinstance(n, bytes) else str(n)
                     for n in group.attrs.get("weight_names", [])]
            if names:
                arrays = {n.rsplit("/", 1)[-1].split(":")[0]: np.asarray(group[n]) for n in names}
                if set(arrays) == set(_BN_ORDER):
                    out[name] = [arrays[k] for k in _BN_ORDER]
                else:
                    out[name] = [np.asarray(group[n]) for n in names]
        return out


_BN_ORDER = ("gamma", "beta", "moving_mean", "moving_variance")
_KERAS2_NAME = re.compile(r"^(conv2d|batch_normalization)(?:_(\d+))?$")
KERAS_YOLO3_BN_EPSILON = 1e-3  # Keras's default, which keras-yolo3's models were trained with


def keras_yolo3_order(source: Dict[str, List[np.ndarray]]) -> Optional[Tuple[List[str], List[str]]]:
    """``(conv layers, batch-norm layers)`` in creation order when every layer with weights in
    ``source`` has a Keras 2 default name (keras-yolo3's files), else None."""
    convs, bns = [], []
    for name in source:
        m = _KERAS2_NAME.match(name)
        if not m:
            return None
        (convs if m.group(1) == "conv2d" else bns).append((int(m.group(2) or 0), name))
    if not convs:
        return None
    return [n for _, n in sorted(convs)], [n for _, n in sorted(bns)]


def shift_variance(variance: np.ndarray, from_epsilon: float, to_epsilon: float) -> np.ndarray:
    """float32 variances ``v'`` for a batch norm with ``to_epsilon`` such that ``v' + to_epsilon``
    equals ``v + from_epsilon`` in float32 (exactly, where a float32 ``v'`` can give it), so the
    layer normalises exactly as the source did with its epsilon."""
    target = np.asarray(variance, np.float32) + np.float32(from_epsilon)
    shifted = (target.astype(np.float64) - to_epsilon).astype(np.float32)
    for _ in range(4):  # the rounded difference may be an ulp off: step to the exact one
        got = shifted + np.float32(to_epsilon)
        if np.array_equal(got, target):
            break
        shifted = np.where(got < target, np.nextafter(shifted, np.float32(np.inf)),
                           np.where(got > target, np.nextafter(shifted, np.float32(-np.inf)),
                                    shifted))
    return shifted


def keras_yolo3_spec(path: str, order: Tuple[List[str], List[str]], model_type: Optional[str] = None):
    """The variant of a keras-yolo3 file: ``model_type``'s, else the one with as many blocks as the
    file has convolutions; WeightsError when none fits."""
    from yolo3.specs import all_specs
    candidates = [get_spec(model_type)] if model_type else all_specs()
    for spec in candidates:
        if len(spec.blocks()) == len(order[0]):
            return spec
    raise WeightsError(f"{path}: keras-yolo3 file with {len(order[0])} convolutions: "
                       + ", ".join(f"a {s.name} body has {len(s.blocks())}" for s in candidates))


def _rename_keras_yolo3(path: str, source: Dict[str, List[np.ndarray]], spec, order,
                        targets: Dict[str, keras.layers.Layer]) -> Tuple[Dict[str, List[np.ndarray]], str]:
    """keras-yolo3 layer names -> the ``spec`` body's, by creation order (the variant's blocks, or
    a backbone layout's for a backbone-only file such as keras-yolo3's darknet53_weights.h5);
    batch-norm variances shifted from keras-yolo3's epsilon to the target's. Returns (renamed, a
    summary)."""
    convs, bns = order
    layouts = {layout: layout_blocks(layout) for layout in spec.darknet_sources}
    fitting = [name for name, blocks in layouts.items() if len(blocks) == len(convs)]
    if not fitting:
        raise WeightsError(f"{path}: {len(convs)} convolutions in keras-yolo3 order, but a "
                           f"{spec.name} body has {len(layouts[spec.name])}"
                           + "".join(f" (its {b} backbone {len(layouts[b])})" for b in layouts
                                     if b != spec.name))
    layout = fitting[0]
    names = set(targets)
    pairs = [block_layer_names(block, names) for block in layouts[layout]]
    bn_targets = [bn for _, bn in pairs if bn is not None]
    if len(bns) != len(bn_targets):
        raise WeightsError(f"{path}: {len(bns)} batch norms in keras-yolo3 order, but the "
                           f"{layout} layout has {len(bn_targets)}")
    renamed = {conv: source[name] for (conv, _), name in zip(pairs, convs)}
    for bn, name in zip(bn_targets, bns):
        gamma, beta, mean, variance = source[name]
        epsilon = float(getattr(targets.get(bn), "epsilon", KERAS_YOLO3_BN_EPSILON))
        renamed[bn] = [gamma, beta, mean, shift_variance(variance, KERAS_YOLO3_BN_EPSILON, epsilon)]
    onto = f"a {spec.name} body" if layout == spec.name else f"the {layout} backbone of a {spec.name} body"
    return renamed, (f"{len(convs)} convolutions and {len(bns)} batch norms mapped by creation "
                     f"order onto {onto} (variances shifted from keras-yolo3's batch-norm "
                     f"epsilon {KERAS_YOLO3_BN_EPSILON:g} to the body's)")


def _output_filters(path: str) -> List[int]:
    """Output-conv filter counts in a yolo3 body ``.weights.h5`` (the only convolutions with a bias)."""
    import h5py
    found: List[int] = []
    with h5py.File(path, "r") as f:
        def visit(name, obj):
            if isinstance(obj, h5py.Group) and name.endswith("/vars") and "0" in obj and "1" in obj:
                k, b = obj["0"], obj["1"]
                if len(k.shape) == 4 and k.shape[:2] == (1, 1) and b.shape == (k.shape[3],):
                    found.append(int(k.shape[3]))
        f.visititems(visit)
    return found


def _rebuild_body(path: str, model_types: Sequence[str], num_anchors: int) -> keras.Model:
    from yolo3.saving import build_from_weights
    filters = _output_filters(path)
    if not filters or filters[0] % num_anchors or filters[0] // num_anchors <= 5:
        raise WeightsError(f"{path}: not a yolo3 body weights file (no output convolutions found)")
    num_classes = filters[0] // num_anchors - 5
    candidates = [get_spec(t) for t in model_types]
    try:
        body, _ = build_from_weights(path, num_classes, candidates, num_anchors,
                                     anchors_per_scale=num_anchors)
    except Yolo3Error as e:
        raise WeightsError(f"{path}: does not fit a yolo3 body ({e.reason})") from None
    return body


def read_layer_weights(path: os.PathLike, model_types: Optional[Sequence[str]] = None,
                       num_anchors: int = 3) -> Dict[str, List[np.ndarray]]:
    """``{layer name: [arrays]}`` from a ``.keras``, yolo3 ``.weights.h5`` or legacy ``.h5`` file."""
    path = os.fspath(path)
    if not os.path.exists(path):
        raise WeightsError(f"{path}: weights file not found")
    if path.endswith(".keras") or zipfile.is_zipfile(path):
        from yolo3.saving import load_keras_model
        source, _ = load_keras_model(path)
    else:
        legacy = _legacy_h5(path)
        if legacy is not None:
            return legacy
        source = _rebuild_body(path, model_types or spec_names(), num_anchors)
    return {name: [np.asarray(w) for w in layer.get_weights()]
            for name, layer in _layers_with_weights(source).items()}


def _converted_conv_indices(source: Dict[str, List[np.ndarray]]) -> Optional[Set[int]]:
    """cfg indices of the ``conv_<i>`` layers when ``source`` is a converted Darknet model, else None."""
    parsed = [converted_layer(name) for name in source]
    if not parsed or any(p is None for p in parsed):
        return None
    convs = {index for kind, index in parsed if kind == "conv"}
    return convs or None


def _layout_fits(kind: str, conv_indices: Set[int]) -> bool:
    """Whether the converted convs up to the layout's last one are exactly the layout's convs."""
    wanted = set(body_to_cfg_index(kind).values())
    return wanted == {i for i in conv_indices if i <= max(wanted)}


def _darknet_layout(path: str, target: str, conv_indices: Set[int]) -> str:
    """The Darknet layout of a converted source that fits a ``target`` body, or WeightsError."""
    for kind in get_spec(target).darknet_sources:
        if _layout_fits(kind, conv_indices):
            return kind
    found = [k for k in LAYOUT_KINDS if _layout_fits(k, conv_indices)]
    reason = (f"its {found[0]} cfg layout does not fit a {target} body" if found else
              f"its {len(conv_indices)} convolutions (cfg indices {min(conv_indices)}.."
              f"{max(conv_indices)}) follow none of the {', '.join(LAYOUT_KINDS)} cfg layouts")
    raise WeightsError(f"{path}: converted Darknet model: {reason}")


def _target_kind(model: keras.Model, path: str) -> Optional[str]:
    """The variant of a yolo3 body, None for a converted target (names match as they are)."""
    names = [layer.name for layer in model.layers]
    spec = spec_of_layers(names)
    if spec is not None:
        return spec.name
    if "conv_0" in names:
        return None
    raise WeightsError(f"{path}: a converted Darknet model maps only onto a yolo3 body or "
                       f"another converted model, not {model.name!r}")


def _rename_converted(source: Dict[str, List[np.ndarray]], layout: str, target_names: Set[str]
                      ) -> Tuple[Dict[str, List[np.ndarray]], List[str]]:
    """``conv_<i>`` / ``bn_<i>`` -> yolo3 layer names; returns (renamed, unmapped source names)."""
    rename: Dict[str, str] = {}
    for block, index in body_to_cfg_index(layout).items():
        conv, bn = block_layer_names(block, target_names)
        rename[f"conv_{index}"] = conv
        if bn is not None:
            rename[f"bn_{index}"] = bn
    renamed = {rename[name]: arrays for name, arrays in source.items() if name in rename}
    return renamed, sorted((n for n in source if n not in rename), key=_cfg_order)


def _cfg_order(name: str) -> Tuple[int, str]:
    kind, index = converted_layer(name)
    return index, kind


def load_weights_by_name(model: keras.Model, path: os.PathLike, model_type: Optional[str] = None,
                         num_anchors: int = 3, verbose: bool = True) -> LoadReport:
    """Copy weights from ``path`` into ``model``'s layers with the same names and shapes.

    Layers missing from the file or with other shapes are skipped and listed in the report (and
    printed when ``verbose``). A converted Darknet source or a keras-yolo3 ``.h5`` is renamed to
    yolo3 names first (see the module docstring); converted layers without a yolo3 name are listed
    as ``unmapped``. Raises
    ``WeightsError`` when no layer at all matches, or when a converted source fits no known layout.
    """
    types = spec_names()
    if model_type:
        types = [get_spec(model_type).name] + [t for t in types if t != get_spec(model_type).name]
    source = read_layer_weights(path, types, num_anchors)
    report = LoadReport()
    targets = _layers_with_weights(model)
    conv_indices = _converted_conv_indices(source)
    order = keras_yolo3_order(source)
    if order is not None:
        kind = _target_kind(model, os.fspath(path))
        if kind is None:
            raise WeightsError(f"{os.fspath(path)}: a keras-yolo3 file maps only onto a yolo3 body")
        source, report.keras_yolo3 = _rename_keras_yolo3(os.fspath(path), source, get_spec(kind),
                                                         order, targets)
    elif conv_indices is not None:
        kind = _target_kind(model, os.fspath(path))
        if kind is not None:
            report.darknet_layout = _darknet_layout(os.fspath(path), kind, conv_indices)
            source, report.unmapped = _rename_converted(source, report.darknet_layout, set(targets))
    for name, layer in targets.items():
        if name not in source:
            report.skipped.append((name, "not in the weights file"))
            continue
        want = [tuple(w.shape) for w in layer.weights]
        have = [tuple(a.shape) for a in source[name]]
        if want != have:
            report.skipped.append((name, f"shape {have} in the file, {want} in the model"))
            continue
        layer.set_weights(source[name])
        report.loaded.append(name)
    if not report.loaded:
        raise WeightsError(f"{os.fspath(path)}: no layer matches the model by name and shape")
    if verbose:
        print(f"weights from {os.fspath(path)}: {report.summary()}")
    return report
