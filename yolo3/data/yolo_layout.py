"""Writing a dataset in the YOLO layout (Darknet's and Ultralytics'): ``images/SPLIT/*`` beside
``labels/SPLIT/*.txt`` with one row ``class cx cy w h`` per box, normalised to 0..1 by the image
size, and a ``data.yaml`` naming the splits and the classes.

Images are linked (symbolic links where the file system allows, else copied), never re-encoded.
"""
from __future__ import annotations

import os
import shutil
from typing import Dict, Sequence

import numpy as np
from PIL import Image

from yolo3.data.annotations import Record

__all__ = ["label_rows", "write_yolo_layout"]


def label_rows(boxes: np.ndarray, image_hw: Sequence[int]) -> str:
    """``class cx cy w h`` rows (normalised, 6 decimals) of ``boxes`` ``(N, 5)`` pixel
    ``x1, y1, x2, y2, class`` in an image of ``(h, w)``."""
    h, w = (float(v) for v in image_hw)
    lines = []
    for x1, y1, x2, y2, cls in np.asarray(boxes, np.float64).reshape(-1, 5):
        lines.append(f"{int(cls)} {(x1 + x2) / 2 / w:.6f} {(y1 + y2) / 2 / h:.6f} "
                     f"{(x2 - x1) / w:.6f} {(y2 - y1) / h:.6f}")
    return "".join(line + "\n" for line in lines)


def _link(source: str, target: str) -> None:
    try:
        os.symlink(os.path.abspath(source), target)
    except OSError:
        shutil.copyfile(source, target)


def write_yolo_layout(out_dir: str, splits: Dict[str, Sequence[Record]],
                      class_names: Sequence[str]) -> str:
    """Write ``splits`` (``{"train": records, "val": records, ...}``) under ``out_dir`` in the YOLO
    layout; returns the path of ``data.yaml``. Image names are made unique per split by their
    index; an image without boxes gets an empty label file (a negative)."""
    lines = [f"path: {os.path.abspath(out_dir)}"]
    for split, records in splits.items():
        images = os.path.join(out_dir, "images", split)
        labels = os.path.join(out_dir, "labels", split)
        os.makedirs(images, exist_ok=True)
        os.makedirs(labels, exist_ok=True)
        for i, record in enumerate(records):
            stem = f"{i:06d}_{os.path.splitext(os.path.basename(record.path))[0]}"
            extension = os.path.splitext(record.path)[1].lower()
            _link(record.path, os.path.join(images, stem + extension))
            hw = record.image_hw
            if hw is None:
                with Image.open(record.path) as im:
                    hw = (im.height, im.width)
            with open(os.path.join(labels, stem + ".txt"), "w", encoding="utf-8") as f:
                f.write(label_rows(record.boxes, hw))
        lines.append(f"{split}: images/{split}")
    lines.append("names:")
    lines += [f"  {i}: {name!r}" for i, name in enumerate(class_names)]
    path = os.path.join(out_dir, "data.yaml")
    with open(path, "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")
    return path
