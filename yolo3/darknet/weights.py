"""Darknet ``.weights`` files: header, per-convolution parameter blocks, reading and writing.

Layout: int32 major, minor, revision; images seen as int64 when ``major * 10 + minor >= 2``, else
int32; then, for every ``[convolutional]`` in cfg order, float32 little-endian:
with batch norm ``beta (= bias), gamma, mean, variance`` (``filters`` each), without ``bias``; then
the kernel in ``(out, in, h, w)`` order. Nothing may follow the last convolution.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, Dict, Iterable, List, Optional

import numpy as np

from yolo3.core.errors import DarknetError, PathLike
from yolo3.darknet.cfg import ConvSpec, DarknetCfg, Layer

FLOAT = np.dtype("<f4")
_CHUNK = 16 << 20  # bytes per read, for the progress bar


@dataclass
class Header:
    """The header of a weights file."""
    major: int = 0
    minor: int = 2
    revision: int = 0
    seen: int = 0

    @property
    def seen_is_int64(self) -> bool:
        return self.major * 10 + self.minor >= 2

    @property
    def nbytes(self) -> int:
        return 12 + (8 if self.seen_is_int64 else 4)

    def to_bytes(self) -> bytes:
        head = np.array([self.major, self.minor, self.revision], dtype="<i4").tobytes()
        return head + np.array([self.seen], dtype="<i8" if self.seen_is_int64 else "<i4").tobytes()

    def as_list(self) -> List[int]:
        return [self.major, self.minor, self.revision, self.seen]


@dataclass
class ConvWeights:
    """One convolution's parameters in Darknet order; ``kernel`` is ``(out, in, h, w)``."""
    bias: np.ndarray  # beta when batch-normalised
    kernel: np.ndarray
    gamma: Optional[np.ndarray] = None
    mean: Optional[np.ndarray] = None
    variance: Optional[np.ndarray] = None

    def arrays(self) -> List[np.ndarray]:
        """Arrays in file order."""
        if self.gamma is None:
            return [self.bias, self.kernel]
        return [self.bias, self.gamma, self.mean, self.variance, self.kernel]


def in_channels(cfg: DarknetCfg, layer: Layer) -> int:
    return cfg.layers[layer.index - 1].channels if layer.index else cfg.channels


def conv_param_count(cfg: DarknetCfg, layer: Layer) -> int:
    """Number of float32 values stored for convolution ``layer``."""
    s: ConvSpec = layer.spec
    per_filter = 4 if s.batch_normalize else 1
    return s.filters * per_filter + s.filters * in_channels(cfg, layer) * s.size * s.size


def expected_size(cfg: DarknetCfg, header: Header) -> int:
    """Bytes a weights file for ``cfg`` with ``header`` must have."""
    return header.nbytes + FLOAT.itemsize * sum(conv_param_count(cfg, l) for l in cfg.convs())


def read_header(f: BinaryIO, path: Optional[PathLike]) -> Header:
    raw = f.read(12)
    if len(raw) < 12:
        raise DarknetError(path, f"weights file has {len(raw)} bytes: too short for a header")
    major, minor, revision = (int(v) for v in np.frombuffer(raw, dtype="<i4"))
    header = Header(major, minor, revision)
    n = 8 if header.seen_is_int64 else 4
    raw = f.read(n)
    if len(raw) < n:
        raise DarknetError(path, "weights file ends inside its header (images-seen count)")
    header.seen = int(np.frombuffer(raw, dtype="<i8" if n == 8 else "<i4")[0])
    return header


def read_weights(path: PathLike, cfg: DarknetCfg, progress: bool = False
                 ) -> tuple[Header, Dict[int, ConvWeights]]:
    """Read ``path`` for ``cfg``: the header and ``{conv layer index: ConvWeights}`` (views of one array).

    The payload is read into one preallocated buffer (chunked reads, for the progress bar); per-layer
    arrays are views into it.
    Raises :class:`DarknetError` naming the layer where the data runs out, or if bytes are left over.
    """
    try:
        with open(path, "rb") as f:
            header = read_header(f, path)
            data = _read_payload(f, path, progress)
    except OSError as e:
        raise DarknetError(path, f"cannot read weights file: {e.strerror or e}") from None
    usable = data.size - data.size % FLOAT.itemsize
    values = data[:usable].view(FLOAT)
    out: Dict[int, ConvWeights] = {}
    offset = 0
    for layer in cfg.convs():
        s: ConvSpec = layer.spec
        count = conv_param_count(cfg, layer)
        if offset + count > values.size:
            raise DarknetError(
                path, f"weights file ends inside [convolutional] layer {layer.index} (cfg line "
                      f"{layer.line}): it needs {count} floats from float {offset}, only "
                      f"{values.size - offset} left; file has {header.nbytes + data.size} bytes, "
                      f"the cfg {cfg.path or ''} needs {expected_size(cfg, header)}")
        block, offset = values[offset:offset + count], offset + count
        f_ = s.filters
        kshape = (f_, in_channels(cfg, layer), s.size, s.size)
        if s.batch_normalize:
            out[layer.index] = ConvWeights(bias=block[:f_], gamma=block[f_:2 * f_],
                                           mean=block[2 * f_:3 * f_], variance=block[3 * f_:4 * f_],
                                           kernel=block[4 * f_:].reshape(kshape))
        else:
            out[layer.index] = ConvWeights(bias=block[:f_], kernel=block[f_:].reshape(kshape))
    extra = data.size - offset * FLOAT.itemsize
    if extra:
        raise DarknetError(
            path, f"{extra} bytes left over after the last [convolutional] layer: these weights do "
                  f"not belong to the cfg {cfg.path or ''} (file has {header.nbytes + data.size} "
                  f"bytes, the cfg needs {expected_size(cfg, header)})")
    return header, out


def _read_payload(f: BinaryIO, path: PathLike, progress: bool) -> np.ndarray:
    """Everything after the header into one preallocated uint8 array (chunked, with a progress bar)."""
    start = f.tell()
    size = os.fstat(f.fileno()).st_size - start
    data = np.empty(max(size, 0), dtype=np.uint8)
    view = memoryview(data)
    bar = None
    if progress:
        from tqdm import tqdm
        bar = tqdm(total=size, desc=f"reading {Path(path).name}", unit="B", unit_scale=True,
                   leave=False)
    try:
        done = 0
        while done < size:
            n = f.readinto(view[done:done + _CHUNK])
            if not n:
                break
            done += n
            if bar is not None:
                bar.update(n)
    finally:
        if bar is not None:
            bar.close()
    return data[:done]


def write_weights(path: PathLike, header: Header, blocks: Iterable[ConvWeights]) -> None:
    """Write a weights file: ``header`` then each block's arrays (float32, in file order)."""
    with open(path, "wb") as f:
        f.write(header.to_bytes())
        for block in blocks:
            for a in block.arrays():
                np.ascontiguousarray(a, dtype=FLOAT).tofile(f)
