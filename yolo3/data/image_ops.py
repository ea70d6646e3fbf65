"""The augmentation's image operations in NumPy and OpenCV (the NumPy pipeline's), applying what
:mod:`yolo3.data.planner` drew: the twins of :mod:`yolo3.data.augment` (TensorFlow).

Images are ``(h, w, 3)`` RGB: uint8 as decoded, float32 in ``[0, 1]`` once placed. Resizing is
OpenCV's bilinear (half-pixel centres, no antialiasing, as ``tf.image.resize``), on uint8 until
the colour step; the HSV distortion runs in float32 as TensorFlow's does. An augmented uint8
image is resampled where it shows only (:func:`resized_window`: a mosaic shows a quarter of each
source).
"""
from __future__ import annotations

from typing import Optional, Sequence, Tuple

import cv2
import numpy as np

from yolo3.data.planner import AugmentDraw
from yolo3.data.images import load_image
from yolo3.ops.letterbox import PAD_VALUE, geometry_np

__all__ = ["decode_image_np", "apply_orientation_np", "resize_bilinear", "resized_window",
           "augment_image_np",
           "mosaic_images_np", "mosaic_regions", "letterbox_image_np", "distort_hsv_np",
           "place_image_u8", "letterbox_u8", "colour_plan", "PAD_U8"]


def apply_orientation_np(image: np.ndarray, orientation: int) -> np.ndarray:
    """EXIF ``orientation`` (1-8) applied to a decoded ``(h, w, c)`` image (PIL's exif_transpose)."""
    if orientation == 2:
        return image[:, ::-1]
    if orientation == 3:
        return image[::-1, ::-1]
    if orientation == 4:
        return image[::-1]
    if orientation == 5:
        return image.transpose(1, 0, 2)
    if orientation == 6:
        return np.rot90(image, 3)
    if orientation == 7:
        return np.rot90(image.transpose(1, 0, 2), 2)
    if orientation == 8:
        return np.rot90(image, 1)
    return image


def decode_image_np(path: str, orientation: int) -> np.ndarray:
    """An image file -> ``(h, w, 3)`` uint8 RGB, EXIF-transposed (OpenCV decodes; what it cannot
    read, such as a 16-bit grey PNG, PIL reads as :func:`yolo3.data.images.load_image` does)."""
    try:
        data = np.fromfile(path, np.uint8)
    except OSError:  # missing or unreadable: PIL's reader names the file and the reason
        data = np.zeros(0, np.uint8)
    image = None
    if data.size:
        image = cv2.imdecode(data, cv2.IMREAD_COLOR | cv2.IMREAD_IGNORE_ORIENTATION)
    if image is None or image.dtype != np.uint8:
        return load_image(path)
    image = cv2.cvtColor(image, cv2.COLOR_BGR2RGB)
    return np.ascontiguousarray(apply_orientation_np(image, orientation))


def resize_bilinear(image: np.ndarray, hw: Sequence[int]) -> np.ndarray:
    """Bilinear resize to ``hw`` (half-pixel centres, no antialiasing), the image's dtype kept."""
    h, w = int(hw[0]), int(hw[1])
    if image.shape[:2] == (h, w):
        return image
    return cv2.resize(image, (w, h), interpolation=cv2.INTER_LINEAR)


