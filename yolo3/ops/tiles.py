"""Slicing an image into overlapping tiles and merging the tiles' detections (NumPy).

Boxes are ``(x1, y1, x2, y2)`` in continuous pixels; tile windows are integer pixel rectangles
``(x1, y1, x2, y2)`` (``x2``, ``y2`` exclusive). A tile is cut at native resolution: the detector
letterboxes it to its input size like any image, so small objects keep their pixels.

- :func:`tile_windows`: windows of ``tile`` pixels covering the image, evenly spread, neighbours
  overlapping by at least ``overlap`` of a tile; an image side shorter than a tile is one window
  of that side.
- :func:`cut_by_window`: which of a tile's boxes touch a window edge that lies inside the image
  (the object goes on past it: a neighbouring tile, or the whole-image pass, sees it whole).
- :func:`merge_detections`: per-class greedy NMS, or weighted box fusion, of several views'
  detections in image pixels.
- :func:`suggest_tile`: the tile size that brings a data set's small objects to a size the
  network sees (``yolo3 check`` prints it; ``train --tile auto`` uses it).
- :func:`side_at_whole`: boxes' sides at the whole-image resize, which decides which view owns an
  object: tiles the small ones, the whole image the rest (``whole_from``, in training windows and
  in the merge alike).
- :class:`Slicing`: how a model trained on tiles detects by default (its model file records it).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import List, Optional, Sequence, Tuple, Union

import numpy as np

from yolo3.core.errors import SettingError
from yolo3.ops.boxes import iou_xyxy

__all__ = ["MERGE_METHODS", "MAX_TILES", "check_tile_count", "tile_windows", "cut_by_window", "nms_per_class",
           "fuse_per_class", "merge_detections", "TileSize", "TileSuggestion", "suggest_tile",
           "SMALL_AT_INPUT", "WHOLE_SEES", "TINY_AT_INPUT", "TILE_SHARE", "Slicing",
           "side_at_whole", "left_to_whole"]

MERGE_METHODS = ("nms", "wbf")
MAX_TILES = 1024  # tiles of one image at most: more would take hours per image

TileSize = Union[int, Tuple[int, int]]
Detections = Tuple[np.ndarray, np.ndarray, np.ndarray]


@dataclass(frozen=True)
class Slicing:
    """Sliced detection as a model trained on tiles does it by default: tiles of ``tile`` pixels
    overlapping by ``overlap`` of a tile, plus the whole image (``whole_image``), merged by
    ``merge`` (one of :data:`MERGE_METHODS`); with the whole image seen, a tile's box whose side is
    at least ``whole_from`` pixels at the whole-image resize is left to the whole image (0: every
    box is kept; :func:`side_at_whole`). Recorded in the model file (``ModelInfo.slicing``)."""

    tile: int
    overlap: float = 0.2
    merge: str = "nms"
    whole_image: bool = True
    whole_from: float = 0.0

    def __post_init__(self):
        if isinstance(self.tile, bool) or not isinstance(self.tile, (int, np.integer)) or \
                self.tile < 32:
            raise ValueError(f"slicing: tile must be a whole number of pixels >= 32, got "
                             f"{self.tile!r}")
        if not 0 <= float(self.overlap) < 1:
            raise ValueError(f"slicing: overlap must be in [0, 1), got {self.overlap!r}")
        if self.merge not in MERGE_METHODS:
            raise ValueError(f"slicing: merge must be one of {', '.join(MERGE_METHODS)}, got "
                             f"{self.merge!r}")
        object.__setattr__(self, "tile", int(self.tile))
        object.__setattr__(self, "overlap", float(self.overlap))
        object.__setattr__(self, "whole_image", bool(self.whole_image))
        if not np.isfinite(float(self.whole_from)) or float(self.whole_from) < 0:
            raise ValueError(f"slicing: whole_from must be pixels >= 0, got {self.whole_from!r}")
        object.__setattr__(self, "whole_from", float(self.whole_from))

    def to_dict(self) -> dict:
        return {"tile": self.tile, "overlap": self.overlap, "merge": self.merge,
                "whole_image": self.whole_image, "whole_from": self.whole_from}

    @classmethod
    def from_dict(cls, data: dict) -> "Slicing":
        """The inverse of :meth:`to_dict` (a file written before ``whole_from`` existed: 0, every
        tile's box kept, as such a model was validated); unknown keys or bad values raise
        ValueError."""
        if not isinstance(data, dict) or "tile" not in data:
            raise ValueError(f"slicing: expected an object with a tile, got {data!r}")
        unknown = set(data) - {"tile", "overlap", "merge", "whole_image", "whole_from"}
        if unknown:
            raise ValueError(f"slicing: unknown keys {sorted(unknown)}")
        return cls(**data)


def _tile_hw(tile: TileSize) -> Tuple[int, int]:
    sides = (tile, tile) if np.isscalar(tile) else tuple(tile)
    if len(sides) != 2:
        raise ValueError(f"tile size {tile!r}: expected one or two positive whole numbers of pixels")
    th, tw = sides
    if int(th) != th or int(tw) != tw or th < 1 or tw < 1:
        raise ValueError(f"tile size {tile!r}: expected one or two positive whole numbers of pixels")
    return int(th), int(tw)


def _starts(size: int, tile: int, overlap: float) -> np.ndarray:
    """Window starts along one side: 0 ... ``size - tile``, evenly spread, with steps of at most
    ``tile * (1 - overlap)`` pixels."""
    if size <= tile:
        return np.zeros(1, np.int64)
    step = max(1.0, tile * (1.0 - overlap))
    count = int(np.ceil((size - tile) / step - 1e-9)) + 1
    return np.round(np.linspace(0, size - tile, count)).astype(np.int64)


def check_tile_count(image_sizes: Sequence[Sequence[int]], tile: TileSize,
                     overlap: float) -> None:
    """Refuse (a :class:`~yolo3.core.errors.SettingError` naming ``tile`` and ``overlap``, with
    the count) a tiling that would cut an image of one of ``image_sizes`` (``(height, width)``)
    into more than :data:`MAX_TILES` tiles."""
    th, tw = _tile_hw(tile)
    for h, w in {(int(hw[0]), int(hw[1])) for hw in image_sizes}:
        count = len(_starts(h, th, overlap)) * len(_starts(w, tw, overlap))
        if count > MAX_TILES:
            raise SettingError(f"tile {tile} with overlap {overlap:g} would cut an image of "
                               f"{w}x{h} pixels into {count} tiles, more than {MAX_TILES}: give "
                               "a larger tile or a smaller overlap", "tile", "overlap",
                               "tile_overlap")


def tile_windows(image_hw: Sequence[int], tile: TileSize, overlap: float = 0.2) -> np.ndarray:
    """The windows ``(T, 4)`` int64 ``(x1, y1, x2, y2)`` of ``tile`` pixels (one side, or
    ``(height, width)``) covering an image of ``image_hw``, rows first. Neighbours overlap by at
    least ``overlap`` (0 <= overlap < 1) of a tile, so an object no longer than that overlap lies
    whole inside some window."""
    if not 0.0 <= overlap < 1.0:
        raise ValueError(f"tile overlap {overlap!r}: expected a fraction in [0, 1)")
    h, w = int(image_hw[0]), int(image_hw[1])
    if h < 1 or w < 1:
        raise ValueError(f"image size {tuple(image_hw)}: expected positive height and width")
    check_tile_count([(h, w)], tile, overlap)
    th, tw = _tile_hw(tile)
    ys, xs = _starts(h, th, overlap), _starts(w, tw, overlap)
    y1, x1 = np.meshgrid(ys, xs, indexing="ij")
    y1, x1 = y1.ravel(), x1.ravel()
    return np.stack([x1, y1, np.minimum(x1 + tw, w), np.minimum(y1 + th, h)], axis=1)


def cut_by_window(boxes: np.ndarray, window: Sequence[int], image_hw: Sequence[int],
                  margin: float = 2.0) -> np.ndarray:
    """``(N,)`` bool: which boxes (image pixels) come within ``margin`` pixels of an edge of
    ``window`` that is not an edge of the image: the tile saw only part of that object."""
    boxes = np.asarray(boxes, np.float64).reshape(-1, 4)
    x1, y1, x2, y2 = (float(v) for v in window)
    h, w = float(image_hw[0]), float(image_hw[1])
    cut = np.zeros(len(boxes), bool)
    if x1 > 0:
        cut |= boxes[:, 0] <= x1 + margin
    if y1 > 0:
        cut |= boxes[:, 1] <= y1 + margin
    if x2 < w:
        cut |= boxes[:, 2] >= x2 - margin
    if y2 < h:
        cut |= boxes[:, 3] >= y2 - margin
    return cut


def nms_per_class(boxes: np.ndarray, scores: np.ndarray, classes: np.ndarray,
                  iou_threshold: float) -> np.ndarray:
    """Indices kept by greedy NMS within each class, by descending score (ties: the earlier box):
    a box is dropped when its IoU with a kept box of its class exceeds ``iou_threshold``."""
    boxes = np.asarray(boxes, np.float64).reshape(-1, 4)
    scores = np.asarray(scores, np.float64).reshape(-1)
    classes = np.asarray(classes).reshape(-1)
    keep: List[int] = []
    for k in np.unique(classes):
        idx = np.flatnonzero(classes == k)
        idx = idx[np.argsort(-scores[idx], kind="stable")]
        ious = iou_xyxy(boxes[idx], boxes[idx])
        alive = np.ones(len(idx), bool)
        for i in range(len(idx)):
            if not alive[i]:
                continue
            keep.append(int(idx[i]))
            alive[i + 1:] &= ious[i, i + 1:] <= iou_threshold
    keep_arr = np.asarray(keep, np.int64)
    return keep_arr[np.argsort(-scores[keep_arr], kind="stable")]


def fuse_per_class(boxes: np.ndarray, scores: np.ndarray, classes: np.ndarray,
                   iou_threshold: float) -> Detections:
    """Weighted box fusion within each class: boxes by descending score join the first cluster
    whose fused box they overlap by more than ``iou_threshold`` (else start one); a cluster's box
    is its members' score-weighted mean, its score the highest member's. Returns
    ``(boxes, scores, classes)`` by descending score."""
    boxes = np.asarray(boxes, np.float64).reshape(-1, 4)
    scores = np.asarray(scores, np.float64).reshape(-1)
    classes = np.asarray(classes).reshape(-1)
    out_b, out_s, out_c = [], [], []
    for k in np.unique(classes):
        idx = np.flatnonzero(classes == k)
        idx = idx[np.argsort(-scores[idx], kind="stable")]
        sums: List[np.ndarray] = []    # score-weighted box sums
        weights: List[float] = []
        best: List[float] = []
        for i in idx:
            fused = np.asarray([s / w for s, w in zip(sums, weights)]).reshape(-1, 4)
            ious = iou_xyxy(boxes[i:i + 1], fused)[0] if len(fused) else np.zeros(0)
            hits = np.flatnonzero(ious > iou_threshold)
            if len(hits):
                j = int(hits[0])
                sums[j] = sums[j] + scores[i] * boxes[i]
                weights[j] += scores[i]
            else:
                sums.append(scores[i] * boxes[i])
                weights.append(float(scores[i]))
                best.append(float(scores[i]))
        for s, w, b in zip(sums, weights, best):
            out_b.append(s / w if w > 0 else s)
            out_s.append(b)
            out_c.append(k)
    if not out_b:
        return np.zeros((0, 4)), np.zeros(0), np.zeros(0, classes.dtype)
    b, s, c = np.asarray(out_b), np.asarray(out_s), np.asarray(out_c, classes.dtype)
    order = np.argsort(-s, kind="stable")
    return b[order], s[order], c[order]


def merge_detections(views: Sequence[Detections], iou_threshold: float, method: str = "nms",
                     max_boxes: int = 0) -> Detections:
    """One image's detections from several views (the tiles' and the whole image's, all in image
    pixels): concatenated, then per-class NMS or weighted box fusion (``method``); at most
    ``max_boxes`` (0: all), by descending score. Returns float32 boxes and scores, int32 classes."""
    if method not in MERGE_METHODS:
        raise ValueError(f"merge method {method!r}: expected one of {', '.join(MERGE_METHODS)}")
    views = list(views)
    boxes = np.concatenate([np.asarray(v[0], np.float64).reshape(-1, 4) for v in views]
                           or [np.zeros((0, 4))])
    scores = np.concatenate([np.asarray(v[1], np.float64).reshape(-1) for v in views]
                            or [np.zeros(0)])
    classes = np.concatenate([np.asarray(v[2]).reshape(-1).astype(np.int64) for v in views]
                             or [np.zeros(0, np.int64)])
    if method == "nms":
        keep = nms_per_class(boxes, scores, classes, iou_threshold)
        boxes, scores, classes = boxes[keep], scores[keep], classes[keep]
    else:
        boxes, scores, classes = fuse_per_class(boxes, scores, classes, iou_threshold)
    if max_boxes:
        boxes, scores, classes = boxes[:max_boxes], scores[:max_boxes], classes[:max_boxes]
    return boxes.astype(np.float32), scores.astype(np.float32), classes.astype(np.int32)


# an object whose side (sqrt(w * h)) is under this many pixels at the network input is small:
# two cells of the finest stride (8) of YOLOv3, one of tiny's (16)
SMALL_AT_INPUT = 16.0
# from this side (sqrt(w * h)) at the network input on, an object trains on, and is detected
# from, the whole image in tiled training: the default hand-over (TrainConfig.tile_whole_from;
# docs/benchmarks.md, "Tiles over a range of object sizes": tiles won only for objects under 8 px)
WHOLE_SEES = 6.0
# suggest_tile's rule: tiles are suggested when at least TILE_SHARE of the boxes are under
# TINY_AT_INPUT pixels at the input, where tiles gained and resize-only tied (docs/benchmarks.md,
# "Tiles over a range of object sizes")
TINY_AT_INPUT = 8.0
TILE_SHARE = 0.40


def left_to_whole(boxes: np.ndarray, scores: np.ndarray, classes: np.ndarray,
                  whole_boxes: np.ndarray, whole_scores: np.ndarray, whole_classes: np.ndarray,
                  image_hw: Sequence[int], input_hw: Sequence[int], whole_from: float,
                  inside: float = 0.5) -> np.ndarray:
    """Which tiles' boxes ``(N, 4)`` (image pixels; ``scores``, ``classes`` ``(N,)``) sliced
    detection leaves to the whole image's ``whole_boxes`` ``(M, 4)`` (``whole_scores``,
    ``whole_classes`` ``(M,)``), an image of ``image_hw`` seen whole at ``input_hw``: ``(N,)``
    bool. Those whose side at the whole image is at least ``whole_from`` pixels
    (:func:`side_at_whole`), and those with at least ``inside`` of their area inside a
    whole-image box of their class that large and scored at least as high: pieces of an object
    the whole image found, which a tile shows larger than the model learned it (a low-scored
    whole-image box owns nothing: measured, such boxes swallowed the tiles' true small objects)."""
    boxes = np.asarray(boxes, np.float64).reshape(-1, 4)
    whole_boxes = np.asarray(whole_boxes, np.float64).reshape(-1, 4)
    drop = side_at_whole(boxes, image_hw, input_hw) >= whole_from
    owners = side_at_whole(whole_boxes, image_hw, input_hw) >= whole_from
    if not len(boxes) or not owners.any():
        return drop
    big, big_classes = whole_boxes[owners], np.asarray(whole_classes).reshape(-1)[owners]
    big_scores = np.asarray(whole_scores, np.float64).reshape(-1)[owners]
    x1 = np.maximum(boxes[:, None, 0], big[None, :, 0])
    y1 = np.maximum(boxes[:, None, 1], big[None, :, 1])
    x2 = np.minimum(boxes[:, None, 2], big[None, :, 2])
    y2 = np.minimum(boxes[:, None, 3], big[None, :, 3])
    overlap = np.clip(x2 - x1, 0, None) * np.clip(y2 - y1, 0, None)
    area = np.clip(boxes[:, 2] - boxes[:, 0], 0, None) * np.clip(boxes[:, 3] - boxes[:, 1], 0, None)
    same = np.asarray(classes).reshape(-1)[:, None] == big_classes[None, :]
    surer = big_scores[None, :] >= np.asarray(scores, np.float64).reshape(-1)[:, None]
    within = same & surer & (overlap >= inside * np.maximum(area, 1e-12)[:, None])
    return drop | within.any(axis=1)


def side_at_whole(boxes: np.ndarray, image_hw: Sequence[int],
                  input_hw: Sequence[int]) -> np.ndarray:
    """The side ``sqrt(w * h)`` of each box ``(N, 4+)`` ``x1, y1, x2, y2`` (pixels of an image of
    ``image_hw``) once the whole image is letterboxed into ``input_hw``: ``(N,)``."""
    boxes = np.asarray(boxes, np.float64)
    boxes = boxes.reshape(len(boxes), boxes.shape[-1] if boxes.size else 4)
    wh = np.clip(boxes[:, 2:4] - boxes[:, 0:2], 0, None)
    scale = min(float(input_hw[0]) / float(image_hw[0]), float(input_hw[1]) / float(image_hw[1]))
    return np.sqrt(wh[:, 0] * wh[:, 1]) * scale


@dataclass(frozen=True)
class TileSuggestion:
    """What :func:`suggest_tile` found: ``size`` (pixels; None: the whole image serves), the
    share of boxes under :data:`TINY_AT_INPUT` at the whole-image resize, and why, in words."""

    size: Optional[int]
    small_share: float
    reason: str


def suggest_tile(box_wh: np.ndarray, image_hw: np.ndarray, input_hw: Sequence[int],
                 stride: int = 32) -> TileSuggestion:
    """The tile size for boxes ``box_wh`` ``(N, 2)`` (image pixels) of images ``image_hw``
    ``(N, 2)`` (each box's image) at a network input of ``input_hw``.

    Tiles pay where a good share of the boxes is tiny (measured): under :data:`TILE_SHARE` of
    the boxes with a side ``sqrt(w * h)`` letterboxed into the input under :data:`TINY_AT_INPUT`
    pixels: no tiles. Else the tile (a multiple of ``stride``) at
    which the 10th-percentile box reaches :data:`SMALL_AT_INPUT` pixels, never under the input
    size (tiles are cut at native resolution and never enlarged); no tiles when that is not at
    least 1.5 times smaller than the median image's longer side."""
    box_wh = np.asarray(box_wh, np.float64).reshape(-1, 2)
    image_hw = np.asarray(image_hw, np.float64).reshape(-1, 2)
    if len(box_wh) != len(image_hw):
        raise ValueError(f"{len(box_wh)} boxes but {len(image_hw)} image sizes")
    if not len(box_wh):
        return TileSuggestion(None, 0.0, "no boxes to measure")
    in_h, in_w = float(input_hw[0]), float(input_hw[1])
    sides = np.sqrt(np.prod(np.clip(box_wh, 0, None), axis=1))
    scale = np.minimum(in_h / image_hw[:, 0], in_w / image_hw[:, 1])
    share = float(np.mean(sides * scale < TINY_AT_INPUT))
    small = (f"{share:.0%} of the boxes are under {TINY_AT_INPUT:g} px at the {in_h:g}x{in_w:g} "
             "input")
    if share < TILE_SHARE:
        return TileSuggestion(None, share, f"{small}: the whole image serves (tiles help only "
                                           f"where at least {TILE_SHARE:.0%} are)")
    p10 = float(np.percentile(sides, 10))
    smallest_input = min(in_h, in_w)
    wanted = p10 * smallest_input / SMALL_AT_INPUT
    size = int(max(smallest_input, wanted // stride * stride))
    longest = float(np.median(np.max(image_hw, axis=1)))
    if size * 1.5 > longest:
        return TileSuggestion(None, share, f"{small}, but tiles of {size} px would be nearly "
                                           f"the whole {longest:g} px image: a larger input "
                                           "size helps them")
    note = ("" if wanted >= smallest_input else
            "; they stay small at native resolution: a larger input size helps them further")
    return TileSuggestion(size, share, f"{small}; tiles of {size} px bring the 10th-percentile "
                                       f"box ({p10:.1f} px) to {p10 * smallest_input / size:.1f} px"
                                       + note)
