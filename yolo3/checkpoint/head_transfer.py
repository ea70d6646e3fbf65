"""Carrying a YOLO output layer over to another class count.

An output convolution of ``A`` anchors and ``C`` classes has ``A * (5 + C)`` filters, laid out per
anchor as ``x, y, w, h, objectness, class 1 .. C``. The first five channels of each anchor do not
depend on the classes: where a file's output layer and the model's differ only in ``C`` (COCO's
80 classes against a custom set's few), those channels can start from the file while the class
channels start fresh. Fine-tuning from Darknet's COCO tiny weights then finds objects from its
first epoch (README, "Fine-tuning"). Plain NumPy: no TensorFlow.
"""
from __future__ import annotations

from typing import List, Optional, Sequence

import numpy as np

CLASS_FREE_CHANNELS = 5  # x, y, w, h, objectness: the channels of an anchor that no class owns

__all__ = ["CLASS_FREE_CHANNELS", "classes_per_anchor", "transfer_head"]


def classes_per_anchor(filters: int, num_anchors: int) -> Optional[int]:
    """``C`` when ``filters`` is ``num_anchors * (5 + C)`` with ``C >= 1``, else None."""
    if num_anchors < 1 or filters % num_anchors:
        return None
    classes = filters // num_anchors - CLASS_FREE_CHANNELS
    return classes if classes >= 1 else None


def transfer_head(source: Sequence[np.ndarray], target: Sequence[np.ndarray], num_anchors: int
                  ) -> Optional[List[np.ndarray]]:
    """``target``'s ``[kernel, bias]`` with each anchor's box and objectness channels taken from
    ``source``'s, its class channels kept; None unless both are output layers of ``num_anchors``
    anchors with the same kernel size and input channels (kernels ``(kh, kw, c_in, A * (5 + C))``,
    biases ``(A * (5 + C),)``), whatever their class counts."""
    if len(source) != 2 or len(target) != 2:
        return None
    (src_kernel, src_bias), (dst_kernel, dst_bias) = source, target
    if (np.ndim(src_kernel) != 4 or np.shape(src_kernel)[:3] != np.shape(dst_kernel)[:3]
            or np.shape(src_bias) != np.shape(src_kernel)[-1:]
            or np.shape(dst_bias) != np.shape(dst_kernel)[-1:]):
        return None
    src_classes = classes_per_anchor(np.shape(src_kernel)[-1], num_anchors)
    dst_classes = classes_per_anchor(np.shape(dst_kernel)[-1], num_anchors)
    if src_classes is None or dst_classes is None:
        return None
    kernel, bias = np.array(dst_kernel, copy=True), np.array(dst_bias, copy=True)
    src_width, dst_width = CLASS_FREE_CHANNELS + src_classes, CLASS_FREE_CHANNELS + dst_classes
    for anchor in range(num_anchors):
        src = slice(anchor * src_width, anchor * src_width + CLASS_FREE_CHANNELS)
        dst = slice(anchor * dst_width, anchor * dst_width + CLASS_FREE_CHANNELS)
        kernel[..., dst] = src_kernel[..., src]
        bias[dst] = src_bias[src]
    return [kernel, bias]