def resized_window(image: np.ndarray, hw: Sequence[int], rows: Tuple[int, int],
                   cols: Tuple[int, int], mirror: bool = False,
                   out: Optional[np.ndarray] = None) -> np.ndarray:
    """``resize_bilinear(image, hw)[rows[0]:rows[1], cols[0]:cols[1]]`` (the window must lie
    inside ``hw``), its columns reversed with ``mirror``, computing only the window where that is
    cheaper. uint8: OpenCV's affine warp samples the window alone (the same half-pixel-centred
    bilinear, its positions to 1/32 pixel: within a level or so of the whole resize on natural
    images; about 4x faster for a mosaic's quarter), the mirror folded into its matrix; float32:
    the whole resize, cropped (TensorFlow's resize to float rounding). ``out``: the
    ``(rows, cols, 3)`` array to write (a view into a canvas: the warp writes there directly),
    else a new one."""
    h, w = int(hw[0]), int(hw[1])
    (r0, r1), (c0, c1) = (int(v) for v in rows), (int(v) for v in cols)
    if image.dtype != np.uint8 or (r1 - r0) * (c1 - c0) >= h * w:
        window = resize_bilinear(image, (h, w))[r0:r1, c0:c1]
        window = window[:, ::-1] if mirror else window
        if out is None:
            return window
        out[...] = window
        return out
    sy, sx = image.shape[0] / h, image.shape[1] / w
    # destination pixel (j, i) of the window is pixel (r0 + j, c0 + i) of the whole resize (with
    # ``mirror``: (r0 + j, c1 - 1 - i)), whose source position is ((c + 0.5) * sx - 0.5,
    # (r0 + j + 0.5) * sy - 0.5) for that column c
    if mirror:
        row_x = [-sx, 0.0, (c1 - 0.5) * sx - 0.5]
    else:
        row_x = [sx, 0.0, (c0 + 0.5) * sx - 0.5]
    to_source = np.array([row_x, [0.0, sy, (r0 + 0.5) * sy - 0.5]])
    size = (c1 - c0, r1 - r0)
    flags = cv2.INTER_LINEAR | cv2.WARP_INVERSE_MAP
    if out is None:
        return cv2.warpAffine(image, to_source, size, flags=flags,
                              borderMode=cv2.BORDER_REPLICATE)
    got = cv2.warpAffine(image, to_source, size, dst=out, flags=flags,
                         borderMode=cv2.BORDER_REPLICATE)
    if got is not out and not np.shares_memory(got, out):  # a layout OpenCV could not write
        out[...] = got
    return out


def distort_hsv_np(image: np.ndarray, hue: float, sat: float, val: float) -> np.ndarray:
    """float32 RGB in ``[0, 1]``: hue shifted by ``hue`` (mod 1), saturation and value scaled and
    clipped, as ``tf.image`` does. Each channel is worked on contiguously (twice as fast as on the
    interleaved planes); the hue wraps by one 360 either way (``|hue| < 1``), which is ``np.mod``'s
    result bit for bit for sums in ``[-360, 720)``."""
    hsv = cv2.cvtColor(image, cv2.COLOR_RGB2HSV)  # float32: H in [0, 360), S and V in [0, 1]
    h, s, v = cv2.split(hsv)
    h += np.float32(hue * 360.0)
    h[h >= 360.0] -= np.float32(360.0)
    h[h < 0.0] += np.float32(360.0)
    np.clip(np.multiply(s, np.float32(sat), out=s), 0.0, 1.0, out=s)
    np.clip(np.multiply(v, np.float32(val), out=v), 0.0, 1.0, out=v)
    return cv2.cvtColor(cv2.merge((h, s, v)), cv2.COLOR_HSV2RGB)


def _to_float(image: np.ndarray) -> np.ndarray:
    if image.dtype == np.uint8:
        return image.astype(np.float32) * np.float32(1.0 / 255.0)
    return image.astype(np.float32, copy=False)


Region = Tuple[int, int, int, int]  # y1, y2, x1, x2 of the canvas, ends excluded
PAD_U8 = np.uint8(round(PAD_VALUE * 255))  # the gray canvas, as uint8 (PAD_VALUE is 128 / 255)


