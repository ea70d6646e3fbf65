"""Sliced inference: any detector run on overlapping tiles of each image (and on the whole image),
its detections merged in image pixels.

:class:`TiledDetector` wraps a detector with the interface of
:class:`yolo3.inference.detector.YOLO` (``detect_batch`` and ``detect_stream`` of ``(H, W, 3)``
RGB images giving ``(boxes (N, 4) x1, y1, x2, y2 image pixels, scores, classes)``): the Keras
detector on any backend, or an exported model on OpenVINO, ONNX Runtime, TFLite or TensorFlow.
It offers the same interface, so detection, evaluation and training's validation slice alike.

Per image: the windows of :func:`yolo3.ops.tiles.tile_windows` are cut at native resolution and
go, with the whole image, through the wrapped detector in batches (its own streaming: OpenVINO
keeps several requests in flight). A tile's box that touches an edge of its window inside the
image is dropped when the whole image is also seen (the object goes on past the tile: a
neighbour, which overlaps it, or the whole-image pass sees it whole). The rest are shifted into
image pixels and merged (:func:`yolo3.ops.tiles.merge_detections`: per-class NMS at the
detector's IoU threshold, or weighted box fusion). With ``whole_from`` (a model trained on tiles
records it), the whole image owns the objects whose side at its resize is at least that many
pixels: a tile's box that large, or lying mostly inside a whole-image box that large of its class
scored at least as high (a piece of such an object), is dropped
(:func:`yolo3.ops.tiles.left_to_whole`). Such objects trained on whole images; a tile shows them
at a scale the model never learned them at.
"""
from __future__ import annotations

from typing import Iterable, Iterator, List, Optional, Sequence, Tuple

import numpy as np

from yolo3.ops.tiles import (MERGE_METHODS, TileSize, cut_by_window, merge_detections,
                             left_to_whole, tile_windows)

__all__ = ["TiledDetector", "recorded_whole_from"]

Detections = Tuple[np.ndarray, np.ndarray, np.ndarray]


