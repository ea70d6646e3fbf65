"""The geometry's plan for the device: what the host sends so that the resampling (resize, crop,
mirror, mosaic, letterbox) runs where the model does (issue 67, item 3).

The host's uint8 placement (:func:`yolo3.data.image_ops.place_image_u8`) resamples each source's
visible window with OpenCV and writes it into the canvas. Here the host only *cuts* each
source's window out of the decoded (cached) image, the rows and columns its bilinear samples
read, without resampling, and packs the windows of one element one after another into a row of
pixels; each window gets one row of numbers, its :data:`WINDOW_PLAN_WIDTH` floats:

==========  ==================================================================================
0..3        ``r0, r1, c0, c1``: the canvas rows and columns it covers (ends excluded)
4           ``start``: its first pixel in the element's row
5, 6        ``h, w``: the cut's size
7, 8        ``ay, by``: canvas row ``r`` reads the cut's row ``ay * (r - r0) + by`` (bilinear)
9, 10       ``ax, bx``: canvas column ``c`` reads the cut's column ``ax * (c - c0) + bx``
==========  ==================================================================================

A mirrored window has ``ax < 0``. Every element has four window rows (a mosaic's four regions
split at the colour plan's ``(cy, cx)``, :func:`~yolo3.data.image_ops.mosaic_regions`; one
image: region 0 covers the canvas), an empty one covers nothing (``r1 <= r0``); canvas pixels
outside every window are the gray :data:`~yolo3.data.image_ops.PAD_U8`.
:class:`yolo3.modeling.planned_canvas.PlannedCanvas` reads them on the device. The sample
positions are :func:`~yolo3.data.image_ops.resized_window`'s (half-pixel centres, the border
replicated), in float32 where OpenCV rounds them to 1/32 pixel. NumPy only.
"""
from __future__ import annotations

from typing import List, Optional, Sequence, Tuple

import numpy as np

from yolo3.data.image_ops import Region, _visible, _window_columns
from yolo3.data.planner import AugmentDraw
from yolo3.ops.letterbox import geometry_np

__all__ = ["WINDOW_PLAN_WIDTH", "WINDOWS_PER_ELEMENT", "Window", "element_windows",
           "image_plan", "letterbox_window", "pack_windows", "placed_window"]

WINDOW_PLAN_WIDTH = 11
WINDOWS_PER_ELEMENT = 4
MIN_ROW_PIXELS = 4096  # the smallest packed row: rows grow by powers of two (few shapes to compile)

Window = Tuple[np.ndarray, np.ndarray]  # (the cut, uint8 (h, w, 3); its plan row without start)


def _cut(image: np.ndarray, hw: Sequence[int], rows: Tuple[int, int], cols: Tuple[int, int],
         mirror: bool, whole: bool = False) -> Tuple[np.ndarray, Tuple[float, float, float, float]]:
    """The part of ``image`` whose bilinear samples make ``resize(image, hw)[rows, cols]``
    (mirrored with ``mirror``; ``whole``: the whole image), and ``(ay, by, ax, bx)`` for window
    pixel ``(j, i)``: cut row ``ay * j + by``, cut column ``ax * i + bx``."""
    h, w = int(hw[0]), int(hw[1])
    sy, sx = image.shape[0] / h, image.shape[1] / w
    (r0, r1), (c0, c1) = rows, cols
    # source rows sampled: (r + 0.5) * sy - 0.5 for r in r0..r1-1, each reading floor and floor+1
    y_first, y_last = (r0 + 0.5) * sy - 0.5, (r1 - 0.5) * sy - 0.5
    x_first, x_last = (c0 + 0.5) * sx - 0.5, (c1 - 0.5) * sx - 0.5
    top = min(max(int(np.floor(y_first)), 0), image.shape[0] - 1)
    bottom = min(max(int(np.floor(y_last)) + 2, top + 1), image.shape[0])
    left = min(max(int(np.floor(x_first)), 0), image.shape[1] - 1)
    right = min(max(int(np.floor(x_last)) + 2, left + 1), image.shape[1])
    if whole:
        top, bottom, left, right = 0, image.shape[0], 0, image.shape[1]
    ay, by = sy, y_first - top
    if mirror:  # window column i is the resize's column c1 - 1 - i
        ax, bx = -sx, x_last - left
    else:
        ax, bx = sx, x_first - left
    return image[top:bottom, left:right], (ay, by, ax, bx)


