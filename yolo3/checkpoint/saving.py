"""Keras model files: atomic saves with embedded model info, reading them back with yolo3's
Keras objects registered, and reading any weights file into ``{layer name: [arrays]}``.

Every file is written through :func:`yolo3.core.fileio.atomic_write` (never half of one). A
``.keras`` body saved with a :class:`~yolo3.checkpoint.metadata.ModelInfo` carries it inside (see
:mod:`yolo3.checkpoint.metadata`). Loading a body with its facts from any model file is
:mod:`yolo3.checkpoint.loading`'s job.
"""
from __future__ import annotations

import os
import re
import warnings
import zipfile
from pathlib import Path
from typing import Callable, Dict, List, Optional, Sequence, Tuple

import keras
import numpy as np

import yolo3.modeling.anchor_free_loss  # noqa: F401  registers AnchorFreeLoss
import yolo3.modeling.loss  # noqa: F401  registers YoloLoss, identity_loss
import yolo3.modeling.schedules  # noqa: F401  registers WarmupCosine
from yolo3.checkpoint.metadata import ModelInfo, embed_info, read_info
from yolo3.checkpoint.weight_names import Arrays, WeightsError
from yolo3.config.specs import anchor_specs
from yolo3.core.errors import FileFormatError, PathLike, Yolo3Error
from yolo3.core.fileio import atomic_write
from yolo3.modeling.bodies import build_spec_body
from yolo3.modeling.graph_surgery import keras_batch_norms  # also registers FoldedBatchNorm
from yolo3.modeling.keras_compat import all_layers

__all__ = ["weights_writer", "model_writer", "atomic_save_weights", "atomic_save_model",
           "load_keras_model", "build_from_weights", "output_channels", "read_layer_weights",
           "layers_with_weights", "keras_refusal"]


def weights_writer(model) -> Callable[[str], None]:
    """A writer of ``model``'s weights: ``writer(path)`` saves them (a ``.weights.h5`` name)."""
    return lambda path: model.save_weights(path)


def model_writer(model, info: Optional[ModelInfo] = None) -> Callable[[str], None]:
    """A writer of ``model`` (without optimizer) with ``info`` inside: ``writer(path)`` saves it
    (a ``.keras`` name); yolo3's fused batch norms are saved as Keras's own layer
    (:func:`yolo3.modeling.graph_surgery.keras_batch_norms`), so the file loads in plain Keras."""
    model = keras_batch_norms(model)

    def write(path: str) -> None:
        model.save(path, include_optimizer=False)
        if info is not None:
            embed_info(path, info)
    return write


def atomic_save_weights(model, path: PathLike) -> Path:
    """``model.save_weights(path)`` (a ``.weights.h5`` name), atomically."""
    if not str(path).endswith(".weights.h5"):
        raise ValueError(f"weights file name must end in .weights.h5, got {path}")
    return atomic_write(path, weights_writer(model), suffix=".weights.h5")


def atomic_save_model(model, path: PathLike, info: Optional[ModelInfo] = None) -> Path:
    """``model.save(path)`` (a ``.keras`` name, without optimizer), with ``info`` inside,
    atomically (:func:`model_writer`)."""
    if not str(path).endswith(".keras"):
        raise ValueError(f"model file name must end in .keras, got {path}")
    return atomic_write(path, model_writer(model, info), suffix=".keras")


def load_keras_model(path: PathLike) -> Tuple[object, Optional[ModelInfo]]:
    """``(model, info)`` of a ``.keras`` file (info None when it carries none); FileFormatError
    naming the file when it is missing or Keras cannot read it. yolo3's own Keras objects are
    registered by importing this module."""
    path = os.fspath(path)
    if not os.path.isfile(path):
        raise FileFormatError(path, "model file not found")
    if not zipfile.is_zipfile(path):
        raise FileFormatError(path, "not a .keras model: a .keras file is a zip archive, and this "
                                    "one is not (a different file, or one cut short while written)")
    info = read_info(path)
    try:
        model = keras.models.load_model(path, compile=False)
    except Exception as e:  # noqa: BLE001 - Keras raises many types; report file and reason
        raise FileFormatError(path, f"cannot load Keras model: {e}") from None
    return model, info


