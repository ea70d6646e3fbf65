"""Load weights into a body by layer name, skipping (and reporting) layers whose shapes differ.

Keras 3 ``.weights.h5`` files name layers by class and position, not by layer name, and
``load_weights(skip_mismatch=True)`` cannot match by name. So the source is first read into a model
of its own architecture (``.keras``: as saved; ``.weights.h5``: a yolo3 body rebuilt with the class
count read from the output convolutions; legacy Keras 2 ``.h5``: groups named after layers), then
copied layer by layer into the target by name. Typical use: pretrained COCO weights into a model with
another class count, where the ``output_s*`` layers are skipped. Sources with other names
(keras-yolo3's ``.h5``, models converted from Darknet) are renamed first by
:mod:`yolo3.weight_names`.
"""
from __future__ import annotations

import logging
import os
import zipfile
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Sequence, Tuple

import keras
import numpy as np

from yolo3.deprecation import renamed_keyword
from yolo3.errors import Yolo3Error
from yolo3.keras_compat import all_layers
from yolo3.saving import build_from_weights, load_keras_model
from yolo3.specs import get_spec, spec_names
from yolo3.weight_names import (WeightsError, converted_conv_indices, darknet_layout,
                                keras_yolo3_order, output_filters, read_legacy_h5, rename_converted,
                                rename_keras_yolo3, target_variant)

logger = logging.getLogger(__name__)

__all__ = ["LoadReport", "load_weights_by_name", "read_layer_weights", "WeightsError"]


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


def layers_with_weights(model: keras.Model) -> Dict[str, keras.layers.Layer]:
    return {layer.name: layer for layer in all_layers(model)
            if layer.weights and not isinstance(layer, keras.Model)}


def _rebuild_body(path: str, variants: Sequence[str], num_anchors: int) -> keras.Model:
    filters = output_filters(path)
    if not filters or filters[0] % num_anchors or filters[0] // num_anchors <= 5:
        raise WeightsError(f"{path}: not a yolo3 body weights file (no output convolutions found)")
    num_classes = filters[0] // num_anchors - 5
    candidates = [get_spec(t) for t in variants]
    try:
        body, _ = build_from_weights(path, num_classes, candidates, num_anchors,
                                     anchors_per_scale=num_anchors)
    except Yolo3Error as e:
        raise WeightsError(f"{path}: does not fit a yolo3 body ({e.reason})") from None
    return body


def read_layer_weights(path: os.PathLike, variants: Optional[Sequence[str]] = None,
                       num_anchors: int = 3) -> Dict[str, List[np.ndarray]]:
    """``{layer name: [arrays]}`` from a ``.keras``, yolo3 ``.weights.h5`` or legacy ``.h5`` file
    (a ``.weights.h5`` is read into the first of ``variants`` whose body takes it)."""
    path = os.fspath(path)
    if not os.path.exists(path):
        raise WeightsError(f"{path}: weights file not found")
    if path.endswith(".keras") or zipfile.is_zipfile(path):
        source, _ = load_keras_model(path)
    else:
        legacy = read_legacy_h5(path)
        if legacy is not None:
            return legacy
        source = _rebuild_body(path, variants or spec_names(), num_anchors)
    return {name: [np.asarray(w) for w in layer.get_weights()]
            for name, layer in layers_with_weights(source).items()}


def load_weights_by_name(model: keras.Model, path: os.PathLike, variant: Optional[str] = None,
                         num_anchors: int = 3, verbose: bool = True, *,
                         model_type: Optional[str] = None) -> LoadReport:
    """Copy weights from ``path`` into ``model``'s layers with the same names and shapes.

    Layers missing from the file or with other shapes are skipped and listed in the report (and
    logged when ``verbose``). A converted Darknet source or a keras-yolo3 ``.h5`` is renamed to
    yolo3 names first (see the module docstring); converted layers without a yolo3 name are listed
    as ``unmapped``. Raises
    ``WeightsError`` when no layer at all matches, or when a converted source fits no known layout.
    """
    variant = renamed_keyword("variant", variant, "model_type", model_type)
    types = spec_names()
    if variant:
        types = [get_spec(variant).name] + [t for t in types if t != get_spec(variant).name]
    source = read_layer_weights(path, types, num_anchors)
    report = LoadReport()
    targets = layers_with_weights(model)
    conv_indices = converted_conv_indices(source)
    order = keras_yolo3_order(source)
    if order is not None:
        kind = target_variant([layer.name for layer in model.layers], model.name, os.fspath(path))
        if kind is None:
            raise WeightsError(f"{os.fspath(path)}: a keras-yolo3 file maps only onto a yolo3 body")
        epsilons = {name: getattr(layer, "epsilon", None) for name, layer in targets.items()}
        source, report.keras_yolo3 = rename_keras_yolo3(os.fspath(path), source, get_spec(kind),
                                                        order, epsilons)
    elif conv_indices is not None:
        kind = target_variant([layer.name for layer in model.layers], model.name, os.fspath(path))
        if kind is not None:
            report.darknet_layout = darknet_layout(os.fspath(path), kind, conv_indices)
            source, report.unmapped = rename_converted(source, report.darknet_layout, set(targets))
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
        logger.info("weights from %s: %s", os.fspath(path), report.summary())
    return report