def placed_window(image: np.ndarray, draw: AugmentDraw, input_hw: Sequence[int],
                  region: Optional[Region] = None, whole: bool = False) -> Optional[Window]:
    """The window of ``image`` that ``draw`` shows in ``region`` of the canvas (the whole canvas
    by default), as :func:`~yolo3.data.image_ops.place_image_u8` places it; None when it does
    not show there. ``whole``: the "cut" is the whole image (one that already lives on the
    device, :func:`image_plan`), the plan reading it from its first pixel."""
    (y1, y2, x1, x2), (top, bottom, left, right) = _visible(draw, input_hw, region)
    if bottom <= top or right <= left:
        return None
    (nh, nw), (dy, dx) = draw.new_hw, draw.offset_hw
    c0, c1 = _window_columns(x1, x2, left, right, draw.flip)
    cut, (ay, by, ax, bx) = _cut(image, (nh, nw), (top - dy, bottom - dy),
                                 (left - dx, right - dx), draw.flip, whole)
    first = 0 if region is None else int(region[2])  # the region's first column, as placed
    plan = np.array([top, bottom, first + c0, first + c1, 0, cut.shape[0], cut.shape[1],
                     ay, by, ax, bx], np.float64)
    return cut, plan


def image_plan(image: np.ndarray, draw: AugmentDraw, input_hw: Sequence[int],
               region: Optional[Region], start: int) -> np.ndarray:
    """The plan row (11 float32; empty where ``draw`` does not show in ``region``) that reads
    ``image``, kept whole on the device from pixel ``start`` of its cache, as ``draw`` places
    it: no pixel crosses from the host."""
    window = placed_window(image, draw, input_hw, region, whole=True)
    if window is None:
        return np.zeros(WINDOW_PLAN_WIDTH, np.float32)
    plan = window[1].astype(np.float32)
    plan[4] = start
    return plan


def letterbox_window(image: np.ndarray, input_hw: Sequence[int],
                     image_hw: Optional[Sequence[int]] = None) -> Window:
    """The validation letterbox of ``image`` as one window
    (:func:`~yolo3.data.image_ops.letterbox_u8`'s geometry, of ``image_hw``: default the
    image's own size)."""
    new_hw, offset, _ = geometry_np(image.shape[:2] if image_hw is None else image_hw,
                                    tuple(input_hw))
    (nh, nw), (top, left) = new_hw.astype(int), offset.astype(int)
    cut, (ay, by, ax, bx) = _cut(image, (nh, nw), (0, nh), (0, nw), False)
    plan = np.array([top, top + nh, left, left + nw, 0, cut.shape[0], cut.shape[1],
                     ay, by, ax, bx], np.float64)
    return cut, plan


def _row_pixels(needed: int) -> int:
    """The packed row's length for ``needed`` pixels: the next power of two from
    :data:`MIN_ROW_PIXELS` (a compiled step sees a few shapes, not one per batch)."""
    return max(MIN_ROW_PIXELS, 1 << max(int(needed) - 1, 0).bit_length())


def pack_windows(elements: Sequence[Sequence[Optional[Window]]]
                 ) -> Tuple[np.ndarray, np.ndarray]:
    """A batch's windows -> ``(pixels, plans)``: uint8 ``(B, P, 3)``, each element's cuts one
    after another in its row (``P`` a power of two, zeros after the last cut), and float32
    ``(B, 4, 11)`` (the module docstring's rows; ``start`` filled in, missing windows empty).
    ``elements[b]``: up to four windows (None: that region shows nothing)."""
    plans = np.zeros((len(elements), WINDOWS_PER_ELEMENT, WINDOW_PLAN_WIDTH), np.float32)
    sizes = [sum(int(np.prod(w[0].shape[:2])) for w in windows if w is not None)
             for windows in elements]
    pixels = np.zeros((len(elements), _row_pixels(max(sizes, default=1)), 3), np.uint8)
    for b, windows in enumerate(elements):
        start = 0
        for k, window in enumerate(windows):
            if window is None:
                continue
            cut, plan = window
            n = cut.shape[0] * cut.shape[1]
            pixels[b, start:start + n].reshape(cut.shape)[...] = cut
            plans[b, k] = plan
            plans[b, k, 4] = start
            start += n
    return pixels, plans


def element_windows(sources: Sequence[Tuple[np.ndarray, AugmentDraw]], input_hw: Sequence[int],
                    regions: Sequence[Region]) -> List[Optional[Window]]:
    """One element's windows: source ``k`` (its image and draw) placed in ``regions[k]``."""
    return [placed_window(image, draw, input_hw, region) if region[1] > region[0]
            and region[3] > region[2] else None
            for (image, draw), region in zip(sources, regions)]
