"""keras-yolo3's ``yolo3.utils``: ``compose``, ``rand``, ``letterbox_image`` and
``get_random_data``, so that its ``train.py`` ``data_generator`` and ``yolo.py`` run unchanged.

These keep keras-yolo3's contracts (arguments, defaults, return values) and use yolo3's own parts:
the letterbox geometry of :mod:`yolo3.ops.letterbox` and the augmentation of
:mod:`yolo3.data.augment` (random parameters drawn from NumPy's global generator, as keras-yolo3's
``rand`` did, so ``np.random.seed`` makes them repeatable). For new code use the ``tf.data``
pipeline (:func:`yolo3.data.pipeline.make_dataset`): about 10x faster.
"""
from __future__ import annotations

from functools import reduce
from typing import Tuple

import numpy as np
from PIL import Image

from yolo3.core.errors import AnnotationError
from yolo3.data.annotations import _Sink, parse_text_annotations
from yolo3.data.augment import AugmentConfig, random_augment
from yolo3.data.images import load_image, probe_image
from yolo3.ops.letterbox import boxes_to_input, geometry_np, letterbox_np

__all__ = ["compose", "rand", "letterbox_image", "get_random_data"]


def compose(*funcs):
    """Compose functions left to right: ``compose(f, g)(x) == g(f(x))``. At least one function."""
    if not funcs:
        raise ValueError("Composition of empty sequence not supported.")
    return reduce(lambda f, g: lambda *a, **kw: g(f(*a, **kw)), funcs)


def rand(a: float = 0, b: float = 1) -> float:
    """A uniform number in ``[a, b)`` from NumPy's global generator."""
    return np.random.rand() * (b - a) + a


def letterbox_image(image: Image.Image, size: Tuple[int, int]) -> Image.Image:
    """Resize a PIL image keeping its aspect ratio (bicubic) onto a gray (128, 128, 128) canvas of
    ``size`` = ``(w, h)``, centred; returns a new RGB PIL image. The placement is
    :func:`yolo3.ops.letterbox.geometry_np`'s, the one the decoders undo."""
    w, h = size
    new_hw, offset_hw, _ = geometry_np((image.height, image.width), (h, w))
    nh, nw = int(new_hw[0]), int(new_hw[1])
    resized = image.convert("RGB").resize((nw, nh), Image.BICUBIC)
    canvas = Image.new("RGB", (w, h), (128, 128, 128))
    canvas.paste(resized, (int(offset_hw[1]), int(offset_hw[0])))
    return canvas


def _read_line(annotation_line: str):
    """``(image path, boxes (N, 5) float32)`` of one keras-yolo3 text row (paths relative to the
    working folder); boxes without area are dropped, as keras-yolo3's generator did."""
    rows = parse_text_annotations(annotation_line, "<annotation line>",
                                  sink=_Sink(strict=True, drop_invalid_boxes=True))
    if len(rows) != 1:
        raise AnnotationError(None, f"expected one annotation line, got {annotation_line!r}")
    path, boxes, _ = rows[0]
    return path, boxes


def _pad(boxes: np.ndarray, max_boxes: int) -> np.ndarray:
    """Shuffle the boxes (NumPy's global generator, as keras-yolo3), keep ``max_boxes``, pad."""
    out = np.zeros((max_boxes, 5))
    if len(boxes):
        boxes = np.array(boxes, np.float64)
        np.random.shuffle(boxes)
        boxes = boxes[:max_boxes]
        out[:len(boxes)] = boxes
    return out


def get_random_data(annotation_line: str, input_shape, random: bool = True, max_boxes: int = 20,
                    jitter: float = .3, hue: float = .1, sat: float = 1.5, val: float = 1.5,
                    proc_img: bool = True):
    """One training example from a keras-yolo3 annotation line.

    input_shape ``(h, w)``. Returns ``(image_data (h, w, 3) float32 in [0, 1], box_data
    (max_boxes, 5) x1, y1, x2, y2, class in input pixels, zero rows padding)``. ``random``: random
    scale 0.25-2, aspect jitter, placement, flip and HSV (``hue`` shift, ``sat``/``val`` factors),
    boxes clipped and those 1 pixel or smaller dropped; otherwise a plain letterbox (and with
    ``proc_img=False`` only the boxes: ``image_data`` is 0).
    """
    import tensorflow as tf


    path, boxes = _read_line(annotation_line)
    h, w = (int(v) for v in input_shape)
    if not random:
        mapped = boxes_to_input(tf.constant(boxes, tf.float32), probe_image(path)[0], (h, w))
        image_data = letterbox_np(load_image(path), (h, w)) if proc_img else 0
        return image_data, _pad(mapped.numpy(), max_boxes)
    image = tf.cast(load_image(path), tf.float32) / 255.0
    seed = tf.constant(np.random.randint(0, 2 ** 31 - 1, size=2), tf.int64)
    config = AugmentConfig(jitter=jitter, scale=(0.25, 2.0), flip=0.5, hue=hue, saturation=sat,
                           value=val, min_box_size=1.0)
    canvas, kept = random_augment(image, tf.constant(boxes, tf.float32), tf.constant((h, w)), seed,
                                  config)
    return canvas.numpy(), _pad(kept.numpy(), max_boxes)

