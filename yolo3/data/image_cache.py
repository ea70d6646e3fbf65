"""Each training image decoded once: the decoded-image cache (``--cache ram|disk``).

:class:`DecodedImages` hands the NumPy pipeline each record's uint8 RGB image, EXIF orientation
applied, no larger than the recipe needs: its longer side at most ``longest`` pixels (the largest
input side times the augmentation's largest scale, multi-scale included; tiles cut windows at the
image's own resolution, so with tiles nothing is made smaller). A smaller copy is made with
OpenCV's area resampling. Its figures are known before anything is decoded (:meth:`nbytes`), from
the headers.

- ``none``: decoded at every use (what the pipeline did before).
- ``ram``: kept in this process's memory after the first use (thread-safe: a race decodes an
  image twice, never wrongly). :func:`check_ram` refuses a cache larger than half the memory
  available (:class:`~yolo3.core.errors.NotEnoughMemory`, with the figures). :meth:`share`
  moves it into one shared-memory block (every image's place known from the headers, a byte per
  image saying it is there) that worker processes fill and read together: one copy for all.
- ``disk``: one file per image under ``$YOLO3_CACHE_DIR/decoded/`` (never among the user's
  images), named by the image's absolute path, size, modification time, orientation and the
  cached size, so a changed image gets a new entry. An entry holds a header, the pixels and their
  CRC-32; one that is damaged (short, another shape, another checksum) is named in a warning,
  decoded again and rewritten.
"""
from __future__ import annotations

import hashlib
import logging
import os
import struct
import threading
import weakref
import zlib
from multiprocessing import shared_memory
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

import cv2
import numpy as np

from yolo3.config.choices import HOST_IMAGE_CACHES
from yolo3.core.errors import NotEnoughMemory
from yolo3.core.fileio import atomic_write, remove_stale_temporaries
from yolo3.core.file_cache import file_stamp
from yolo3.core.memory import available_memory, gigabytes
from yolo3.core.paths import user_cache_dir
from yolo3.data.image_ops import decode_image_np

logger = logging.getLogger(__name__)

__all__ = ["DecodedImages", "remove_block", "cached_hw", "check_ram", "decode_at", "RAM_SHARE",
           "ENTRY_MAGIC"]

RAM_SHARE = 0.5  # a RAM cache may take at most this share of the memory available
ENTRY_MAGIC = b"Y3DEC01\0"
_HEADER = struct.Struct("<8sIII")  # magic, height, width, CRC-32 of the pixels


def cached_hw(image_hw: Sequence[int], longest: Optional[int]) -> Tuple[int, int]:
    """The ``(h, w)`` kept of an ``image_hw`` image: unchanged when its longer side is at most
    ``longest`` (or ``longest`` is None), else scaled down to it (aspect kept, at least 1)."""
    h, w = int(image_hw[0]), int(image_hw[1])
    if longest is None or max(h, w) <= longest:
        return h, w
    scale = float(longest) / max(h, w)
    return max(1, int(round(h * scale))), max(1, int(round(w * scale)))


def decode_at(path: str, orientation: int, hw: Sequence[int]) -> np.ndarray:
    """``path`` decoded (EXIF ``orientation`` applied) at the cached size ``hw`` ``(h, w)``: uint8
    ``(h, w, 3)`` RGB, made smaller with OpenCV's area resampling where it is larger (what every
    cache of this module holds)."""
    image = decode_image_np(path, orientation)
    h, w = int(hw[0]), int(hw[1])
    if image.shape[:2] != (h, w):
        image = cv2.resize(image, (w, h), interpolation=cv2.INTER_AREA)
    return np.ascontiguousarray(image)