def _visible(draw: AugmentDraw, input_hw: Sequence[int], region: Optional[Region]):
    """Where ``draw``'s resized image shows in ``region`` of the canvas (before the mirror):
    the region ``(y1, y2, x1, x2)`` and the visible rows and columns ``(top, bottom, left,
    right)`` of the canvas."""
    H, W = int(input_hw[0]), int(input_hw[1])
    y1, y2, x1, x2 = (0, H, 0, W) if region is None else (int(v) for v in region)
    if draw.flip:  # the region before the mirror
        x1, x2 = W - x2, W - x1
    (nh, nw), (dy, dx) = draw.new_hw, draw.offset_hw
    # the resized image covers canvas rows dy..dy+nh and columns dx..dx+nw
    top, bottom = max(dy, y1), min(dy + nh, y2)
    left, right = max(dx, x1), min(dx + nw, x2)
    return (y1, y2, x1, x2), (top, bottom, left, right)


def augment_image_np(image: np.ndarray, draw: AugmentDraw, input_hw: Sequence[int],
                     colours: bool = True, region: Optional[Region] = None) -> np.ndarray:
    """One image (uint8 or float32) as ``draw`` says -> the float32 ``input_hw + (3,)`` canvas:
    resized, placed on gray (what falls outside cropped), HSV-distorted (``colours``), mirrored.

    ``region``: only that part of the canvas, ``(y2 - y1, x2 - x1, 3)``, the whole canvas's slice
    (to a float ulp: OpenCV's colour conversion takes its vector or scalar path by a pixel's place
    in the row). A mosaic uses a quarter of each source: the colour step then works on that
    quarter only."""
    (y1, y2, x1, x2), (top, bottom, left, right) = _visible(draw, input_hw, region)
    (nh, nw), (dy, dx) = draw.new_hw, draw.offset_hw
    pad = np.float32(PAD_VALUE)
    if colours:
        pad = np.float32(min(max(PAD_VALUE * draw.val, 0.0), 1.0))
    canvas = np.full((y2 - y1, x2 - x1, 3), pad, np.float32)
    if bottom > top and right > left:
        crop = _to_float(resized_window(image, (nh, nw), (top - dy, bottom - dy),
                                        (left - dx, right - dx), mirror=draw.flip))
        if colours:
            crop = distort_hsv_np(np.ascontiguousarray(crop), draw.hue, draw.sat, draw.val)
        c0, c1 = _window_columns(x1, x2, left, right, draw.flip)
        canvas[top - y1:bottom - y1, c0:c1] = crop
    return canvas


def _window_columns(x1: int, x2: int, left: int, right: int, flip: bool) -> Tuple[int, int]:
    """The columns ``(c0, c1)`` of a region ``x1..x2`` (before the mirror) where the image's
    visible columns ``left..right`` land, mirrored with ``flip``."""
    return (x2 - right, x2 - left) if flip else (left - x1, right - x1)


def place_image_u8(image: np.ndarray, draw: AugmentDraw, input_hw: Sequence[int],
                   region: Optional[Region] = None, out: Optional[np.ndarray] = None
                   ) -> np.ndarray:
    """uint8 ``image`` resized, placed on gray and mirrored as ``draw`` says, without its
    colours: the uint8 canvas (or ``region`` of it) whose ``/ 255`` is
    :func:`augment_image_np` with ``colours=False``, exactly. The colours follow on the device
    (:class:`yolo3.modeling.pixel_input.PlannedPixels`, from :func:`colour_plan`). ``out``: the
    ``(y2 - y1, x2 - x1, 3)`` uint8 array to fill (a view into a batch), else a new one: the
    resampled window is warped straight into it, mirrored in the warp, and only the gray around
    it is filled."""
    (y1, y2, x1, x2), (top, bottom, left, right) = _visible(draw, input_hw, region)
    (nh, nw), (dy, dx) = draw.new_hw, draw.offset_hw
    if out is None:
        out = np.empty((y2 - y1, x2 - x1, 3), np.uint8)
    if bottom <= top or right <= left:
        out[...] = PAD_U8
        return out
    r0, r1 = top - y1, bottom - y1
    c0, c1 = _window_columns(x1, x2, left, right, draw.flip)
    out[:r0] = PAD_U8  # the gray around the image, only there
    out[r1:] = PAD_U8
    out[r0:r1, :c0] = PAD_U8
    out[r0:r1, c1:] = PAD_U8
    resized_window(image, (nh, nw), (top - dy, bottom - dy), (left - dx, right - dx),
                   mirror=draw.flip, out=out[r0:r1, c0:c1])
    return out


