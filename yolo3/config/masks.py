"""Anchor masks: which anchors each output scale of a body uses (the one mask rule).

Masks are lists of anchor indices per output, largest stride first (the body's output order), the
anchors sorted by area. No TensorFlow here.
"""
from __future__ import annotations

from typing import List, Optional, Sequence

__all__ = ["default_masks", "validate_masks", "keras_yolo3_masks"]


def default_masks(num_anchors: int, num_scales: Optional[int] = None) -> List[List[int]]:
    """Anchor indices used by each output scale, largest stride first: the one mask rule.

    The anchors (sorted by area) are split into ``num_scales`` consecutive groups, the largest on the
    largest stride; ``num_scales`` defaults to ``num_anchors // 3`` (three anchors per scale).
    9 anchors -> ``[[6, 7, 8], [3, 4, 5], [0, 1, 2]]``; 6 -> ``[[3, 4, 5], [0, 1, 2]]``.
    """
    if num_scales is None:
        if num_anchors <= 0 or num_anchors % 3:
            raise ValueError(f"default anchor masks need a positive multiple of 3 anchors, got "
                             f"{num_anchors}")
        num_scales = num_anchors // 3
    if num_scales <= 0 or num_anchors <= 0 or num_anchors % num_scales:
        raise ValueError(f"{num_anchors} anchors do not split evenly over {num_scales} output "
                         "scales; give the anchor masks explicitly")
    per = num_anchors // num_scales
    return [[per * s + i for i in range(per)] for s in reversed(range(num_scales))]


def validate_masks(masks: Sequence[Sequence[int]], num_anchors: int) -> List[List[int]]:
    """Check that ``masks`` is a list of non-empty index lists into ``num_anchors`` anchors."""
    out = [[int(i) for i in m] for m in masks]
    if not out or any(not m for m in out):
        raise ValueError(f"anchor masks must be non-empty lists of indices, got {masks!r}")
    for m in out:
        for i in m:
            if not 0 <= i < num_anchors:
                raise ValueError(f"anchor mask index {i} is outside the {num_anchors} anchors")
    return out


def keras_yolo3_masks(num_layers: int) -> List[List[int]]:
    """keras-yolo3's masks: 3 output layers (9 anchors) ``[[6, 7, 8], [3, 4, 5], [0, 1, 2]]``,
    otherwise (tiny, 6 anchors) ``[[3, 4, 5], [1, 2, 3]]`` (the original yolov3-tiny.cfg's)."""
    return [[6, 7, 8], [3, 4, 5], [0, 1, 2]] if num_layers == 3 else [[3, 4, 5], [1, 2, 3]]
