"""Loading a body and its facts from any model file yolo3 or keras-yolo3 wrote.

:func:`load_body` is the one entrance: a ``.keras`` file (facts inside, or in the side files of
older models), a ``.weights.h5`` (variant, anchors and classes from arguments or side files) or a
keras-yolo3 ``.h5`` (:func:`load_keras_yolo3`, migrated on load). Explicit arguments override what
the file says (:func:`yolo3.checkpoint.metadata.resolve_info`).
"""
from __future__ import annotations

import os
from typing import Optional, Sequence

import numpy as np

from yolo3.checkpoint.metadata import read_side_files, resolve_info
from yolo3.checkpoint.saving import (
    build_from_weights,
    load_keras_model,
    output_channels,
    read_layer_weights,
)
from yolo3.checkpoint.weight_names import WeightsError, keras_yolo3_order, keras_yolo3_spec
from yolo3.checkpoint.weights import load_weights_by_name
from yolo3.config.masks import keras_yolo3_masks
from yolo3.config.specs import anchor_specs, get_spec, spec_of_layers
from yolo3.core.deprecation import accepts_old_keywords
from yolo3.core.errors import FileFormatError, PathLike
from yolo3.data.class_names import read_classes
from yolo3.modeling.bodies import build_spec_body
from yolo3.ops.anchors import read_anchors

__all__ = ["load_body", "load_keras_yolo3"]


@accepts_old_keywords(model_type="variant")
def load_body(path: PathLike, *, anchors_path: Optional[PathLike] = None,
              classes_path: Optional[PathLike] = None, variant: Optional[str] = None,
              anchor_mask: Optional[Sequence[Sequence[int]]] = None):
    """``(body, info)`` for the model file ``path``.

    A keras-yolo3 ``.h5`` (Keras 2 HDF5) is migrated by :func:`load_keras_yolo3`. A ``.keras`` file
    gives its body and the facts it carries (or, for files written before, the
    side files beside it); ``.weights.h5`` weights need the variant (``variant``, else every
    variant whose default anchor count is the anchors' is tried), anchors and classes (arguments or
    side files). Explicit arguments override what the file says
    (:func:`yolo3.checkpoint.metadata.resolve_info`).
    """
    path = os.fspath(path)
    if os.path.isdir(path):
        raise FileFormatError(path, "a folder that holds no model yolo3 reads: give a .keras, "
                                    ".weights.h5 or keras-yolo3 .h5 file, or an exported "
                                    "SavedModel or OpenVINO IR folder")
    if not os.path.isfile(path):
        raise FileFormatError(path, "model file not found")
    if path.endswith(".h5") and not path.endswith(".weights.h5"):
        return load_keras_yolo3(path, anchors_path=anchors_path, classes_path=classes_path,
                                variant=variant, anchor_mask=anchor_mask)
    if not path.endswith(".weights.h5"):
        body, embedded = load_keras_model(path)
        spec = spec_of_layers([layer.name for layer in body.layers])
        info = resolve_info(path, output_channels(body), anchors_path=anchors_path,
                            classes_path=classes_path, anchor_mask=anchor_mask,
                            variant=spec.name if spec is not None else None, embedded=embedded,
                            head=spec.head if spec is not None else None)
        return body, info
    side = read_side_files(path)
    if classes_path is None and "class_names" not in side:
        raise FileFormatError(path, "building a body from .weights.h5 needs a classes file")
    class_names = read_classes(classes_path) if classes_path is not None else side["class_names"]

    def find_anchors():
        if anchors_path is None and "anchors" not in side:
            raise FileFormatError(path, "no anchors file given and none found beside the model")
        anchors = read_anchors(anchors_path) if anchors_path is not None else side["anchors"]
        return anchors, anchor_mask

    if variant is not None:  # its kind takes the anchors found, where it has anchors
        candidates = [get_spec(variant)]
        try:
            num_anchors = len(candidates[0].head.with_found_anchors(find_anchors).anchor_array())
        except FileFormatError:
            raise
        except ValueError as e:  # anchors and masks that make no head
            raise FileFormatError(anchors_path or side["sources"]["anchors"], str(e)) from None
    else:  # the variants whose default anchor count this is (9: yolov3, yolov3-spp; 6: tiny)
        num_anchors = len(np.asarray(find_anchors()[0]).reshape(-1, 2))
        candidates = [s for s in anchor_specs() if len(s.anchors) == num_anchors]
        if not candidates:
            raise FileFormatError(anchors_path or side["sources"]["anchors"],
                                  f"{num_anchors} anchors: cannot infer the variant "
                                  f"({', '.join(f'{len(s.anchors)} -> {s.name}' for s in anchor_specs())}); "
                                  "pass variant")
    body, spec = build_from_weights(path, len(class_names), candidates, num_anchors,
                                    len(anchor_mask[0]) if anchor_mask is not None else None)
    info = resolve_info(path, output_channels(body), anchors_path=anchors_path,
                        classes_path=classes_path, anchor_mask=anchor_mask, variant=spec.name,
                        head=spec.head)
    return body, info


