"""The largest sizes yolo3 takes from a file before it allocates by them: one table, one check.

A number read from a file that sizes memory or work (a frame number, a layer's filters, a
network's input side, a class count) is checked here before anything is allocated by it, so
that one line of a file cannot grow memory without end: the reader refuses it naming the file,
the line and the limit. Plain Python.
"""
from __future__ import annotations

from typing import Dict, Optional, Tuple

__all__ = ["LIMITS", "beyond_limit"]

LIMITS: Dict[str, Tuple[int, str]] = {
    "frame": (200_000, "frames in one sequence (about 1 h 50 min at 30 frames/s)"),
    "filters": (65_536, "filters in one layer"),
    "kernel": (64, "pixels on a kernel's side"),
    "stride": (64, "pixels of a stride"),
    "image side": (65_536, "pixels on an image's or a network input's side"),
    "channels": (4_096, "input channels"),
    "classes": (100_000, "classes"),
}


def beyond_limit(kind: str, value: int, what: Optional[str] = None) -> Optional[str]:
    """Why ``value`` (a ``kind`` of :data:`LIMITS`, called ``what`` in the message) is too large,
    or None when it is within the limit."""
    limit, meaning = LIMITS[kind]
    if value <= limit:
        return None
    return (f"{what or kind} {value} is beyond {limit:,}, the most {meaning} yolo3 takes: "
            "the file is damaged, or not what it should be")