def check_ram(n_bytes: int, count: int, available: Optional[int] = None,
              kind: str = "ram") -> None:
    """Refuse a RAM cache of ``n_bytes`` (``count`` images) larger than :data:`RAM_SHARE` of the
    memory available (NotEnoughMemory naming both figures and the other choices). ``kind``: the
    cache asked for (``device`` on a machine whose device is its CPU)."""
    available = available_memory() if available is None else available
    if available is not None and n_bytes > RAM_SHARE * available:
        raise NotEnoughMemory(
            f"--cache {kind}: the {count} decoded images need {gigabytes(n_bytes)}, more than "
            f"{RAM_SHARE:.0%} of the {gigabytes(available)} of memory available; use --cache "
            "disk (under $YOLO3_CACHE_DIR) or --cache none")


class DecodedImages:
    """The uint8 images of ``paths`` (displayed sizes ``image_hws``, EXIF ``orientations``),
    decoded once where ``kind`` keeps them (module docstring). ``folder``: the disk cache's
    folder (default ``$YOLO3_CACHE_DIR/decoded``)."""

    def __init__(self, paths: Sequence[str], orientations: Sequence[int],
                 image_hws: Sequence[Tuple[int, int]], kind: str = "none",
                 longest: Optional[int] = None, folder: Optional[str] = None):
        if kind not in HOST_IMAGE_CACHES:
            raise ValueError(f"cache {kind!r}: expected one of {', '.join(HOST_IMAGE_CACHES)}")
        self.paths = list(paths)
        self.orientations = [int(o) for o in orientations]
        self.image_hws = [(int(h), int(w)) for h, w in image_hws]
        self.kind = kind
        self.longest = None if longest is None else int(longest)
        self.folder = Path(folder or os.path.join(user_cache_dir(), "decoded"))
        self._ram: Dict[int, np.ndarray] = {}
        self._lock = threading.Lock()
        self.rebuilt: List[str] = []  # damaged disk entries decoded again (their files)
        if kind == "disk" and self.folder.is_dir():
            remove_stale_temporaries(self.folder)  # what killed writers left (entries: no sweep)
        self._shared: Optional[shared_memory.SharedMemory] = None
        self._owner = False

    # -- one RAM cache for several processes
    def share(self) -> str:
        """Move the RAM cache into a shared-memory block (its name returned); this object, and
        copies of it pickled into other processes, then fill and read that block. The block is
        removed when this object is collected or the process ends."""
        if self.kind != "ram":
            raise ValueError(f"only a ram cache is shared, not {self.kind!r}")
        if self._shared is None:
            offsets = [0]
            for i in range(len(self)):
                h, w = self.hw(i)
                offsets.append(offsets[-1] + h * w * 3)
            self._offsets = offsets
            size = max(1, len(self) + offsets[-1])
            self._shared = shared_memory.SharedMemory(create=True, size=size)
            self._owner = True
            self._attach()
            for index, image in list(self._ram.items()):  # what this process already decoded
                self._store(index, image)
            self._ram.clear()
            weakref.finalize(self, remove_block, self._shared)
        return self._shared.name

    def _attach(self) -> None:
        n = len(self)
        self._filled = np.ndarray((n,), np.uint8, self._shared.buf, 0)
        if self._owner:
            self._filled[:] = 0

    def _view(self, index: int) -> np.ndarray:
        h, w = self.hw(index)
        start = len(self) + self._offsets[index]
        return np.ndarray((h, w, 3), np.uint8, self._shared.buf, start)

    def _store(self, index: int, image: np.ndarray) -> np.ndarray:
        view = self._view(index)
        view[...] = image  # the pixels first, then the byte that says they are there
        self._filled[index] = 1
        return view

    def __getstate__(self):
        state = dict(self.__dict__)
        state.pop("_lock"), state.pop("_filled", None)
        state["_ram"] = {}
        state["_owner"] = False
        state["_shared"] = None if self._shared is None else self._shared.name
        return state

    def __setstate__(self, state):
        name = state.pop("_shared")
        self.__dict__.update(state)
        self._lock = threading.Lock()
        self._shared = None
        if name is not None:
            self._shared = shared_memory.SharedMemory(name=name)
            self._attach()

    def __len__(self) -> int:
        return len(self.paths)

    def hw(self, index: int) -> Tuple[int, int]:
        """The ``(h, w)`` :meth:`get` gives for image ``index``."""
        if self.kind == "none":
            return self.image_hws[index]
        return cached_hw(self.image_hws[index], self.longest)

    def nbytes(self) -> int:
        """The bytes the cache holds once every image is in it (0 for ``none``)."""
        if self.kind == "none":
            return 0
        return sum(h * w * 3 for h, w in (self.hw(i) for i in range(len(self))))

    def get(self, index: int) -> np.ndarray:
        """Image ``index``, uint8 ``(h, w, 3)`` RGB (:meth:`hw`); treat it as read-only."""
        if self._shared is not None:
            if self._filled[index]:
                return self._view(index)
            return self._store(index, self._decode(index))
        if self.kind == "ram":
            image = self._ram.get(index)
            if image is None:
                image = self._decode(index)
                image.flags.writeable = False
                with self._lock:
                    image = self._ram.setdefault(index, image)
            return image
        if self.kind == "disk":
            return self._from_disk(index)
        return decode_image_np(self.paths[index], self.orientations[index])

    def _decode(self, index: int) -> np.ndarray:
        return decode_at(self.paths[index], self.orientations[index], self.hw(index))

    def entry_path(self, index: int) -> Path:
        """The disk entry of image ``index``: named by the file's absolute path and stamp (size,
        modification time), its orientation and the cached size."""
        path = os.path.abspath(self.paths[index])
        h, w = self.hw(index)
        key = f"{path}\0{file_stamp(path)}\0{self.orientations[index]}\0{h}x{w}"
        return self.folder / f"{hashlib.sha1(key.encode()).hexdigest()}.y3img"

    def _from_disk(self, index: int) -> np.ndarray:
        entry = self.entry_path(index)
        expected = self.hw(index)
        try:
            data = entry.read_bytes()
        except FileNotFoundError:
            data = None
        except OSError as e:
            logger.warning("decoded-image cache: cannot read %s (%s); decoding %s again", entry,
                           e.strerror or e, self.paths[index])
            data = None
        if data is not None:
            image = read_entry(data, expected)
            if image is not None:
                return image
            logger.warning("decoded-image cache: %s (of %s) is damaged; decoded again and "
                           "rewritten", entry, self.paths[index])
            self.rebuilt.append(str(entry))
        image = self._decode(index)
        try:
            atomic_write(entry, lambda tmp: Path(tmp).write_bytes(entry_bytes(image)),
                         sweep=False, sync=False)
        except OSError as e:  # a cache that cannot be written only costs time
            logger.warning("decoded-image cache: cannot write %s (%s)", entry, e.strerror or e)
        return image


