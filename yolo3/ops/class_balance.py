"""Rare classes: per-class loss weights and repeat-factor image sampling (NumPy).

- :func:`class_weights`: one weight per class from its box count: ``inverse`` frequency ``1/n``,
  its square root ``sqrt`` (``1/sqrt(n)``), or the ``effective`` number of samples (Cui et al.,
  2019: ``(1 - beta) / (1 - beta**n)``, beta 0.999), the largest at most ``cap`` times the
  smallest, scaled so that the mean weight over the boxes is 1 (the loss keeps its size). A class
  without boxes gets 1.
- :func:`repeat_factors`: LVIS's repeat-factor sampling (Gupta et al., 2019): a class present in
  a share ``f`` of the images has ``r = max(1, sqrt(threshold / f))``; an image repeats by the
  largest ``r`` of its classes. :func:`repeated_indices` draws the integer repeats (the
  fractional part by chance, seeded).
- :func:`read_class_weights`: a file of weights, one per class in class order (``0.5``) or by
  name (``bicycle 3``); ``#`` starts a comment.
"""
from __future__ import annotations

from typing import List, Optional, Sequence

import numpy as np

from yolo3.config.choices import CLASS_WEIGHT_METHODS
from yolo3.core.errors import FileFormatError, PathLike
from yolo3.core.fileio import read_text

__all__ = ["WEIGHT_METHODS", "MAX_FILE_WEIGHT", "EFFECTIVE_BETA", "WEIGHT_CAP", "class_counts",
           "class_weights", "read_class_weights", "repeat_factors", "repeated_indices",
           "format_weights"]

WEIGHT_METHODS = CLASS_WEIGHT_METHODS
MAX_FILE_WEIGHT = 1e6  # a file's weights, relative to each other: larger ones are refused
EFFECTIVE_BETA = 0.999
WEIGHT_CAP = 10.0


def class_counts(labels: Sequence[np.ndarray], num_classes: int) -> np.ndarray:
    """Boxes per class ``(C,)`` int64 over per-image class ids (``boxes[:, 4]``)."""
    flat = np.concatenate([np.asarray(c).reshape(-1) for c in labels] or [np.zeros(0)])
    return np.bincount(flat.astype(np.int64), minlength=num_classes)[:num_classes]


def class_weights(counts: Sequence[int], method: str = "effective", cap: float = WEIGHT_CAP,
                  beta: float = EFFECTIVE_BETA) -> np.ndarray:
    """``(C,)`` float64 weights of classes with ``counts`` boxes (module docstring)."""
    if method not in WEIGHT_METHODS:
        raise ValueError(f"class weight method {method!r}: expected one of "
                         f"{', '.join(WEIGHT_METHODS)}")
    if not cap >= 1:
        raise ValueError(f"class weight cap {cap!r}: expected a number >= 1")
    n = np.asarray(counts, np.float64)
    present = n > 0
    raw = np.ones_like(n)
    if method == "inverse":
        raw[present] = 1.0 / n[present]
    elif method == "sqrt":
        raw[present] = 1.0 / np.sqrt(n[present])
    else:
        raw[present] = (1.0 - beta) / (1.0 - np.power(beta, n[present]))
    if not present.any():
        return np.ones_like(n)
    low = raw[present].min()
    raw[present] = np.minimum(raw[present], cap * low)
    raw[present] *= n[present].sum() / (n[present] * raw[present]).sum()
    raw[~present] = 1.0
    return raw


def read_class_weights(path: PathLike, class_names: Sequence[str]) -> np.ndarray:
    """The ``(C,)`` weights a file gives (module docstring); every class once, positive."""
    weights: List[Optional[float]] = [None] * len(class_names)
    position = 0
    for line_no, line in enumerate(read_text(path, "class weights").splitlines(), start=1):
        text = line.split("#", 1)[0].strip()
        if not text:
            continue
        parts = text.rsplit(None, 1)
        where = f"line {line_no}"
        try:
            value = float(parts[-1])
        except ValueError:
            raise FileFormatError(path, f"{where}: {parts[-1]!r} is not a number") from None
        if not np.isfinite(value) or not 0 < value <= MAX_FILE_WEIGHT:
            raise FileFormatError(path, f"{where}: a weight must be a number above 0 and up to "
                                        f"{MAX_FILE_WEIGHT:g}, got {parts[-1]}")
        if len(parts) == 2:
            if parts[0] not in class_names:
                raise FileFormatError(path, f"{where}: {parts[0]!r} is not a class "
                                            f"({', '.join(class_names)})")
            k = list(class_names).index(parts[0])
        else:
            k = position
            if k >= len(class_names):
                raise FileFormatError(path, f"{where}: more weights than the "
                                            f"{len(class_names)} classes")
        if weights[k] is not None:
            raise FileFormatError(path, f"{where}: class {class_names[k]!r} weighted twice")
        weights[k] = value
        position += 1
    missing = [name for name, w in zip(class_names, weights) if w is None]
    if missing:
        raise FileFormatError(path, f"no weight for {', '.join(missing)} "
                                    f"({len(class_names)} classes, one weight each)")
    return np.asarray(weights, np.float64)


def repeat_factors(labels: Sequence[np.ndarray], num_classes: int,
                   threshold: float) -> np.ndarray:
    """Each image's repeat factor ``(N,)`` float64 from its class ids ``labels`` (module
    docstring); images without boxes repeat once."""
    if not 0 < threshold <= 1:
        raise ValueError(f"repeat threshold {threshold!r}: expected a fraction in (0, 1]")
    present = np.zeros((len(labels), num_classes), bool)
    for i, c in enumerate(labels):
        present[i, np.asarray(c).reshape(-1).astype(np.int64)] = True
    share = present.mean(axis=0) if len(labels) else np.zeros(num_classes)
    per_class = np.where(share > 0, np.maximum(1.0, np.sqrt(threshold / np.maximum(share, 1e-12))),
                         1.0)
    return np.where(present.any(axis=1), np.max(np.where(present, per_class, 1.0), axis=1), 1.0)


def repeated_indices(factors: np.ndarray, seed: int) -> np.ndarray:
    """Indices with image ``i`` ``floor(r_i)`` times, once more with chance ``r_i - floor(r_i)``
    (seeded), in order."""
    factors = np.asarray(factors, np.float64)
    whole = np.floor(factors)
    extra = np.random.default_rng(seed).uniform(size=len(factors)) < factors - whole
    return np.repeat(np.arange(len(factors)), (whole + extra).astype(np.int64))


def format_weights(weights: np.ndarray, class_names: Sequence[str]) -> str:
    """``name weight`` per line: the file :func:`read_class_weights` reads back."""
    return "".join(f"{name} {w:.6g}\n" for name, w in zip(class_names, weights))
