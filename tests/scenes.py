"""Test images with content that resampling and colour changes can get wrong: a smooth gradient,
noise, and solid rectangles with their boxes (tests/data/test_image_ops.py,
test_numpy_pipeline.py)."""
from __future__ import annotations

import numpy as np


def textured_scene(rng: np.random.Generator, h: int, w: int, n: int):
    """A ``(h, w, 3)`` uint8 RGB image and its ``(n, 5)`` float32 boxes ``x1, y1, x2, y2, class``
    (each a solid rectangle of a random colour)."""
    yy, xx = np.mgrid[0:h, 0:w]
    image = np.stack([xx * 255 / w, yy * 255 / h, (xx + yy) * 127 / (h + w)], -1)
    image = image + rng.normal(0, 12, image.shape)
    boxes = []
    for _ in range(n):
        bw, bh = rng.uniform(8, w / 2), rng.uniform(8, h / 2)
        x1, y1 = rng.uniform(0, w - bw), rng.uniform(0, h - bh)
        image[int(y1):int(y1 + bh), int(x1):int(x1 + bw)] = rng.uniform(0, 255, 3)
        boxes.append([x1, y1, x1 + bw, y1 + bh, rng.integers(3)])
    return np.clip(image, 0, 255).astype(np.uint8), np.array(boxes, np.float32).reshape(-1, 5)