class TiledDetector:
    """``detector`` run on tiles of ``tile`` pixels (one side or ``(height, width)``) overlapping
    by ``overlap``, plus the whole image unless ``whole_image`` is False; merged by ``merge``
    (``"nms"`` or ``"wbf"``) at ``iou`` (default: the detector's NMS threshold); at most
    ``max_boxes`` per image (default: the detector's). ``batch_size`` views (tiles or whole
    images) per forward pass. ``whole_from``: with the whole image seen, tiles' boxes of at least
    that side (pixels at the detector's whole-image input), or mostly inside a whole-image box
    that large and scored at least as high, are dropped (0: kept). Other attributes
    (``class_names``, ``engine`` ...) are the detector's."""

    def __init__(self, detector, tile: TileSize, overlap: float = 0.2, merge: str = "nms",
                 iou: Optional[float] = None, whole_image: bool = True,
                 max_boxes: Optional[int] = None, batch_size: int = 8, whole_from: float = 0.0):
        if merge not in MERGE_METHODS:
            raise ValueError(f"merge method {merge!r}: expected one of {', '.join(MERGE_METHODS)}")
        tile_windows((1, 1), tile, overlap)  # checks the tile size and overlap
        if batch_size < 1:
            raise ValueError(f"batch size {batch_size!r}: expected a positive whole number")
        if not np.isfinite(whole_from) or whole_from < 0:
            raise ValueError(f"whole_from {whole_from!r}: expected pixels >= 0")
        self.whole_from = float(whole_from)
        self.detector, self.tile, self.overlap, self.merge = detector, tile, overlap, merge
        self.iou = float(iou if iou is not None else getattr(detector, "iou", 0.45))
        self.whole_image = whole_image
        self.max_boxes = int(max_boxes if max_boxes is not None
                             else getattr(detector, "max_boxes", 100))
        self.batch_size = batch_size

    def __getattr__(self, name: str):
        if name == "detector":  # not set yet: no recursion
            raise AttributeError(name)
        return getattr(self.detector, name)

    # -- views of one image ----------------------------------------------------------------------
    def windows(self, image_hw: Sequence[int]) -> np.ndarray:
        """The tile windows ``(T, 4)`` ``(x1, y1, x2, y2)`` of an image of ``image_hw``."""
        return tile_windows(image_hw, self.tile, self.overlap)

    def _views(self, image: np.ndarray) -> Tuple[List[np.ndarray], np.ndarray]:
        """The crops of one image (the whole image last when it is seen) and their windows."""
        windows = self.windows(image.shape[:2])
        if len(windows) == 1 and self.whole_image:  # the one tile is the whole image
            windows = windows[:0]
        crops = [np.ascontiguousarray(image[y1:y2, x1:x2]) for x1, y1, x2, y2 in windows]
        if self.whole_image:
            crops.append(image)
        return crops, windows

    def _merged(self, image_hw: Sequence[int], windows: np.ndarray,
                found: Sequence[Detections]) -> Detections:
        """The views' detections in image pixels, merged (one view: the detector's own)."""
        if len(found) == 1 and not len(windows):
            return found[0]
        views = []
        for window, (boxes, scores, classes) in zip(windows, found):
            boxes = np.asarray(boxes, np.float64).reshape(-1, 4)
            shifted = boxes + np.tile(np.asarray(window[:2], np.float64), 2)
            keep = (~cut_by_window(shifted, window, image_hw) if self.whole_image
                    else np.ones(len(boxes), bool))
            views.append((shifted[keep], np.asarray(scores).reshape(-1)[keep],
                          np.asarray(classes).reshape(-1)[keep]))
        if self.whole_image and self.whole_from and views:  # all tiles' boxes at once
            boxes, scores, classes = (np.concatenate(parts) for parts in zip(*views))
            whole_boxes, whole_scores, whole_classes = found[-1]
            keep = ~left_to_whole(boxes, scores, classes, whole_boxes, whole_scores,
                                  whole_classes, image_hw, self._input_hw(image_hw),
                                  self.whole_from)
            views = [(boxes[keep], scores[keep], classes[keep])]
        views.extend(found[len(windows):])  # the whole image's
        return merge_detections(views, self.iou, self.merge, self.max_boxes)

    def _input_hw(self, image_hw: Sequence[int]) -> Tuple[int, int]:
        """The detector's network input for the whole image of ``image_hw``."""
        fit = getattr(self.detector, "input_hw_for", None)
        return tuple(fit(image_hw)) if fit is not None else tuple(self.detector.input_hw)

    # -- the detector's interface ----------------------------------------------------------------
    def detect_stream(self, images: Iterable[np.ndarray],
                      batch_size: int = 0) -> Iterator[Detections]:
        """Merged detections of each image of an iterable, in order; the views of successive
        images go through the detector's own stream, ``batch_size`` or this detector's batch
        size (the larger) at a time."""
        pending: List[Tuple[Tuple[int, int], np.ndarray, int]] = []

        def views() -> Iterator[np.ndarray]:
            for image in images:
                image = np.asarray(image)
                crops, windows = self._views(image)
                pending.append((image.shape[:2], windows, len(crops)))
                yield from crops
        found: List[Detections] = []
        for detections in self.detector.detect_stream(views(), max(batch_size, self.batch_size)):
            found.append(detections)
            while pending and len(found) >= pending[0][2]:
                image_hw, windows, count = pending.pop(0)
                yield self._merged(image_hw, windows, found[:count])
                del found[:count]

    def detect_batch(self, images: Sequence[np.ndarray]) -> List[Detections]:
        """Merged detections of several images of any sizes."""
        return list(self.detect_stream(images))

    def detect(self, image: np.ndarray) -> Detections:
        """Merged detections of one ``(H, W, 3)`` RGB image: ``(boxes, scores, classes)``."""
        return self.detect_batch([image])[0]

    def views_per_image(self, image_hw: Sequence[int]) -> int:
        """Forward passes one image of ``image_hw`` costs: its tiles, plus the whole image."""
        tiles = len(self.windows(image_hw))
        if tiles == 1 and self.whole_image:
            return 1
        return tiles + int(self.whole_image)

    def summary(self) -> str:
        """One line: the tiling."""
        th, tw = (self.tile, self.tile) if np.isscalar(self.tile) else self.tile
        handover = (f" (objects from {self.whole_from:g} px at the whole-image input: from the "
                    f"whole image)" if self.whole_image and self.whole_from else "")
        return (f"sliced: tiles of {th}x{tw} px overlapping {self.overlap:g}"
                f"{' plus the whole image' if self.whole_image else ''}{handover}, merged by "
                f"{self.merge} at IoU {self.iou:g}")


def recorded_whole_from(detector) -> float:
    """The hand-over to the whole image that ``detector``'s model file records
    (``ModelInfo.slicing.whole_from``: a model trained on tiles); 0 for any other detector."""
    slicing = getattr(getattr(detector, "info", None), "slicing", None)
    return slicing.whole_from if slicing is not None else 0.0
