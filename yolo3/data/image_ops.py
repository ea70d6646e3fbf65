"""The augmentation's image operations in NumPy and OpenCV (the NumPy pipeline's), applying what
:mod:`yolo3.data.draws` drew: the twins of :mod:`yolo3.data.augment` (TensorFlow).

Images are ``(h, w, 3)`` RGB: uint8 as decoded, float32 in ``[0, 1]`` once placed. Resizing is
OpenCV's bilinear (half-pixel centres, no antialiasing, as ``tf.image.resize``), on uint8 until
the colour step; the HSV distortion runs in float32 as TensorFlow's does.
"""
from __future__ import annotations

from typing import Sequence

import cv2
import numpy as np

from yolo3.data.draws import AugmentDraw
from yolo3.data.images import load_image
from yolo3.ops.letterbox import PAD_VALUE, geometry_np

__all__ = ["decode_image_np", "apply_orientation_np", "resize_bilinear", "augment_image_np",
           "mosaic_images_np", "letterbox_image_np", "distort_hsv_np"]


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


def distort_hsv_np(image: np.ndarray, hue: float, sat: float, val: float) -> np.ndarray:
    """float32 RGB in ``[0, 1]``: hue shifted by ``hue`` (mod 1), saturation and value scaled and
    clipped, as ``tf.image`` does."""
    hsv = cv2.cvtColor(image, cv2.COLOR_RGB2HSV)  # float32: H in [0, 360), S and V in [0, 1]
    hsv[..., 0] = np.mod(hsv[..., 0] + np.float32(hue * 360.0), np.float32(360.0))
    hsv[..., 1] = np.clip(hsv[..., 1] * np.float32(sat), 0.0, 1.0)
    hsv[..., 2] = np.clip(hsv[..., 2] * np.float32(val), 0.0, 1.0)
    return cv2.cvtColor(hsv, cv2.COLOR_HSV2RGB)


def _to_float(image: np.ndarray) -> np.ndarray:
    if image.dtype == np.uint8:
        return image.astype(np.float32) * np.float32(1.0 / 255.0)
    return image.astype(np.float32, copy=False)


def augment_image_np(image: np.ndarray, draw: AugmentDraw, input_hw: Sequence[int],
                     colours: bool = True) -> np.ndarray:
    """One image (uint8 or float32) as ``draw`` says -> the float32 ``input_hw + (3,)`` canvas:
    resized, placed on gray (what falls outside cropped), HSV-distorted (``colours``), mirrored."""
    H, W = int(input_hw[0]), int(input_hw[1])
    (nh, nw), (dy, dx) = draw.new_hw, draw.offset_hw
    sy, sx, ty, tx = max(-dy, 0), max(-dx, 0), max(dy, 0), max(dx, 0)
    ch, cw = max(min(nh - sy, H - ty), 0), max(min(nw - sx, W - tx), 0)
    pad = np.float32(PAD_VALUE)
    crop = np.zeros((0, 0, 3), np.float32)
    if ch and cw:
        crop = _to_float(resize_bilinear(image, (nh, nw))[sy:sy + ch, sx:sx + cw])
    if colours:
        if crop.size:
            crop = distort_hsv_np(np.ascontiguousarray(crop), draw.hue, draw.sat, draw.val)
        pad = np.float32(min(max(PAD_VALUE * draw.val, 0.0), 1.0))
    canvas = np.full((H, W, 3), pad, np.float32)
    if crop.size:
        canvas[ty:ty + ch, tx:tx + cw] = crop
    return canvas[:, ::-1] if draw.flip else canvas


def mosaic_images_np(images: Sequence[np.ndarray], split_yx: Sequence[int]) -> np.ndarray:
    """Four canvases in one: top-left of #0, top-right of #1, bottom-left of #2, bottom-right of
    #3, split at ``split_yx``."""
    cy, cx = int(split_yx[0]), int(split_yx[1])
    out = np.array(images[3], np.float32)
    out[:cy, :cx] = images[0][:cy, :cx]
    out[:cy, cx:] = images[1][:cy, cx:]
    out[cy:, :cx] = images[2][cy:, :cx]
    return out


def letterbox_image_np(image: np.ndarray, input_hw: Sequence[int]) -> np.ndarray:
    """The validation letterbox of one image (uint8 or float32) -> float32 ``input_hw + (3,)``
    (:func:`yolo3.ops.letterbox.letterbox_tf`'s geometry)."""
    H, W = int(input_hw[0]), int(input_hw[1])
    new_hw, offset, _ = geometry_np(image.shape[:2], (H, W))
    (nh, nw), (top, left) = new_hw.astype(int), offset.astype(int)
    canvas = np.full((H, W, 3), np.float32(PAD_VALUE), np.float32)
    canvas[top:top + nh, left:left + nw] = _to_float(resize_bilinear(image, (nh, nw)))
    return canvas
