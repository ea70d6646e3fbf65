"""Converting a network to ONNX and to OpenVINO IR, written once: the engines that run a ``.keras``
model on OpenVINO or ONNX Runtime (:mod:`yolo3.inference.engines`) and ``yolo3 export``
(:mod:`yolo3.export.formats`, which adds the model's facts, quantisation and the check) both
convert through these.

``function`` is a ``tf.function`` with an input signature (the graph of
:mod:`yolo3.export.graph`). Needs the ``[export]`` extra (tf2onnx, onnx) or ``[openvino]``.

ONNX conversion runs in a process of its own (:mod:`yolo3.inference.onnx_converter`), handed the
function as a SavedModel: in this process's protobuf, tf2onnx's passes would keep a copy of the
weights per pass (YOLOv3-416: 21.7 GB, 74 s); there it peaks at about
:func:`onnx_memory_needed` (YOLOv3-416: 2.4 GB, docs/benchmarks.md). Before it starts, a machine
with less memory available is refused (:class:`~yolo3.core.errors.NotEnoughMemory`); a converter
killed for memory is reported the same way, with what it had reached.
"""
from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import sys
from typing import Dict, Optional

from yolo3.core.errors import CommandFailed, NotEnoughMemory, PathLike
from yolo3.core.extras import require
from yolo3.core.fileio import temporary_folder
from yolo3.core.memory import available_memory, gigabytes, peak_resident
from yolo3.inference import onnx_converter

ONNX_OPSET = 17
# the converter process's peak: a fixed part (TensorFlow, tf2onnx) and bytes per weight byte,
# fitted to the peaks measured for tiny (35 MB of weights: 1.1 GB) and YOLOv3 (248 MB: 2.4 GB)
ONNX_BASE_BYTES = 0.9e9
ONNX_BYTES_PER_WEIGHT_BYTE = 6.0

log = logging.getLogger(__name__)

__all__ = ["ONNX_OPSET", "write_onnx", "onnx_memory_needed", "openvino_model"]


def onnx_memory_needed(weight_bytes: int) -> int:
    """Bytes the ONNX converter process is expected to peak at for ``weight_bytes`` of weights."""
    return int(ONNX_BASE_BYTES + ONNX_BYTES_PER_WEIGHT_BYTE * weight_bytes)


def _weight_bytes(concrete) -> int:
    return sum(int(v.shape.num_elements() or 0) * v.dtype.size for v in concrete.variables)


def _save_function(concrete, folder: str) -> None:
    """``concrete`` as the ``serving_default`` signature of a SavedModel at ``folder``, with the
    variables it reads."""
    import tensorflow as tf
    holder = tf.Module()
    holder.weights = list(concrete.variables)  # tracked, so the SavedModel carries them
    tf.saved_model.save(holder, folder, signatures={"serving_default": concrete})


def _converter_env() -> Dict[str, str]:
    """The converter's environment: pure-Python protobuf (see the module docstring), no GPU (the
    conversion needs none, and this process may hold it), quiet TensorFlow, this yolo3
    importable."""
    env = dict(os.environ, PROTOCOL_BUFFERS_PYTHON_IMPLEMENTATION="python",
               CUDA_VISIBLE_DEVICES="-1", TF_CPP_MIN_LOG_LEVEL="3")
    package_root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env["PYTHONPATH"] = os.pathsep.join([package_root, *filter(None, [env.get("PYTHONPATH")])])
    return env


def _run_converter(request_path: str, log_path: str) -> "tuple[int, Optional[int]]":
    """Run the converter on ``request_path``; ``(return code, the largest resident set it was
    seen at, or None)``."""
    with open(log_path, "wb") as err:
        proc = subprocess.Popen([sys.executable, "-m", onnx_converter.__name__, request_path],
                                stdin=subprocess.DEVNULL, stdout=err, stderr=err,
                                env=_converter_env())
        peak = None
        try:
            while True:
                try:
                    code = proc.wait(timeout=0.2)
                    return code, peak
                except subprocess.TimeoutExpired:
                    peak = peak_resident(proc.pid) or peak
        except BaseException:  # an interrupt: the converter goes with us
            proc.kill()
            proc.wait()
            raise


