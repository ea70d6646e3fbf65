"""Load weights into a body by layer name, skipping (and reporting) layers whose shapes differ.

Keras 3 ``.weights.h5`` files name layers by class and position, not by layer name, and
``load_weights(skip_mismatch=True)`` cannot match by name. So the source is first read into a model
of its own architecture (``.keras``: as saved; ``.weights.h5``: a yolo3 body rebuilt with the class
count read from the output convolutions; legacy Keras 2 ``.h5``: groups named after layers), then
copied layer by layer into the target by name. Typical use: pretrained COCO weights into a model
with another class count, where the ``output_s*`` layers are skipped, or with ``head_anchors``
partly loaded (their box and objectness channels, :mod:`yolo3.checkpoint.head_transfer`). Sources
with other names (keras-yolo3's ``.h5``, models converted from Darknet) are renamed first by
:mod:`yolo3.checkpoint.weight_names`.
"""
from __future__ import annotations

import logging
import os
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Tuple

import keras

from yolo3.checkpoint.head_transfer import transfer_head
from yolo3.checkpoint.saving import layers_with_weights, read_layer_weights
from yolo3.checkpoint.weight_names import Arrays, WeightsError, rename_for_model
from yolo3.config.architectures import OUTPUT_PREFIX
from yolo3.config.specs import specs_preferring
from yolo3.core.deprecation import accepts_old_keywords

logger = logging.getLogger(__name__)

__all__ = ["LoadReport", "load_weights_by_name", "WeightsError"]


@dataclass
class LoadReport:
    """Which target layers got weights, which only their box and objectness channels (output
    layers of another class count, ``partial``), and which were skipped (``(name, reason)``)."""

    loaded: List[str] = field(default_factory=list)
    skipped: List[Tuple[str, str]] = field(default_factory=list)
    partial: List[str] = field(default_factory=list)
    darknet_layout: Optional[str] = None  # converted source: the cfg layout it was mapped by
    unmapped: List[str] = field(default_factory=list)  # converted source layers with no yolo3 name
    keras_yolo3: Optional[str] = None  # keras-yolo3 .h5 source: what was mapped, in words

    def summary(self) -> str:
        lines = [f"loaded {len(self.loaded)} layers, skipped {len(self.skipped)}"]
        if self.partial:
            lines[0] += (f", {len(self.partial)} output layers of another class count with their "
                         f"box and objectness channels ({', '.join(self.partial)})")
        if self.darknet_layout:
            lines.append(f"  converted Darknet model, mapped by the {self.darknet_layout} cfg layout")
        if self.keras_yolo3:
            lines.append(f"  keras-yolo3 .h5: {self.keras_yolo3}")
        lines += [f"  skipped {name}: {reason}" for name, reason in self.skipped]
        lines += [f"  not in the {self.darknet_layout} mapping (unused): {name}"
                  for name in self.unmapped]
        return "\n".join(lines)


@accepts_old_keywords(model_type="variant")
def load_weights_by_name(model: keras.Model, path: os.PathLike, variant: Optional[str] = None,
                         num_anchors: int = 3, verbose: bool = True,
                         head_anchors: Optional[int] = None) -> LoadReport:
    """Copy weights from ``path`` into ``model``'s layers with the same names and shapes.

    Three steps: read the file (:func:`yolo3.checkpoint.saving.read_layer_weights`; a
    ``.weights.h5`` is tried on ``variant``'s body first), rename its layers for the model
    (:func:`yolo3.checkpoint.weight_names.rename_for_model`: a keras-yolo3 ``.h5`` or a converted
    Darknet model), assign by name. Layers missing from the file or with other shapes are skipped
    and listed in the report (and logged when ``verbose``); converted layers without a yolo3 name
    are listed as ``unmapped``. With ``head_anchors`` (the model's anchors per output), an output
    layer whose class count differs from the file's takes the file's box and objectness channels and
    keeps its class channels (:func:`yolo3.checkpoint.head_transfer.transfer_head`; listed as
    ``partial``). Raises ``WeightsError`` when no layer at all matches, or when a converted source
    fits no known layout.
    """
    path = os.fspath(path)
    candidates = specs_preferring(variant)
    source = read_layer_weights(path, candidates, num_anchors)
    targets = layers_with_weights(model)
    renaming = rename_for_model(path, source, [layer.name for layer in model.layers], model.name,
                                {name: getattr(layer, "epsilon", None)
                                 for name, layer in targets.items()})
    report = LoadReport(darknet_layout=renaming.darknet_layout, unmapped=renaming.unmapped,
                        keras_yolo3=renaming.keras_yolo3)
    _assign(targets, renaming.arrays, report, head_anchors)
    if not report.loaded:
        raise WeightsError(f"{path}: no layer matches the model by name and shape")
    if verbose:
        logger.info("weights from %s: %s", path, report.summary())
    return report


def _assign(targets: Dict[str, keras.layers.Layer], arrays: Arrays, report: LoadReport,
            head_anchors: Optional[int] = None) -> None:
    """Set each target layer's weights from ``arrays`` of its name and shapes; an output layer of
    another class count its box and objectness channels (with ``head_anchors``); else a skip."""
    for name, layer in targets.items():
        if name not in arrays:
            report.skipped.append((name, "not in the weights file"))
            continue
        want = [tuple(w.shape) for w in layer.weights]
        have = [tuple(a.shape) for a in arrays[name]]
        if want != have and head_anchors and name.startswith(OUTPUT_PREFIX):
            merged = transfer_head(arrays[name], layer.get_weights(), head_anchors)
            if merged is not None:
                layer.set_weights(merged)
                report.partial.append(name)
                continue
        if want != have:
            report.skipped.append((name, f"shape {have} in the file, {want} in the model"))
            continue
        layer.set_weights(arrays[name])
        report.loaded.append(name)
