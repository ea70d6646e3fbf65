"""The focal form of binary cross-entropy, shared by both heads' class losses (``keras.ops``)."""
from __future__ import annotations

from keras import ops

__all__ = ["focal_bce"]


def focal_bce(labels, logits, gamma: float = 0.0):
    """Element-wise binary cross-entropy of ``logits`` against ``labels``, scaled by
    ``|labels - sigmoid(logits)| ** gamma``: the focal loss of Lin et al. for 0/1 labels, its
    quality form (Li et al.) for soft ones; the gradient flows through the scale too. ``gamma``
    0: plain cross-entropy."""
    bce = ops.binary_crossentropy(labels, logits, from_logits=True)
    if not gamma:
        return bce
    return bce * ops.power(ops.abs(labels - ops.sigmoid(logits)), gamma)
