"""The decoded images kept on the accelerator (``--cache device``): where each one lives in the
one uint8 buffer the device holds, and the buffer itself, filled once before training.

A run's training and validation images go one after another into a ``(P, 3)`` buffer of RGB
pixels, each image row by row at its cached size (:func:`yolo3.data.image_cache.cached_hw` of
its stream's longest side: training's covers the augmentation's largest scale, validation's only
the input size), each ``(path, h, w)`` once (a repeated record, or an image in both streams at
the same size, is kept once). Batches then carry only each element's window plans into that
buffer (:meth:`yolo3.data.batch_maker.BatchMaker.device_image_plans`); the resampling, the
mosaic, the letterbox and the colours run in the training step
(:mod:`yolo3.modeling.device_images`). The pixels are what ``--cache ram`` holds, bit for bit
(:func:`~yolo3.data.image_cache.decode_at`). NumPy and OpenCV only.
"""
from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Dict, Optional, Sequence, Tuple

import numpy as np

from yolo3.core.cpus import usable_cores
from yolo3.data.annotations import Record
from yolo3.data.dataset_config import record_geometry
from yolo3.data.image_cache import cached_hw, decode_at

__all__ = ["DeviceLayout", "MAX_PIXELS"]

MAX_PIXELS = 2 ** 31 - 1  # the device reads the buffer by int32 row: at most this many pixels

ImageKey = Tuple[str, int, int]  # the path and the cached (h, w)


@dataclass(frozen=True, eq=False)
class DeviceLayout:
    """Each kept image's ``key`` (path, cached ``h``, ``w``), EXIF ``orientation`` and first
    pixel ``start`` in the buffer, and the buffer's length ``pixels`` (``(pixels, 3)`` uint8)."""

    keys: Tuple[ImageKey, ...]
    orientations: Tuple[int, ...]
    starts: Tuple[int, ...]
    pixels: int

    @classmethod
    def of(cls, streams: Sequence[Tuple[Sequence[Record], Optional[int]]]) -> "DeviceLayout":
        """The layout of ``streams``, each its records and the longest side its images are kept
        at (None: their own size), in order, each key once."""
        keys, orientations, starts, seen, pixels = [], [], [], set(), 0
        for records, longest in streams:
            if not records:
                continue
            hws, found = record_geometry(records)
            for record, hw, orientation in zip(records, hws, found):
                h, w = cached_hw(hw, longest)
                key = (str(record.path), h, w)
                if key in seen:
                    continue
                seen.add(key)
                keys.append(key)
                orientations.append(int(orientation))
                starts.append(pixels)
                pixels += h * w
        return cls(tuple(keys), tuple(orientations), tuple(starts), pixels)

    @property
    def nbytes(self) -> int:
        """The buffer's bytes."""
        return 3 * self.pixels

    def __len__(self) -> int:
        return len(self.keys)

    def starts_of(self, paths: Sequence[str], hws: Sequence[Tuple[int, int]]) -> np.ndarray:
        """The first pixel (int64) of each image ``paths[i]`` kept at ``hws[i]``; KeyError naming
        one this layout does not hold."""
        where: Dict[ImageKey, int] = dict(zip(self.keys, self.starts))
        out = np.empty(len(paths), np.int64)
        for i, (path, (h, w)) in enumerate(zip(paths, hws)):
            key = (str(path), int(h), int(w))
            if key not in where:
                raise KeyError(f"{path} at {h}x{w} is not among the images kept on the device")
            out[i] = where[key]
        return out

    def fill(self, workers: Optional[int] = None, progress: bool = False) -> np.ndarray:
        """The buffer: uint8 ``(pixels, 3)``, every image decoded once (``workers`` threads, by
        default one per core; ``progress``: a bar on stderr)."""
        buffer = np.empty((self.pixels, 3), np.uint8)

        def put(i: int) -> None:
            path, h, w = self.keys[i]
            image = decode_at(path, self.orientations[i], (h, w))
            buffer[self.starts[i]:self.starts[i] + h * w] = image.reshape(-1, 3)

        count = max(1, usable_cores() if workers is None else int(workers))
        pool = ThreadPoolExecutor(count)
        try:
            done = pool.map(put, range(len(self)))
            if progress:
                from tqdm import tqdm
                done = tqdm(done, total=len(self), desc="images to the device", unit="img",
                            leave=False)
            for _ in done:
                pass
        except BaseException:  # a failure or Ctrl-C: the images not yet begun are not decoded
            pool.shutdown(wait=True, cancel_futures=True)
            raise
        pool.shutdown()
        return buffer
