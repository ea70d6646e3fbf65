"""Darknet's published COCO weights: where they are, and how to tell a complete, right file.

Joseph Redmon published ``yolov3.weights``, ``yolov3-spp.weights`` and ``yolov3-tiny.weights``
(80 COCO classes) at ``https://pjreddie.com/media/files/<name>``; that address has answered with
its home page instead of the file since 2025 (pjreddie/darknet#2655), and the same files are
mirrored by the maintained Darknet fork's releases
(``https://github.com/hank-ai/darknet/releases/download/v2.0/<name>``, hank-ai/darknet#21).

Each file's size follows from its cfg (a 20-byte header, then every convolution's parameters as
float32: :func:`yolo3.darknet.weights.expected_size`); the checksums are the files' own: SHA-256
where a copy was measured here, else the MD5 that Darknet's maintainers published. No code here
downloads anything: :func:`identify` names a file a user brought, :func:`refusal` gives the one
line for a download that went wrong (a web page, or a file cut short).
"""
from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from typing import Optional, Tuple

from yolo3.core.errors import PathLike

__all__ = ["PublishedWeights", "PUBLISHED", "identify", "refusal", "ADDRESSES"]

ADDRESSES = ("https://github.com/hank-ai/darknet/releases/download/v2.0/{name}",
             "https://pjreddie.com/media/files/{name}")
_CHUNK = 1 << 22


@dataclass(frozen=True)
class PublishedWeights:
    """One published file: its ``name``, the ``cfg`` it belongs to, the ``variant`` yolo3 builds
    from it, its ``size`` in bytes and checksums (hex; None where unknown)."""

    name: str
    cfg: str
    variant: str
    size: int
    sha256: Optional[str]
    md5: Optional[str]

    def describe(self) -> str:
        return f"Darknet's published {self.name} ({self.variant}, COCO's 80 classes; cfg {self.cfg})"


PUBLISHED: Tuple[PublishedWeights, ...] = (
    PublishedWeights("yolov3.weights", "yolov3.cfg", "yolov3", 248_007_048, None,
                     "c84e5b99d0e52cd466ae710cadf6d84c"),
    PublishedWeights("yolov3-spp.weights", "yolov3-spp.cfg", "yolov3-spp", 252_209_544, None, None),
    PublishedWeights("yolov3-tiny.weights", "yolov3-tiny.cfg", "tiny", 35_434_956,
                     "dccea06f59b781ec1234ddf8d1e94b9519a97f4245748a7d4db75d5b7080a42c",
                     "3bcd6b390912c18924b46b26a9e7ff53"),
)


def _digests(path: str) -> Tuple[str, str]:
    sha, md5 = hashlib.sha256(), hashlib.md5()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(_CHUNK), b""):
            sha.update(chunk)
            md5.update(chunk)
    return sha.hexdigest(), md5.hexdigest()


def identify(path: PathLike) -> Optional[PublishedWeights]:
    """The published file ``path`` is, by its checksum (read only where its size is one of
    theirs), else None. A file of a published size whose checksum is unknown is named by its
    size and file name."""
    path = os.fspath(path)
    size = os.path.getsize(path)
    same_size = [p for p in PUBLISHED if p.size == size]
    if not same_size:
        return None
    sha, md5 = _digests(path)
    for p in same_size:
        if (p.sha256 and p.sha256 == sha) or (p.md5 and p.md5 == md5):
            return p
        if p.sha256 is None and p.md5 is None and os.path.basename(path) == p.name:
            return p
    return None


def refusal(path: PathLike) -> Optional[str]:
    """For weights that did not fit their cfg: one line saying why, where the cause is clear,
    else None. A web page saved under a weights name; a published file given with another cfg;
    a file named as a published one but shorter or longer than it (a download cut short, or
    another file)."""
    path = os.fspath(path)
    with open(path, "rb") as f:
        start = f.read(512).lstrip().lower()
    if start.startswith((b"<!doctype", b"<html", b"<?xml", b"{")):
        return ("this is a web page or a text file, not Darknet weights: the download was "
                "answered with a page instead of the file (pjreddie.com now does so); "
                f"download it again, e.g. from {ADDRESSES[0].format(name=os.path.basename(path))}")
    known = identify(path)
    if known is not None:
        return f"this is {known.describe()}: convert it with its own cfg, {known.cfg}"
    size = os.path.getsize(path)
    for p in PUBLISHED:
        if os.path.basename(path) == p.name and size != p.size:
            how = "cut short: the download is incomplete" if size < p.size else "longer than it"
            return (f"{size:,} bytes, where {p.name} as Darknet published it has {p.size:,}: "
                    f"{how}; download it again, e.g. from {ADDRESSES[0].format(name=p.name)}")
    return None
