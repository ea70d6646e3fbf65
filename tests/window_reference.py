"""float64 references for the geometry on the device (yolo3.data.window_pack,
yolo3.modeling.planned_canvas): a canvas straight from the plans' draws, and a reading of packed
windows."""
from __future__ import annotations

from typing import Sequence, Tuple

import numpy as np


def _bilinear(image: np.ndarray, y: np.ndarray, x: np.ndarray) -> np.ndarray:
    """``image`` ``(h, w, 3)`` sampled at float positions, the border replicated."""
    h, w = image.shape[:2]
    y0, x0 = np.floor(y), np.floor(x)
    fy, fx = (y - y0)[:, None], (x - x0)[:, None]
    ya, yb = (np.clip(v, 0, h - 1).astype(int) for v in (y0, y0 + 1))
    xa, xb = (np.clip(v, 0, w - 1).astype(int) for v in (x0, x0 + 1))
    image = image.astype(np.float64)
    return ((1 - fy) * ((1 - fx) * image[ya, xa] + fx * image[ya, xb])
            + fy * ((1 - fx) * image[yb, xa] + fx * image[yb, xb]))


def canvas_from_draws(sources: Sequence[Tuple[np.ndarray, object]], regions, input_hw,
                      pad: float = 128.0) -> np.ndarray:
    """The float64 ``(H, W, 3)`` canvas in ``[0, 255]`` of sources ``(image, draw)`` placed in
    ``regions``, pixel by pixel from the draw alone: canvas column ``c`` of a mirrored draw is
    column ``W - 1 - c`` before the mirror; the resized image covers rows ``dy .. dy + nh`` and
    columns ``dx .. dx + nw``, and its pixel ``(r, c)`` samples the source at
    ``((r + 0.5) * sy - 0.5, (c + 0.5) * sx - 0.5)``."""
    H, W = int(input_hw[0]), int(input_hw[1])
    out = np.full((H, W, 3), float(pad))
    rows, cols = np.mgrid[0:H, 0:W]
    for (image, draw), (y1, y2, x1, x2) in zip(sources, regions):
        in_region = (rows >= y1) & (rows < y2) & (cols >= x1) & (cols < x2)
        (nh, nw), (dy, dx) = draw.new_hw, draw.offset_hw
        unmirrored = W - 1 - cols if draw.flip else cols
        r, c = rows - dy, unmirrored - dx
        shows = in_region & (r >= 0) & (r < nh) & (c >= 0) & (c < nw)
        if not shows.any():
            continue
        sy, sx = image.shape[0] / nh, image.shape[1] / nw
        out[shows] = _bilinear(image, (r[shows] + 0.5) * sy - 0.5, (c[shows] + 0.5) * sx - 0.5)
    return out


def read_windows(pixels: np.ndarray, plans: np.ndarray, input_hw, split_yx,
                 pad: float = 128.0) -> np.ndarray:
    """The float64 canvases ``(B, H, W, 3)`` in ``[0, 255]`` (unrounded) that packed windows
    describe (``pixels`` ``(B, P, 3)``, ``plans`` ``(B, 4, 11)``), each pixel read from its
    mosaic region's window; ``split_yx`` ``(B, 2)``."""
    H, W = int(input_hw[0]), int(input_hw[1])
    rows, cols = np.mgrid[0:H, 0:W]
    out = np.full((len(plans), H, W, 3), float(pad))
    for b in range(len(plans)):
        region = 2 * (rows >= split_yx[b][0]) + (cols >= split_yx[b][1])
        for k in range(plans.shape[1]):
            r0, r1, c0, c1, start, h, w, ay, by, ax, bx = (float(v) for v in plans[b, k])
            inside = (region == k) & (rows >= r0) & (rows < r1) & (cols >= c0) & (cols < c1)
            if not inside.any():
                continue
            cut = pixels[b, int(start):int(start) + int(h) * int(w)].reshape(int(h), int(w), 3)
            out[b][inside] = _bilinear(cut, ay * (rows[inside] - r0) + by,
                                       ax * (cols[inside] - c0) + bx)
    return out