def colour_plan(draws: Optional[Sequence[AugmentDraw]], split_yx: Optional[Sequence[int]],
                input_hw: Sequence[int], colours: bool = True) -> np.ndarray:
    """One element's colour plan, float32 ``(14,)``: the mosaic split ``(cy, cx)`` (``input_hw``
    for one image), then ``(hue, sat, val)`` of each region (``(0, 1, 1)``: unchanged, as
    without ``draws`` or ``colours``). :mod:`yolo3.modeling.pixel_input` reads it."""
    plan = np.zeros(14, np.float32)
    plan[:2] = input_hw if split_yx is None else split_yx
    plan[2:].reshape(4, 3)[:] = (0.0, 1.0, 1.0)
    for k, draw in enumerate(draws or () if colours else ()):
        plan[2 + 3 * k:5 + 3 * k] = draw.hue, draw.sat, draw.val
    return plan


def mosaic_regions(split_yx: Sequence[int], input_hw: Sequence[int]) -> Tuple[Region, ...]:
    """The canvas regions of a mosaic's four sources split at ``split_yx``: top-left, top-right,
    bottom-left, bottom-right (``(y1, y2, x1, x2)``, ends excluded; some may be empty)."""
    cy, cx = int(split_yx[0]), int(split_yx[1])
    H, W = int(input_hw[0]), int(input_hw[1])
    return (0, cy, 0, cx), (0, cy, cx, W), (cy, H, 0, cx), (cy, H, cx, W)


def mosaic_images_np(images: Sequence[np.ndarray], split_yx: Sequence[int]) -> np.ndarray:
    """Four canvases in one: top-left of #0, top-right of #1, bottom-left of #2, bottom-right of
    #3, split at ``split_yx``."""
    out = np.array(images[3], np.float32)
    for image, (y1, y2, x1, x2) in zip(images[:3], mosaic_regions(split_yx, out.shape[:2])):
        out[y1:y2, x1:x2] = image[y1:y2, x1:x2]
    return out


def letterbox_u8(image: np.ndarray, input_hw: Sequence[int],
                 image_hw: Optional[Sequence[int]] = None) -> np.ndarray:
    """The validation letterbox of one uint8 image -> uint8 ``input_hw + (3,)``:
    :func:`letterbox_image_np` times 255, exactly. ``image_hw``: the size the geometry is taken
    from (the displayed image's, where ``image`` is a smaller cached copy), default its own."""
    H, W = int(input_hw[0]), int(input_hw[1])
    new_hw, offset, _ = geometry_np(image.shape[:2] if image_hw is None else image_hw, (H, W))
    (nh, nw), (top, left) = new_hw.astype(int), offset.astype(int)
    canvas = np.full((H, W, 3), PAD_U8, np.uint8)
    canvas[top:top + nh, left:left + nw] = resize_bilinear(image, (nh, nw))
    return canvas


def letterbox_image_np(image: np.ndarray, input_hw: Sequence[int],
                       image_hw: Optional[Sequence[int]] = None) -> np.ndarray:
    """The validation letterbox of one image (uint8 or float32) -> float32 ``input_hw + (3,)``
    (:func:`yolo3.ops.letterbox.letterbox_tf`'s geometry, of ``image_hw``: default the image's
    own size)."""
    H, W = int(input_hw[0]), int(input_hw[1])
    new_hw, offset, _ = geometry_np(image.shape[:2] if image_hw is None else image_hw, (H, W))
    (nh, nw), (top, left) = new_hw.astype(int), offset.astype(int)
    canvas = np.full((H, W, 3), np.float32(PAD_VALUE), np.float32)
    canvas[top:top + nh, left:left + nw] = _to_float(resize_bilinear(image, (nh, nw)))
    return canvas