def remove_block(block: shared_memory.SharedMemory) -> None:
    """Close and unlink a shared-memory block this process created (arrays still pointing into
    it keep their memory; a block already gone is no error)."""
    try:
        block.close()
    except BufferError:  # images handed out still point into it: the memory goes with them
        pass
    try:
        block.unlink()
    except FileNotFoundError:
        pass


def entry_bytes(image: np.ndarray) -> bytes:
    """A disk entry: header (magic, height, width, CRC-32), then the uint8 pixels."""
    pixels = np.ascontiguousarray(image, np.uint8).tobytes()
    h, w = image.shape[:2]
    return _HEADER.pack(ENTRY_MAGIC, h, w, zlib.crc32(pixels)) + pixels


def read_entry(data: bytes, expected_hw: Tuple[int, int]) -> Optional[np.ndarray]:
    """The image of a disk entry, or None when it is damaged: too short or long, another magic,
    another shape than ``expected_hw``, or pixels that fail their CRC-32."""
    if len(data) < _HEADER.size:
        return None
    magic, h, w, crc = _HEADER.unpack_from(data)
    pixels = data[_HEADER.size:]
    if (magic != ENTRY_MAGIC or (h, w) != tuple(expected_hw) or len(pixels) != h * w * 3
            or zlib.crc32(pixels) != crc):
        return None
    return np.frombuffer(pixels, np.uint8).reshape(h, w, 3)
