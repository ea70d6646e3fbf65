"""Keras model files: atomic saves with embedded model info, and reading them back with yolo3's
Keras objects registered.

Every file is written through :func:`yolo3.fileio.atomic_write` (never half of one). A ``.keras``
body saved with a :class:`~yolo3.metadata.ModelInfo` carries it inside (see :mod:`yolo3.metadata`).
Loading a body with its facts from any model file is :mod:`yolo3.loading`'s job.
"""
from __future__ import annotations

import os
import warnings
import zipfile
from pathlib import Path
from typing import List, Optional, Sequence, Tuple

import keras

import yolo3.graph_surgery  # noqa: F401  registers FoldedBatchNorm
import yolo3.loss  # noqa: F401  registers YoloLoss, identity_loss
import yolo3.schedules  # noqa: F401  registers WarmupCosine
from yolo3.bodies import build_spec_body
from yolo3.errors import FileFormatError, PathLike
from yolo3.fileio import atomic_write
from yolo3.metadata import ModelInfo, embed_info, read_info

__all__ = ["atomic_save_weights", "atomic_save_model", "load_keras_model", "build_from_weights",
           "output_channels"]


def atomic_save_weights(model, path: PathLike) -> Path:
    """``model.save_weights(path)`` (a ``.weights.h5`` name), atomically."""
    if not str(path).endswith(".weights.h5"):
        raise ValueError(f"weights file name must end in .weights.h5, got {path}")
    return atomic_write(path, lambda tmp: model.save_weights(tmp), suffix=".weights.h5")


def atomic_save_model(model, path: PathLike, info: Optional[ModelInfo] = None) -> Path:
    """``model.save(path)`` (a ``.keras`` name, without optimizer), with ``info`` inside, atomically."""
    if not str(path).endswith(".keras"):
        raise ValueError(f"model file name must end in .keras, got {path}")

    def write(tmp: str) -> None:
        model.save(tmp, include_optimizer=False)
        if info is not None:
            embed_info(tmp, info)
    return atomic_write(path, write, suffix=".keras")


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
        body = build_spec_body(spec, num_classes,
                               anchors_per_scale or num_anchors // spec.num_scales)
        try:
            with warnings.catch_warnings():  # Keras warns on its way to the error reported below
                warnings.simplefilter("ignore")
                body.load_weights(os.fspath(path))
            return body, spec
        except Exception as e:  # noqa: BLE001 - Keras raises many types for a wrong file
            errors.append(f"{spec.name}: {e}")
    raise FileFormatError(path, f"weights do not fit a body for {num_classes} classes "
                                f"({'; '.join(errors) or 'no candidate variant'})")
