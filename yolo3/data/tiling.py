"""Tiled training: windows cut from each training image at its own resolution, on the fly in
either input pipeline (nothing is sliced to disk), chosen with a bias toward objects.

Images are float32 RGB ``(h, w, 3)``; boxes float32 ``(n, 5)`` pixel ``x1, y1, x2, y2, class``.
Per image (drawn by :func:`yolo3.data.planner.draw_tile_window`, its boxes by
:func:`yolo3.data.planner.window_boxes`, from the element's own random stream):

- with probability ``whole`` the image is kept whole (the usual resize follows: large objects
  and the context of the whole-image pass at inference);
- otherwise a window of ``size`` x ``size`` pixels (an image side shorter than that: the whole
  side) is cut; with probability ``background`` it lies anywhere, else it holds one of the
  image's objects, drawn uniformly, whole where the object fits in a tile (its centre otherwise);
- with ``whole_from``, an object drawn for a window that is large at the whole-image resize is
  shown on the whole image instead, and so is an image all of whose objects are, or that has
  none (background windows then come from images holding small objects): sliced detection
  leaves such objects to its whole-image view, so the model learns each object at the scale it
  will be seen at;
- boxes are shifted into the window and clipped to it; a box left with less than
  ``min_visible`` of its area is dropped.

Augmentation (scale, flip, colour, mosaic) then treats the window as the image.
"""
from __future__ import annotations

from yolo3.data.planner import TileSampling, draw_tile_window, window_boxes

__all__ = ["TileSampling", "draw_tile_window", "window_boxes"]
