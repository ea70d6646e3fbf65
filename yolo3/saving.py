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

    A ``.keras`` file gives its body and the facts it carries (or, for files written before, the
    side files beside it); ``.weights.h5`` weights need the variant (``model_type``, else every
    variant whose default anchor count is the anchors' is tried), anchors and classes (arguments or
    side files). Explicit arguments override what the file says (:func:`yolo3.metadata.resolve_info`).
    """
    from yolo3.anchors import read_anchors, read_classes
    from yolo3.specs import all_specs, get_spec, spec_of_layers
    path = os.fspath(path)
    if not os.path.isfile(path):
        raise FileFormatError(path, "model file not found")
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
