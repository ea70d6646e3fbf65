"""A TFLite flatbuffer's ``yolo3`` metadata: the :class:`~yolo3.checkpoint.metadata.ModelInfo` an
exported ``.tflite`` model carries (written with TensorFlow's flatbuffer schema, read in place;
TensorFlow is imported when a ``.tflite`` file is read or written, not before)."""
from __future__ import annotations

import json
import os
from typing import Optional

from yolo3.checkpoint.metadata import ModelInfo, info_json
from yolo3.core.errors import FileFormatError, PathLike

TFLITE_METADATA_NAME = "yolo3"

__all__ = ["TFLITE_METADATA_NAME", "embed_info_tflite", "read_tflite_info"]


def _metadata_text(path: str) -> Optional[str]:
    """The ``yolo3`` metadata buffer of a TFLite flatbuffer (read in place, nothing unpacked)."""
    from tensorflow.lite.python import schema_py_generated as schema
    with open(path, "rb") as f:
        data = f.read()
    model = schema.Model.GetRootAs(data, 0)
    for i in range(model.MetadataLength()):
        entry = model.Metadata(i)
        if entry.Name() and entry.Name().decode() == TFLITE_METADATA_NAME:
            return model.Buffers(entry.Buffer()).DataAsNumpy().tobytes().decode("utf-8")
    return None


def read_tflite_info(path: PathLike) -> Optional[ModelInfo]:
    """The :class:`ModelInfo` in the ``.tflite`` file ``path``, or None when it carries none."""
    path = os.fspath(path)
    try:
        text = _metadata_text(path)
    except OSError as e:
        raise FileFormatError(path, f"cannot read the file: {e.strerror or e}") from None
    except Exception as e:  # noqa: BLE001 - flatbuffers meets garbage with struct, index ... errors
        first = str(e).splitlines()[0][:200] if str(e).strip() else type(e).__name__
        raise FileFormatError(path, f"not a TFLite model: {first}") from None
    try:
        data = None if text is None else json.loads(text)
    except (UnicodeDecodeError, ValueError) as e:
        raise FileFormatError(path, f"cannot read the {TFLITE_METADATA_NAME} metadata: {e}") from None
    return None if data is None else ModelInfo.from_dict(data, path)


def embed_info_tflite(flatbuffer: bytes, info: ModelInfo) -> bytes:
    """A TFLite flatbuffer with ``info`` added as its ``yolo3`` metadata."""
    from tensorflow.lite.python import schema_py_generated as schema
    from tensorflow.lite.tools import flatbuffer_utils
    model = flatbuffer_utils.read_model_from_bytearray(bytearray(flatbuffer))
    buffer = schema.BufferT()
    buffer.data = list(info_json(info).encode("utf-8"))
    model.buffers.append(buffer)
    entry = schema.MetadataT()
    entry.name = TFLITE_METADATA_NAME
    entry.buffer = len(model.buffers) - 1
    model.metadata = (model.metadata or []) + [entry]
    return bytes(flatbuffer_utils.convert_object_to_bytearray(model))
