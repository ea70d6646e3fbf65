"""Representative images for int8 calibration (and for checking exports): from an annotation file
or a folder of images, letterboxed to the model's input with the one letterbox."""
from __future__ import annotations

import os
from typing import List, Sequence, Tuple

import numpy as np

from yolo3.core.errors import ArgumentError, PathLike, SettingError
from yolo3.data.annotations import load_annotations
from yolo3.data.images import is_image_file, load_image
from yolo3.data.synthetic import render_image
from yolo3.ops.letterbox import letterbox_np

__all__ = ["calibration_paths", "calibration_images", "sample_images"]


def calibration_paths(source: PathLike, count: int, seed: int = 0) -> List[str]:
    """Up to ``count`` image paths from ``source``: an annotation file (text rows, VOC, COCO: its
    images) or a folder (its image files, recursively). A seeded sample when there are more."""
    source = os.fspath(source)
    if not os.path.exists(source):
        raise ArgumentError(f"calibration source not found: {source}")
    if os.path.isdir(source) and not any(f.endswith(".xml") for f in os.listdir(source)):
        paths = sorted(os.path.join(root, name) for root, _, names in os.walk(source)
                       for name in names if is_image_file(name))
        if not paths:
            raise ArgumentError(f"{source}: folder has no images (.jpg, .jpeg, .png, .bmp, .gif)")
    else:
        paths = sorted({r.path for r in load_annotations(source, check_images=False)})
        if not paths:
            raise ArgumentError(f"{source}: no images in the annotation file")
    if count < 1:
        raise SettingError(f"calibration_images must be >= 1, got {count}", "calibration_images")
    if len(paths) > count:
        chosen = np.random.default_rng(seed).choice(len(paths), size=count, replace=False)
        paths = [paths[i] for i in sorted(chosen)]
    return paths


def calibration_images(paths: Sequence[str], input_hw: Tuple[int, int],
                       progress: bool = True) -> List[np.ndarray]:
    """The images letterboxed to ``input_hw``: float32 ``(h, w, 3)`` in [0, 1] (``progress``: a
    progress bar while they load)."""
    from tqdm import tqdm

    return [letterbox_np(load_image(p), input_hw)
            for p in tqdm(paths, desc="calibration images", unit="img", leave=False,
                          disable=not progress)]


def sample_images(input_hw: Tuple[int, int], count: int = 4, seed: int = 0) -> List[np.ndarray]:
    """Synthetic check images (solid shapes on textured backgrounds), letterboxed: for checking an
    export when no calibration images were given."""
    rng = np.random.default_rng(seed)
    sizes = [(int(input_hw[0] * f), int(input_hw[1] * g)) for f, g in
             ((1.0, 1.0), (0.75, 1.25), (1.5, 1.0), (0.6, 0.6))]
    return [letterbox_np(render_image(rng, sizes[i % len(sizes)],
                                      ("circle", "square", "triangle"))[0], input_hw)
            for i in range(count)]
