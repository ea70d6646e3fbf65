"""Writing and reading model files: atomic saves, embedded model info, loading with yolo3's objects.

Every file is written to a temporary name (``.tmp-*``) in the same folder, flushed to disk and
renamed over the old one, so a crash (even SIGKILL) leaves either the old or the new file, never
half of one. A ``.keras`` body saved with a :class:`~yolo3.metadata.ModelInfo` carries it inside
(see :mod:`yolo3.metadata`).
"""
from __future__ import annotations

import os
import tempfile
import warnings
from pathlib import Path
from typing import Callable, List, Optional, Sequence, Tuple, Union

from yolo3.errors import FileFormatError
from yolo3.metadata import ModelInfo, embed_info, read_info, read_side_files, resolve_info

PathLike = Union[str, os.PathLike]
TEMP_PREFIX = ".tmp-"

__all__ = ["atomic_write", "atomic_save_weights", "atomic_save_model", "load_keras_model",
           "load_body", "build_from_weights", "output_channels", "register_serializables",
           "fsync_file", "fsync_dir", "TEMP_PREFIX"]


def fsync_file(path: PathLike) -> None:
    with open(path, "rb") as f:
        os.fsync(f.fileno())


def fsync_dir(path: PathLike) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def atomic_write(path: PathLike, writer: Callable[[str], None], suffix: str = "") -> Path:
    """Call ``writer(tmp_path)`` with a temporary file beside ``path`` (ending in ``suffix``), then
    flush it and rename it over ``path``. The temporary file is removed if ``writer`` fails."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f"{TEMP_PREFIX}{path.name}-", suffix=suffix, dir=path.parent)
    os.close(fd)
    os.unlink(tmp)  # Keras refuses to overwrite silently in some versions; let it create the file
    try:
        writer(tmp)
        fsync_file(tmp)
        os.replace(tmp, path)
        fsync_dir(path.parent)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return path


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


def register_serializables() -> None:
    """Import the modules that register yolo3's Keras objects (loss layer, schedule, folded batch
    norm), so that ``keras.models.load_model`` reads any yolo3 ``.keras`` file."""
    import yolo3.graph_surgery  # noqa: F401  (FoldedBatchNorm)
    import yolo3.loss  # noqa: F401  (YoloLoss, identity_loss)
    import yolo3.schedules  # noqa: F401  (WarmupCosine)


def load_keras_model(path: PathLike) -> Tuple[object, Optional[ModelInfo]]:
    """``(model, info)`` of a ``.keras`` file (info None when it carries none); FileFormatError
    naming the file when it is missing or Keras cannot read it."""
    import keras
    path = os.fspath(path)
    if not os.path.isfile(path):
        raise FileFormatError(path, "model file not found")
    import zipfile
    if not zipfile.is_zipfile(path):
        raise FileFormatError(path, "not a .keras model: a .keras file is a zip archive, and this "
                                    "one is not (a different file, or one cut short while written)")
    info = read_info(path)
    register_serializables()
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
        body = spec.build(num_classes, anchors_per_scale or num_anchors // spec.num_scales)
        try:
            with warnings.catch_warnings():  # Keras warns on its way to the error reported below
                warnings.simplefilter("ignore")
                body.load_weights(os.fspath(path))
            return body, spec
        except Exception as e:  # noqa: BLE001 - Keras raises many types for a wrong file
            errors.append(f"{spec.name}: {e}")
    raise FileFormatError(path, f"weights do not fit a body for {num_classes} classes "
                                f"({'; '.join(errors) or 'no candidate variant'})")


def load_body(path: PathLike, *, anchors_path: Optional[PathLike] = None,
              classes_path: Optional[PathLike] = None, model_type: Optional[str] = None,
              anchor_mask: Optional[Sequence[Sequence[int]]] = None):
    """``(body, info)`` for the model file ``path``.

    A keras-yolo3 ``.h5`` (Keras 2 HDF5) is migrated by :func:`load_keras_yolo3`. A ``.keras`` file
    gives its body and the facts it carries (or, for files written before, the
    side files beside it); ``.weights.h5`` weights need the variant (``model_type``, else every
    variant whose default anchor count is the anchors' is tried), anchors and classes (arguments or
    side files). Explicit arguments override what the file says (:func:`yolo3.metadata.resolve_info`).
    """
    from yolo3.anchors import read_anchors, read_classes
    from yolo3.specs import all_specs, get_spec, spec_of_layers
    path = os.fspath(path)
    if not os.path.isfile(path):
        raise FileFormatError(path, "model file not found")
    if path.endswith(".h5") and not path.endswith(".weights.h5"):
        return load_keras_yolo3(path, anchors_path=anchors_path, classes_path=classes_path,
                                model_type=model_type, anchor_mask=anchor_mask)
    if not path.endswith(".weights.h5"):
        body, embedded = load_keras_model(path)
        spec = spec_of_layers([layer.name for layer in body.layers])
        info = resolve_info(path, output_channels(body), anchors_path=anchors_path,
                            classes_path=classes_path, anchor_mask=anchor_mask,
                            variant=spec.name if spec is not None else None, embedded=embedded)
        return body, info
    side = read_side_files(path)
    if classes_path is None and "class_names" not in side:
        raise FileFormatError(path, "building a body from .weights.h5 needs a classes file")
    if anchors_path is None and "anchors" not in side:
        raise FileFormatError(path, "no anchors file given and none found beside the model")
    class_names = read_classes(classes_path) if classes_path is not None else side["class_names"]
    anchors = read_anchors(anchors_path) if anchors_path is not None else side["anchors"]
    if model_type is not None:
        candidates = [get_spec(model_type)]
    else:  # the variants whose default anchor count this is (9: yolov3, yolov3-spp; 6: tiny)
        candidates = [s for s in all_specs() if len(s.anchors) == len(anchors)]
        if not candidates:
            raise FileFormatError(anchors_path or side["sources"]["anchors"],
                                  f"{len(anchors)} anchors: cannot infer the variant "
                                  f"({', '.join(f'{len(s.anchors)} -> {s.name}' for s in all_specs())}); "
                                  "pass model_type")
    body, spec = build_from_weights(path, len(class_names), candidates, len(anchors),
                                    len(anchor_mask[0]) if anchor_mask is not None else None)
    info = resolve_info(path, output_channels(body), anchors_path=anchors_path,
                        classes_path=classes_path, anchor_mask=anchor_mask, variant=spec.name)
    return body, info


def load_keras_yolo3(path: PathLike, *, anchors_path: Optional[PathLike] = None,
                     classes_path: Optional[PathLike] = None, model_type: Optional[str] = None,
                     anchor_mask: Optional[Sequence[Sequence[int]]] = None, verbose: bool = False):
    """``(body, info)`` of a keras-yolo3 ``.h5`` file: a whole Keras 2 model (its ``convert.py``'s
    ``model_data/yolo.h5``) or ``save_weights`` of its training model.

    The variant comes from the number of convolutions (or ``model_type``), the class count from the
    output filters; anchors default to the side files, then to the variant's (= keras-yolo3's
    ``model_data``) anchors; masks to keras-yolo3's (tiny: ``[[3, 4, 5], [1, 2, 3]]``); class names
    to ``classes_path`` or the side files (numbers without them). The weights are mapped by
    :func:`yolo3.weights.load_weights_by_name` (creation order, batch-norm epsilon).
    """
    from yolo3.anchors import read_anchors
    from yolo3.keras_yolo3 import keras_yolo3_masks
    from yolo3.weights import (WeightsError, keras_yolo3_order, keras_yolo3_spec,
                               load_weights_by_name, read_layer_weights)
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
        spec = keras_yolo3_spec(path, order, model_type)
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
    body = spec.build(out_filters // per - 5, per)
    try:
        report = load_weights_by_name(body, path, model_type=spec.name, verbose=verbose)
    except WeightsError as e:
        raise FileFormatError(path, str(e).split(": ", 1)[-1]) from None
    if report.skipped:
        raise FileFormatError(path, f"layers not loaded: {report.skipped[:3]}")
    info = resolve_info(path, output_channels(body), anchors_path=anchors_path,
                        classes_path=classes_path, anchor_mask=masks, variant=spec.name,
                        default_anchors=anchors)
    return body, info
