"""Engines a ``.keras`` detector runs on: Keras (TensorFlow), OpenVINO or ONNX Runtime.

``auto`` (:func:`resolve_engine`) is OpenVINO on a CPU where the ``openvino`` package is installed
(its CPU plugin runs this network faster than TensorFlow on every CPU measured: the README's
figures), else Keras. A non-Keras engine runs the detector's float32, batch-norm-folded network,
converted in process (:func:`engine_runner`) and kept under the user cache folder
(:func:`yolo3.core.paths.user_cache_dir`), keyed by the model file's SHA-256 and everything else the
converted network depends on; OpenVINO also caches its compiled model there. A conversion is
checked once, before it is cached, against the Keras network in float32 (raw maps within
:data:`CHECK_TOLERANCE` relative); a second run reuses it, a changed model file converts anew.
"""
from __future__ import annotations

import hashlib
import importlib.util
import json
import logging
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, List, Optional, Tuple

import numpy as np

from yolo3.config.choices import ENGINES
from yolo3.core.errors import ArgumentError, CommandFailed
from yolo3.core.extras import install_hint
from yolo3.core.file_cache import FileCache
from yolo3.core.fileio import atomic_directory
from yolo3.core.paths import user_cache_dir
from yolo3.core.version import __version__
from yolo3.inference.conversion import openvino_model, write_onnx
from yolo3.inference.runners import OnnxRunner, OpenVINORunner, ordered_raw_maps, relative_error

CHECK_TOLERANCE = 1e-4  # relative error of the converted network's raw maps, both in float32
CHECK_IMAGES = 2
ENGINE_PACKAGES = {"openvino": "openvino", "onnxruntime": "onnxruntime"}
ENGINE_INSTALL = {"openvino": install_hint("openvino"), "onnxruntime": install_hint("onnxruntime")}

log = logging.getLogger(__name__)

__all__ = ["ENGINES", "CHECK_TOLERANCE", "EngineChoice", "resolve_engine", "engine_installed",
           "engine_runner", "engine_version", "model_digest", "EngineCheckFailed"]


@dataclass
class EngineChoice:
    """What ran: ``engine`` (keras, openvino or onnxruntime), its ``precision``, and how the
    converted network was obtained (``converted`` in ``seconds``, or reused from ``cached``)."""

    engine: str
    precision: str
    converted: bool = False
    seconds: float = 0.0
    cached: Optional[str] = None
    reason: str = ""

    def summary(self) -> str:
        text = f"engine: {self.engine}, {self.precision}"
        if self.cached:
            text += (f" (converted in {self.seconds:.1f} s, cached in {self.cached})"
                     if self.converted else f" (conversion reused from {self.cached})")
        return text + (f"; {self.reason}" if self.reason else "")


class EngineCheckFailed(CommandFailed):
    """A converted network that does not compute what the Keras network computes."""


def engine_installed(engine: str) -> bool:
    """Whether the package ``engine`` needs can be imported (keras: always)."""
    package = ENGINE_PACKAGES.get(engine)
    return package is None or importlib.util.find_spec(package) is not None


def resolve_engine(engine: str, gpu: bool = False) -> str:
    """``keras``, ``openvino`` or ``onnxruntime`` for a requested engine. ``auto``: OpenVINO on a
    CPU (``gpu`` False) where it is installed, else Keras. A named engine that is not installed
    is an ArgumentError naming its install command."""
    if engine not in ENGINES:
        raise ArgumentError(f"engine must be one of {', '.join(ENGINES)}, got {engine!r}")
    if engine == "auto":
        return "openvino" if not gpu and engine_installed("openvino") else "keras"
    if not engine_installed(engine):
        raise ArgumentError(f"--engine {engine} needs {ENGINE_PACKAGES[engine]}, which is not "
                            f"installed: {ENGINE_INSTALL[engine]}")
    return engine