@accepts_old_keywords(model_type="variant")
def load_keras_yolo3(path: PathLike, *, anchors_path: Optional[PathLike] = None,
                     classes_path: Optional[PathLike] = None, variant: Optional[str] = None,
                     anchor_mask: Optional[Sequence[Sequence[int]]] = None, verbose: bool = False):
    """``(body, info)`` of a keras-yolo3 ``.h5`` file: a whole Keras 2 model (its ``convert.py``'s
    ``model_data/yolo.h5``) or ``save_weights`` of its training model.

    The variant comes from the number of convolutions (or ``variant``), the class count from the
    output filters; anchors default to the side files, then to the variant's (= keras-yolo3's
    ``model_data``) anchors; masks to keras-yolo3's (tiny: ``[[3, 4, 5], [1, 2, 3]]``); class names
    to ``classes_path`` or the side files, else, as keras-yolo3's ``yolo.py`` does, the COCO names
    for 80 classes (VOC's for 20; numbers otherwise). The weights are mapped by
    :func:`yolo3.checkpoint.weights.load_weights_by_name` (creation order, batch-norm epsilon).
    """
    path = os.fspath(path)
    try:
        source = read_layer_weights(path)
    except (OSError, ValueError) as e:
        raise FileFormatError(path, f"cannot read HDF5 weights: {e}") from None
    order = keras_yolo3_order(source)
    if order is None:
        raise FileFormatError(path, "not a keras-yolo3 .h5 file (layers named conv2d_N / "
                                    "batch_normalization_N); yolo3 models are .keras or .weights.h5")
    try:
        spec = keras_yolo3_spec(path, order, variant)
    except WeightsError as e:
        raise FileFormatError(path, str(e).split(": ", 1)[1]) from None
    side = read_side_files(path)
    anchors = (read_anchors(anchors_path) if anchors_path is not None
               else side.get("anchors", spec.default_anchors()))
    masks = [list(m) for m in anchor_mask] if anchor_mask is not None else \
        keras_yolo3_masks(spec.num_scales)
    out_filters = int(source[order[0][-1]][0].shape[-1])
    per = len(masks[0])
    if out_filters % per or out_filters // per <= 5:
        raise FileFormatError(path, f"output filters {out_filters} do not fit {per} anchors per "
                                    "scale")
    body = build_spec_body(spec, out_filters // per - 5, per)
    try:
        report = load_weights_by_name(body, path, variant=spec.name, verbose=verbose)
    except WeightsError as e:
        raise FileFormatError(path, str(e).split(": ", 1)[-1]) from None
    if report.skipped:
        raise FileFormatError(path, f"layers not loaded: {report.skipped[:3]}")
    info = resolve_info(path, output_channels(body), anchors_path=anchors_path,
                        classes_path=classes_path, anchor_mask=masks, variant=spec.name,
                        default_anchors=anchors, well_known_names=True)
    return body, info
