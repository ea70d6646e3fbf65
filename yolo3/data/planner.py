"""What happens to each training image, drawn once in NumPy: the one owner of the augmentation's
randomness and of every box transformation, shared by both input pipelines.

Both pipelines (tf.data, :mod:`yolo3.data.pipeline`, and the NumPy/OpenCV one,
:mod:`yolo3.data.numpy_pipeline`) ask :class:`Planner` what an element of an epoch is made of
(:class:`ElementPlan`: the source images, each one's tile window and augmentation draw, the mosaic
split, the input size) and get its final boxes from it too. Only the image operations are
pipeline-specific. Boxes are float32 ``(n, 5)`` pixel ``x1, y1, x2, y2, class``.

Randomness: element ``i`` of epoch ``e`` draws from ``default_rng([seed, e, 1, i])``; the shuffled
orders from ``[seed, e, 0, stream]``, a multi-scale group's size from ``[seed, e, 2, group]``, its
tile windows from ``[seed, e, 3, i]``: an image tiled training keeps whole is augmented exactly
as training without tiles would (a set with nothing small trains as resize-only does). A plan is
a pure function of ``(seed, epoch, index)``, so worker processes compute their own.
The recipe is keras-yolo3's ``get_random_data`` (random aspect jitter and scale, placement on a
gray canvas, horizontal flip, HSV), with the 4-image mosaic and object-biased tile windows.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np

from yolo3.ops.letterbox import geometry_np
from yolo3.ops.tiles import side_at_whole

__all__ = ["AugmentConfig", "AugmentDraw", "MultiScale", "TileSampling", "ElementPlan",
           "Planner", "draw_augment", "draw_tile_window", "window_boxes", "augment_boxes",
           "mosaic_boxes", "letterbox_boxes", "keep_larger_than", "pad_boxes_np"]


@dataclass(frozen=True)
class AugmentConfig:
    """Training augmentation settings (keras-yolo3 defaults).

    jitter: aspect ratio is multiplied by ``U(1-j, 1+j) / U(1-j, 1+j)``.
    scale: the longer fitted side is ``U(*scale)`` times the input side.
    flip: probability of a horizontal flip.
    hue: hue shift ``U(-hue, hue)`` (fraction of the colour circle).
    saturation, value: factors ``U(1, s)`` or ``1 / U(1, s)`` with equal odds.
    mosaic: probability of a 4-image mosaic (0 disables; the pipeline then decodes 1 image, not 4).
    min_box_size: boxes narrower or lower than this (pixels, after clipping) are dropped.
    """

    jitter: float = 0.3
    scale: Tuple[float, float] = (0.25, 2.0)
    flip: float = 0.5
    hue: float = 0.1
    saturation: float = 1.5
    value: float = 1.5
    mosaic: float = 0.0
    min_box_size: float = 1.0

    @classmethod
    def preset(cls, name: str) -> Optional["AugmentConfig"]:
        """``'full'`` (keras-yolo3's strength), ``'light'`` (small jitter and scale changes, for
        short runs and easy data such as the synthetic shapes) or ``'none'`` (-> None)."""
        if name == "full":
            return cls()
        if name == "light":
            return cls(jitter=0.1, scale=(0.7, 1.3), hue=0.05, saturation=1.2, value=1.2)
        if name == "none":
            return None
        raise ValueError(f"unknown augmentation preset {name!r}: expected full, light or none")

    @property
    def colours(self) -> bool:
        """Whether the HSV distortion changes anything."""
        return bool(self.hue or self.saturation != 1 or self.value != 1)


@dataclass(frozen=True)
class MultiScale:
    """Multi-scale training: every ``every`` batches pick an input size ``(h, w)`` from ``sizes``."""

    sizes: Tuple[Tuple[int, int], ...] = tuple((s, s) for s in range(320, 609, 32))
    every: int = 10


@dataclass(frozen=True)
class TileSampling:
    """How training windows are drawn (:mod:`yolo3.data.tiling`): ``size`` pixels, shares
    ``whole`` and ``background``, and ``min_visible``, each a fraction; ``whole_from``: the side
    (pixels at the whole-image resize) from which an object drawn for a window is shown whole
    instead (0: never; :func:`draw_tile_window`)."""

    size: int
    whole: float = 0.25
    background: float = 0.1
    min_visible: float = 0.5
    whole_from: float = 0.0

    def __post_init__(self):
        if int(self.size) != self.size or self.size < 1:
            raise ValueError(f"tile size {self.size!r}: expected a whole number of pixels >= 1")
        for name in ("whole", "background", "min_visible"):
            value = getattr(self, name)
            if not 0.0 <= value <= 1.0:
                raise ValueError(f"tile {name} {value!r}: expected a fraction from 0 to 1")
        if not np.isfinite(self.whole_from) or self.whole_from < 0:
            raise ValueError(f"tile whole_from {self.whole_from!r}: expected pixels >= 0")


@dataclass(frozen=True)
class AugmentDraw:
    """One image's augmentation: resized to ``new_hw``, pasted at ``offset_hw`` (may be negative:
    the image is cropped) on the input canvas, mirrored when ``flip``, then hue shifted by
    ``hue`` (mod 1), saturation and value scaled by ``sat`` and ``val``."""

    new_hw: Tuple[int, int]
    offset_hw: Tuple[int, int]
    flip: bool
    hue: float
    sat: float
    val: float


def draw_augment(rng: np.random.Generator, image_hw: Sequence[int], input_hw: Sequence[int],
                 cfg: AugmentConfig) -> AugmentDraw:
    """The random augmentation of one ``image_hw`` image on an ``input_hw`` canvas."""
    ih, iw = float(image_hw[0]), float(image_hw[1])
    h, w = float(input_hw[0]), float(input_hw[1])
    j = cfg.jitter
    u = rng.random(11)
    new_ar = iw / ih * (1 - j + 2 * j * u[0]) / (1 - j + 2 * j * u[1])
    scale = cfg.scale[0] + (cfg.scale[1] - cfg.scale[0]) * u[2]
    nh, nw = (scale * h, scale * h * new_ar) if new_ar < 1 else (scale * w / new_ar, scale * w)
    new_hw = (max(round(float(nh)), 1), max(round(float(nw)), 1))  # half to even, as np.round

    def start(room: float, draw: float) -> int:  # in [min(0, room), max(0, room)]
        sign = (room > 0) - (room < 0)
        return int(min(max(math.floor(draw * (room + sign)), min(room, 0)), max(room, 0)))

    def factor(a: float, b: float, limit: float) -> float:
        f = 1.0 + (max(limit, 1.0) - 1.0) * a
        return f if b < 0.5 else 1.0 / f

    offset = (start(h - new_hw[0], float(u[3])), start(w - new_hw[1], float(u[4])))
    return AugmentDraw(new_hw, offset,
                       bool(u[5] < cfg.flip), float(-cfg.hue + 2 * cfg.hue * u[6]),
                       factor(u[7], u[8], cfg.saturation), factor(u[9], u[10], cfg.value))


def _start_range(lo_edge: float, hi_edge: float, tile: float, side: float) -> Tuple[float, float]:
    """The whole-pixel window starts ``[low, high]`` along one side that hold ``[lo_edge,
    hi_edge]`` (its centre where it is longer than the tile), within ``[0, side - tile]``."""
    low, high = float(np.ceil(hi_edge - tile)), float(np.floor(lo_edge))
    if low > high:
        centre = (lo_edge + hi_edge) / 2.0
        low, high = float(np.ceil(centre - tile)), float(np.floor(centre))
    top = np.floor(side - tile)
    return min(max(low, 0.0), top), min(max(high, 0.0), top)


def draw_tile_window(rng: np.random.Generator, image_hw: Sequence[int], boxes: np.ndarray,
                     sampling: TileSampling, input_hw: Optional[Sequence[int]] = None
                     ) -> Tuple[int, int, int, int]:
    """The window ``(x1, y1, x2, y2)`` cut from one image (the whole image when the draw keeps it
    whole): with a bias toward the image's objects (:mod:`yolo3.data.tiling`). With
    ``sampling.whole_from`` and the ``input_hw`` the image is resized to, an object drawn for a
    window whose side there is at least that is shown on the whole image instead, and so is an
    image with no object under it, or none at all: each object trains at the scale of the view
    that detects it (:class:`yolo3.inference.tiled.TiledDetector` with the same ``whole_from``),
    and a set with nothing small trains as resize-only training does. Background windows then
    come from the images that do hold small objects (``sampling.background``)."""
    h, w = float(image_hw[0]), float(image_hw[1])
    th, tw = min(float(sampling.size), h), min(float(sampling.size), w)
    u = rng.random(5)
    if u[0] < sampling.whole:
        return 0, 0, int(w), int(h)
    n = len(boxes)
    handing_over = bool(sampling.whole_from) and input_hw is not None
    large = (side_at_whole(boxes, image_hw, input_hw) >= sampling.whole_from
             if n and handing_over else np.zeros(n, bool))
    if handing_over and large.all():  # nothing small here (or nothing at all) for a tile to find
        return 0, 0, int(w), int(h)
    if n and u[1] >= sampling.background:
        k = min(int(u[4] * n), n - 1)
        if large[k]:
            return 0, 0, int(w), int(h)
        box = boxes[k]
        x_low, x_high = _start_range(float(box[0]), float(box[2]), tw, w)
        y_low, y_high = _start_range(float(box[1]), float(box[3]), th, h)
        x, y = x_low + u[2] * (x_high - x_low), y_low + u[3] * (y_high - y_low)
    else:
        x, y = u[2] * (w - tw), u[3] * (h - th)
    x, y = np.floor(x), np.floor(y)
    return int(x), int(y), int(x + tw), int(y + th)


def keep_larger_than(boxes: np.ndarray, min_size: float) -> np.ndarray:
    """The boxes whose width and height both exceed ``min_size``."""
    keep = (boxes[:, 2] - boxes[:, 0] > min_size) & (boxes[:, 3] - boxes[:, 1] > min_size)
    return boxes[keep]


def window_boxes(boxes: np.ndarray, window: Sequence[int], min_visible: float) -> np.ndarray:
    """Boxes shifted into ``window`` ``(x1, y1, x2, y2)`` and clipped to it; a box left with less
    than ``min_visible`` of its area (or none) is dropped."""
    x0, y0, x1, y1 = (float(v) for v in window)
    shifted = boxes[:, :4] - np.array([x0, y0, x0, y0], np.float32)
    limit = np.array([x1 - x0, y1 - y0, x1 - x0, y1 - y0], np.float32)
    clipped = np.clip(shifted, 0.0, limit)

    def area(b):
        return np.maximum(b[:, 2] - b[:, 0], 0) * np.maximum(b[:, 3] - b[:, 1], 0)
    visible = area(clipped)
    keep = (visible > 0) & (visible >= min_visible * area(shifted))
    return np.concatenate([clipped, boxes[:, 4:5]], axis=1)[keep].astype(np.float32)


def augment_boxes(boxes: np.ndarray, image_hw: Sequence[int], draw: AugmentDraw,
                  input_hw: Sequence[int], min_size: float) -> np.ndarray:
    """Boxes of an ``image_hw`` image moved as ``draw`` moves its pixels, clipped to the canvas;
    boxes not wider and higher than ``min_size`` dropped."""
    sy, sx = draw.new_hw[0] / float(image_hw[0]), draw.new_hw[1] / float(image_hw[1])
    oy, ox = draw.offset_hw
    h, w = float(input_hw[0]), float(input_hw[1])
    # float32 throughout, as the float32 boxes times Python numbers are (one call per step)
    out = np.empty((len(boxes), 5), np.float32)
    out[:, :4] = boxes[:, :4] * np.array([sx, sy, sx, sy], np.float32)
    out[:, :4] += np.array([ox, oy, ox, oy], np.float32)
    if draw.flip:
        out[:, [0, 2]] = np.float32(w) - out[:, [2, 0]]
    np.clip(out[:, :4], np.float32(0), np.array([w, h, w, h], np.float32), out=out[:, :4])
    out[:, 4] = boxes[:, 4]
    return keep_larger_than(out, min_size)


def mosaic_boxes(boxes: Sequence[np.ndarray], split_yx: Sequence[int], input_hw: Sequence[int],
                 min_size: float) -> np.ndarray:
    """Four canvases' boxes, each clipped to its quarter (top-left, top-right, bottom-left,
    bottom-right of the split point ``(y, x)``)."""
    h, w = float(input_hw[0]), float(input_hw[1])
    cy, cx = float(split_yx[0]), float(split_yx[1])
    regions = np.array([(0.0, 0.0, cx, cy), (cx, 0.0, w, cy), (0.0, cy, cx, h), (cx, cy, w, h)],
                       np.float32)  # x1, y1, x2, y2 of each quarter
    counts = [len(b) for b in boxes]
    out = np.concatenate([np.asarray(b, np.float32).reshape(-1, 5) for b in boxes], axis=0)
    low = np.repeat(np.tile(regions[:, :2], 2), counts, axis=0)
    high = np.repeat(np.tile(regions[:, 2:], 2), counts, axis=0)
    np.clip(out[:, :4], low, high, out=out[:, :4])
    return keep_larger_than(out, min_size)


def letterbox_boxes(boxes: np.ndarray, image_hw: Sequence[int], input_hw: Sequence[int]
                    ) -> np.ndarray:
    """Boxes of an ``image_hw`` image on its letterboxed ``input_hw`` input (clipped to it);
    boxes left empty dropped."""
    _, offset, scale = geometry_np(image_hw, input_hw)
    oy, ox, sy, sx = offset[0], offset[1], scale[0], scale[1]
    h, w = float(input_hw[0]), float(input_hw[1])
    out = np.stack([np.clip(boxes[:, 0] * sx + ox, 0, w), np.clip(boxes[:, 1] * sy + oy, 0, h),
                    np.clip(boxes[:, 2] * sx + ox, 0, w), np.clip(boxes[:, 3] * sy + oy, 0, h),
                    boxes[:, 4]], axis=1).astype(np.float32)
    return keep_larger_than(out, 0.0)


def pad_boxes_np(boxes: np.ndarray, max_boxes: int) -> np.ndarray:
    """``(n, 5)`` -> ``(max_boxes, 5)`` float32: the first ``max_boxes``, zero rows after."""
    out = np.zeros((max_boxes, 5), np.float32)
    kept = boxes[:max_boxes]
    out[:len(kept)] = kept
    return out


@dataclass(frozen=True)
class ElementPlan:
    """One element of an epoch: ``sources`` (record indices: one, or four for a mosaic), each
    one's tile ``windows`` ``(x1, y1, x2, y2)`` (None: the whole image) and augmentation ``draws``
    (None: plain letterbox), the mosaic's ``split_yx`` (None: no mosaic), the ``input_hw`` and
    the final ``boxes`` ``(n, 5)`` on the input."""

    sources: Tuple[int, ...]
    windows: Optional[Tuple[Tuple[int, int, int, int], ...]]
    draws: Optional[Tuple[AugmentDraw, ...]]
    split_yx: Optional[Tuple[int, int]]
    input_hw: Tuple[int, int]
    boxes: np.ndarray

    def as_arrays(self, max_boxes: int) -> Dict[str, np.ndarray]:
        """Fixed-shape arrays (four source slots) for a tf.data map: ``sources`` (4,) int32,
        ``count``, ``windows`` (4, 4) int32 (-1: the whole image), ``new_hw`` / ``offset_hw``
        (4, 2) int32, ``flip`` (4,), ``hsv`` (4, 3) float32, ``split_yx`` (2,), ``input_hw``
        (2,) int32 and ``boxes`` ``(max_boxes, 5)``."""
        k = len(self.sources)
        sources = np.zeros(4, np.int32)
        sources[:k] = self.sources
        windows = np.full((4, 4), -1, np.int32)
        if self.windows is not None:
            windows[:k] = self.windows
        new_hw = np.ones((4, 2), np.int32)
        offset = np.zeros((4, 2), np.int32)
        flip = np.zeros(4, bool)
        hsv = np.tile(np.array([0.0, 1.0, 1.0], np.float32), (4, 1))
        for s, d in enumerate(self.draws or ()):
            new_hw[s], offset[s], flip[s] = d.new_hw, d.offset_hw, d.flip
            hsv[s] = d.hue, d.sat, d.val
        return dict(sources=sources, count=np.int32(k), windows=windows, new_hw=new_hw,
                    offset_hw=offset, flip=flip, hsv=hsv,
                    split_yx=np.asarray(self.split_yx or (0, 0), np.int32),
                    input_hw=np.asarray(self.input_hw, np.int32),
                    boxes=pad_boxes_np(self.boxes, max_boxes))


class Planner:
    """The plan of every element of every epoch for one dataset configuration.

    ``image_hws``: each record's displayed ``(h, w)``; ``boxes``: each record's ``(n, 5)`` boxes.
    ``training`` with ``augment`` None: letterboxed (tiles still cut); ``shuffle``: a new order
    each epoch; ``batch_size`` groups elements for multi-scale (one size per ``every`` batches).
    """

    def __init__(self, image_hws: Sequence[Tuple[int, int]], boxes: Sequence[np.ndarray],
                 input_hw: Tuple[int, int], seed: int, *, training: bool, shuffle: bool,
                 batch_size: int, augment: Optional[AugmentConfig] = None,
                 multi_scale: Optional[MultiScale] = None,
                 tiles: Optional[TileSampling] = None):
        if len(image_hws) != len(boxes) or not len(boxes):
            raise ValueError("a plan needs one image size per record, and at least one record")
        self.image_hws = [(int(h), int(w)) for h, w in image_hws]
        self.boxes = [np.asarray(b, np.float32).reshape(-1, 5) for b in boxes]
        self.input_hw = (int(input_hw[0]), int(input_hw[1]))
        self.seed = int(seed)
        self.shuffle = shuffle
        self.batch_size = int(batch_size)
        self.augment = augment if training else None
        self.multi_scale = multi_scale if training else None
        self.tiles = tiles if training else None
        self.mosaic = self.augment is not None and self.augment.mosaic > 0
        self._orders: Dict[int, List[np.ndarray]] = {}

    def __len__(self) -> int:
        return len(self.boxes)

    def orders(self, epoch: int) -> List[np.ndarray]:
        """The epoch's source order of each stream (one, four with mosaic)."""
        cached = self._orders  # worker threads may replace it meanwhile: read it once
        if epoch in cached:
            return cached[epoch]
        n = len(self.boxes)
        streams = []
        for k in range(4 if self.mosaic else 1):
            if self.shuffle or k > 0:
                streams.append(np.random.default_rng([self.seed, epoch, 0, k]).permutation(n))
            else:
                streams.append(np.arange(n))
        self._orders = {epoch: streams}  # one epoch at a time
        return streams

    def input_hw_at(self, epoch: int, index: int) -> Tuple[int, int]:
        if self.multi_scale is None:
            return self.input_hw
        group = index // (self.batch_size * self.multi_scale.every)
        sizes = self.multi_scale.sizes
        pick = np.random.default_rng([self.seed, epoch, 2, group]).integers(len(sizes))
        return int(sizes[pick][0]), int(sizes[pick][1])

    def element(self, epoch: int, index: int) -> ElementPlan:
        """What element ``index`` of ``epoch`` is made of, and its boxes."""
        rng = np.random.default_rng([self.seed, epoch, 1, index])
        tile_rng = (np.random.default_rng([self.seed, epoch, 3, index])
                    if self.tiles is not None else None)
        orders = self.orders(epoch)
        input_hw = self.input_hw_at(epoch, index)
        four = self.mosaic and rng.random() < self.augment.mosaic
        sources = tuple(int(o[index]) for o in (orders if four else orders[:1]))
        windows, images = [], []
        for s in sources:
            hw, b = self.image_hws[s], self.boxes[s]
            if self.tiles is not None:
                window = draw_tile_window(tile_rng, hw, b, self.tiles, input_hw)
                b = window_boxes(b, window, self.tiles.min_visible)
                hw = (window[3] - window[1], window[2] - window[0])
                windows.append(window)
            images.append((hw, b))
        if self.augment is None:
            (hw, b), = images
            return ElementPlan(sources, tuple(windows) or None, None, None, input_hw,
                               letterbox_boxes(b, hw, input_hw))
        draws = tuple(draw_augment(rng, hw, input_hw, self.augment) for hw, _ in images)
        moved = [augment_boxes(b, hw, d, input_hw, self.augment.min_box_size)
                 for (hw, b), d in zip(images, draws)]
        split = None
        if four:
            u = 0.25 + 0.5 * rng.random(2)
            split = (int(np.round(u[0] * input_hw[0])), int(np.round(u[1] * input_hw[1])))
            boxes = mosaic_boxes(moved, split, input_hw, self.augment.min_box_size)
        else:
            boxes = moved[0]
        return ElementPlan(sources, tuple(windows) or None, draws, split, input_hw, boxes)