def _converter_error(error_file: str, log_path: str) -> str:
    """The converter's one line about its failure, or the last line it wrote when it had none."""
    for path in (error_file, log_path):
        try:
            with open(path, encoding="utf-8", errors="replace") as f:
                lines = [line.strip() for line in f if line.strip()]
        except OSError:
            continue
        if lines:
            return lines[-1]
    return "no message"


def write_onnx(function, path: PathLike, opset: int = ONNX_OPSET,
               metadata: Optional[Dict[str, str]] = None, what: str = "the network") -> None:
    """Convert ``function`` to ONNX (opset ``opset``, via tf2onnx) and write it at ``path``, with
    ``metadata`` entries ``{key: value}`` in the model's ``metadata_props``. ``what`` names the
    model in errors. NotEnoughMemory when the machine has less memory available than the
    conversion needs, or the converter was killed (the kernel's answer to memory running out);
    CommandFailed when it failed otherwise. ``path`` may be left partly written on failure: write
    it through :func:`yolo3.core.fileio.atomic_write`."""
    require("tf2onnx", "ONNX conversion")
    require("onnx", "ONNX conversion")
    concrete = function.get_concrete_function()
    needed = onnx_memory_needed(_weight_bytes(concrete))
    available = available_memory()
    if available is not None and available < needed:
        raise NotEnoughMemory(
            f"ONNX conversion of {what}: needs about {gigabytes(needed)} of memory, "
            f"{gigabytes(available)} is available; nothing was written")
    # beside the output, not in the system's temporary folder, which may be memory (tmpfs): the
    # SavedModel holds a copy of the weights; a killed process's folder is swept as yolo3's are
    out = os.path.abspath(os.fspath(path))
    with temporary_folder(os.path.dirname(out), os.path.basename(out)) as tmp:
        _convert_in_folder(concrete, out, os.fspath(tmp), opset, metadata, what, needed,
                           available)


def _convert_in_folder(concrete, out: str, tmp: str, opset: int,
                       metadata: Optional[Dict[str, str]], what: str, needed: int,
                       available: Optional[int]) -> None:
    """:func:`write_onnx`'s conversion, its SavedModel, request and logs in the folder ``tmp``."""
    saved = os.path.join(tmp, "function")
    _save_function(concrete, saved)
    request, error_file = os.path.join(tmp, "request.json"), os.path.join(tmp, "error.txt")
    with open(request, "w", encoding="utf-8") as f:
        json.dump({"saved_model": saved, "out": out,
                   "opset": int(opset), "metadata": metadata or {},
                   "error_file": error_file}, f)
    log_path = os.path.join(tmp, "converter.log")
    code, peak = _run_converter(request, log_path)
    if peak is not None:
        log.debug("ONNX converter of %s: exit %d, peak %s", what, code, gigabytes(peak))
    if hasattr(signal, "SIGKILL") and code == -signal.SIGKILL:
        reached = f" (it had reached {gigabytes(peak)})" if peak else ""
        raise NotEnoughMemory(
            f"ONNX conversion of {what}: the converter was killed, most likely for memory: "
            f"it needs about {gigabytes(needed)}{reached}, "
            f"{gigabytes(available) if available is not None else 'an unknown amount'} "
            "was available when it started; nothing was written")
    if code != 0:
        raise CommandFailed(f"ONNX conversion of {what} failed: "
                            f"{_converter_error(error_file, log_path)}")


def openvino_model(function):
    """The ``openvino.Model`` of ``function`` (OpenVINO's converter), float32 weights."""
    return require("openvino", "OpenVINO conversion").convert_model(function)
