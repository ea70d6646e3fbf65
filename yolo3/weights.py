"""Load weights into a body by layer name, skipping (and reporting) layers whose shapes differ.

Keras 3 ``.weights.h5`` files name layers by class and position, not by layer name, and
``load_weights(skip_mismatch=True)`` cannot match by name. So the source is first read into a model
of its own architecture (``.keras``: as saved; ``.weights.h5``: a yolo3 body rebuilt with the class
count read from the output convolutions; legacy Keras 2 ``.h5``: groups named after layers), then
copied layer by layer into the target by name. Typical use: pretrained COCO weights into a model with
another class count, where the ``output_s*`` layers are skipped.

A model converted from Darknet (:mod:`yolo3.darknet.convert`: layers ``conv_<i>``, ``bn_<i>`` named
by cfg index) is renamed to yolo3 names first, through :func:`yolo3.darknet.layout.body_to_cfg_index`
(derived from the same architecture as the bodies and the exporter's cfgs): a variant's own cfg into
its body, or a backbone cfg (darknet53.cfg, or any cfg starting with Darknet-53) into the
``backbone_*`` layers of the variants built on it (:attr:`yolo3.specs.ModelSpec.darknet_sources`).
"""
from __future__ import annotations

import os
import zipfile
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Sequence, Set, Tuple

import keras
import numpy as np

from yolo3.darknet.layout import (LAYOUT_KINDS, block_layer_names, body_to_cfg_index,
                                  converted_layer)
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

    def summary(self) -> str:
        lines = [f"loaded {len(self.loaded)} layers, skipped {len(self.skipped)}"]
        if self.darknet_layout:
            lines.append(f"  converted Darknet model, mapped by the {self.darknet_layout} cfg layout")
        lines += [f"  skipped {name}: {reason}" for name, reason in self.skipped]
        lines += [f"  not in the {self.darknet_layout} mapping (unused): {name}"
                  for name in self.unmapped]
        return "\n".join(lines)


def _layers_with_weights(model: keras.Model) -> Dict[str, keras.layers.Layer]:
    return {layer.name: layer for layer in all_layers(model)
            if layer.weights and not isinstance(layer, keras.Model)}


def _legacy_h5(path: str) -> Optional[Dict[str, List[np.ndarray]]]:
    """Keras 2 ``save_weights`` files: top-level ``layer_names`` and per-layer ``weight_names``."""
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
                out[name] = [np.asarray(group[n]) for n in names]
        return out


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
    printed when ``verbose``). A converted Darknet source is renamed to yolo3 names first (see the
    module docstring); its layers without a yolo3 name are listed as ``unmapped``. Raises
    ``WeightsError`` when no layer at all matches, or when a converted source fits no known layout.
    """
    types = spec_names()
    if model_type:
        types = [get_spec(model_type).name] + [t for t in types if t != get_spec(model_type).name]
    source = read_layer_weights(path, types, num_anchors)
    report = LoadReport()
    targets = _layers_with_weights(model)
    conv_indices = _converted_conv_indices(source)
    if conv_indices is not None:
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
