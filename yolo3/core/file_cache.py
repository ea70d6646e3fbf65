"""A small cache of facts about files, valid while a file keeps its size and modification time.

Used to skip work a previous run already did on the same files: the header of every image
(:func:`yolo3.data.images.probe_images`) and which images the training pipeline decodes
(:mod:`yolo3.data.verify`). Stored as JSON under :func:`yolo3.core.paths.user_cache_dir`; a missing,
damaged or unwritable cache only costs time. No TensorFlow here.
"""
from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Dict, Optional

from yolo3.core.fileio import write_text_atomic
from yolo3.core.paths import user_cache_dir

__all__ = ["FileCache", "file_stamp"]


def file_stamp(path: str) -> Optional[str]:
    """``"size:mtime_ns"`` of ``path``, or None when it cannot be read."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return f"{st.st_size}:{st.st_mtime_ns}"


class FileCache:
    """``{absolute path: value}`` remembered with each file's stamp; :meth:`get` gives a value only
    while the file is unchanged. :meth:`save` writes it back atomically (when anything changed)."""

    def __init__(self, name: str, enabled: bool = True):
        self.path = Path(user_cache_dir()) / name
        self.enabled = enabled
        self._entries: Dict[str, list] = self._load() if enabled else {}
        self._changed = False

    def _load(self) -> Dict[str, list]:
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {}
        return data if isinstance(data, dict) else {}

    def get(self, path: str, stamp: Optional[str] = None) -> Any:
        """The value stored for ``path`` if the file is unchanged (``stamp``: its current one,
        when already known), else None."""
        entry = self._entries.get(path)
        if not isinstance(entry, list) or len(entry) != 2:
            return None
        stamp = file_stamp(path) if stamp is None else stamp
        return entry[1] if stamp is not None and entry[0] == stamp else None

    def put(self, path: str, value: Any) -> None:
        stamp = file_stamp(path)
        if self.enabled and stamp is not None:
            self._entries[path] = [stamp, value]
            self._changed = True

    def forget(self, path: str) -> None:
        if self._entries.pop(path, None) is not None:
            self._changed = True

    def save(self) -> None:
        if not (self.enabled and self._changed):
            return
        try:
            write_text_atomic(self.path, json.dumps(self._entries))
            self._changed = False
        except OSError:
            pass  # a cache that cannot be written only costs time