def model_digest(path: str) -> str:
    """SHA-256 of the file at ``path``, remembered by its size and modification time (a model file
    is hashed again only when it changes)."""
    cache = FileCache("model_digests.json")
    path = os.path.abspath(path)
    digest = cache.get(path)
    if digest is None:
        sha = hashlib.sha256()
        with open(path, "rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                sha.update(block)
        digest = sha.hexdigest()
        cache.put(path, digest)
        cache.save()
    return digest


def engine_version(engine: str) -> str:
    """The installed version of ``engine``'s package (``?`` when it is not installed)."""
    from importlib.metadata import PackageNotFoundError, version
    try:
        return version(ENGINE_PACKAGES[engine])
    except PackageNotFoundError:
        return "?"


def _cache_key(engine: str, digest: str, facts: dict) -> str:
    text = json.dumps({"engine": engine, "version": engine_version(engine), "yolo3": __version__,
                       "model": digest, **facts}, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:24]


def _convert_openvino(function, folder: Path) -> Path:
    import openvino as ov
    xml = folder / "model.xml"
    ov.save_model(openvino_model(function), os.fspath(xml), compress_to_fp16=False)  # exact
    return xml


def _convert_onnx(function, folder: Path, what: str) -> Path:
    path = folder / "model.onnx"
    write_onnx(function, path, what=what)
    return path


def _open(engine: str, path: str, precision: str, num_threads: Optional[int], compiled_cache: str):
    if engine == "openvino":
        return OpenVINORunner(path, num_threads, precision=precision, cache_dir=compiled_cache)
    return OnnxRunner(path, num_threads)


def _check(runner, reference: Callable[[np.ndarray], List[np.ndarray]],
           input_hw: Tuple[int, int]) -> float:
    """Largest relative error of ``runner``'s raw maps against ``reference`` on seeded images."""
    x = np.random.default_rng(0).uniform(0, 1, (CHECK_IMAGES, *input_hw, 3)).astype(np.float32)
    want = reference(x)
    got = ordered_raw_maps(runner.run(x))
    if len(got) != len(want):
        return float("inf")
    return max(relative_error(g, w) for g, w in zip(got, want))


def engine_runner(engine: str, function, reference: Callable[[np.ndarray], List[np.ndarray]],
                  model_path: str, facts: dict, input_hw: Tuple[int, int], precision: str,
                  num_threads: Optional[int] = None) -> Tuple[object, EngineChoice]:
    """The runner of ``function`` (a ``tf.function``: float32 ``(B, h, w, 3)`` in [0, 1] -> the raw
    maps ``raw_s<stride>``) on ``engine``, and what was done.

    The converted network is cached under ``user_cache_dir()/engines/<key>``, the key made of
    ``model_path``'s SHA-256, ``facts`` (what else the network depends on: variant, classes, masks,
    input size) and the engine's and yolo3's versions. A new conversion is checked against
    ``reference`` (the Keras network's float32 raw maps) before it is kept: EngineCheckFailed
    (nothing cached) when it differs by more than :data:`CHECK_TOLERANCE`.
    """
    root = Path(user_cache_dir()) / "engines"
    compiled_cache = os.fspath(root / "openvino_compiled")
    folder = root / _cache_key(engine, model_digest(model_path), facts)
    name = "model.xml" if engine == "openvino" else "model.onnx"
    converted, seconds = False, 0.0
    if not (folder / name).is_file():
        start = time.perf_counter()

        def convert(tmp: Path) -> None:
            path = (_convert_openvino(function, tmp) if engine == "openvino"
                    else _convert_onnx(function, tmp, model_path))
            error = _check(_open(engine, os.fspath(path), "float32", num_threads, ""),
                           reference, input_hw)
            if not error <= CHECK_TOLERANCE:
                raise EngineCheckFailed(f"{model_path}: the {engine} conversion differs from the "
                                        f"Keras network by {error:.3g} relative (limit "
                                        f"{CHECK_TOLERANCE:g}); nothing was cached")
            (tmp / "source.json").write_text(json.dumps(
                {"model": os.path.abspath(model_path), "facts": facts, "check_error": error}),
                encoding="utf-8")
        atomic_directory(folder, convert)
        converted, seconds = True, time.perf_counter() - start
        log.debug("%s: converted for %s in %.1f s into %s", model_path, engine, seconds, folder)
    runner = _open(engine, os.fspath(folder / name), precision, num_threads, compiled_cache)
    used = getattr(runner, "precision", "float32")
    return runner, EngineChoice(engine, used, converted, seconds, os.fspath(folder))