def output_channels(model) -> List[int]:
    """Channels of each output of ``model`` (a body: ``A * (5 + C)`` per scale)."""
    return [int(o.shape[-1]) for o in model.outputs]


def build_from_weights(path: PathLike, num_classes: int, candidates: Sequence, num_anchors: int,
                       anchors_per_scale: Optional[int] = None):
    """``(body, spec)``: the first of the ``candidates`` specs whose body for ``num_classes`` (and
    ``num_anchors`` anchors split evenly over its scales, unless ``anchors_per_scale`` is given)
    takes the ``.weights.h5`` file ``path``; FileFormatError listing every refusal otherwise."""
    errors = []
    for spec in candidates:
        # an anchor-free spec ignores the anchor count
        body = build_spec_body(spec, num_classes,
                               anchors_per_scale or num_anchors // spec.num_scales)
        try:
            with warnings.catch_warnings():  # Keras warns on its way to the error reported below
                warnings.simplefilter("ignore")
                body.load_weights(os.fspath(path))
            return body, spec
        except Exception as e:  # noqa: BLE001 - Keras raises many types for a wrong file
            errors.append(f"{spec.name}: {keras_refusal(e)}")
    raise FileFormatError(path, f"weights do not fit a body for {num_classes} classes "
                                f"({'; '.join(errors) or 'no candidate variant'})")


_SHAPES = re.compile(r"variable\.shape=(\([^)]*\)), Received: value\.shape=(\([^)]*\))")
_VARIABLE = re.compile(r"Target variable: <Variable path=([^,>]+)")


def keras_refusal(error: Exception) -> str:
    """Keras's refusal of a weights file in one line: its first line and the first shape mismatch
    it names (``head_s16_conv1_conv/kernel: the body has (3, 3, 384, 256), the file (3, 3, 256,
    512)``); Keras's own message goes on with the whole tensors."""
    text = str(error).strip()
    line = text.splitlines()[0] if text else type(error).__name__
    shapes, variable = _SHAPES.search(text), _VARIABLE.search(text)
    if shapes:
        where = f"{variable.group(1)}: " if variable else ""
        line += f" ({where}the body has {shapes.group(1)}, the file {shapes.group(2)})"
    return line


def layers_with_weights(model) -> Dict[str, object]:
    """``{name: layer}`` of every layer of ``model`` (nested ones too) that has weights."""
    return {layer.name: layer for layer in all_layers(model)
            if layer.weights and not isinstance(layer, keras.Model)}


def read_layer_weights(path: PathLike, candidates: Optional[Sequence] = None,
                       num_anchors: int = 3) -> Arrays:
    """``{layer name: [arrays]}`` from a ``.keras``, yolo3 ``.weights.h5`` or legacy Keras 2
    ``.h5`` file (a ``.weights.h5`` is read into the first of the ``candidates`` specs whose body
    takes it; default: every variant). WeightsError naming the file when it cannot be read."""
    path = os.fspath(path)
    if not os.path.exists(path):
        raise WeightsError(f"{path}: weights file not found")
    if path.endswith(".keras") or zipfile.is_zipfile(path):
        source, _ = load_keras_model(path)
    else:
        legacy = _read_legacy_h5(path)
        if legacy is not None:
            return legacy
        source = _rebuild_body(path, candidates, num_anchors)
    return {name: [np.asarray(w) for w in layer.get_weights()]
            for name, layer in layers_with_weights(source).items()}


def _rebuild_body(path: str, candidates: Optional[Sequence], num_anchors: int):
    """The body a yolo3 ``.weights.h5`` was saved from, its class count read from the file."""
    filters = _output_filters(path)
    if not filters or filters[0] % num_anchors or filters[0] // num_anchors <= 5:
        raise WeightsError(f"{path}: not a yolo3 body weights file (no output convolutions found)")
    try:
        body, _ = build_from_weights(path, filters[0] // num_anchors - 5,
                                     candidates if candidates is not None else anchor_specs(),
                                     num_anchors, anchors_per_scale=num_anchors)
    except Yolo3Error as e:
        raise WeightsError(f"{path}: does not fit a yolo3 body ({e.reason})") from None
    return body


_BN_ORDER = ("gamma", "beta", "moving_mean", "moving_variance")


def _read_legacy_h5(path: str) -> Optional[Dict[str, List[np.ndarray]]]:
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


