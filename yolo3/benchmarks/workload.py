"""What the training benchmarks run: a body's forward GFLOP per image, counted from its
convolutions, and a fixed random training batch with targets encoded in NumPy (no TensorFlow: the
backend benchmark's JAX and PyTorch children use both)."""
from __future__ import annotations

from yolo3.config.specs import get_spec
from yolo3.data.dataset_config import training_inputs
from yolo3.heads.registry import as_head
from yolo3.modeling.bodies import build_spec_body

NUM_CLASSES = 80

__all__ = ["NUM_CLASSES", "forward_gflops", "random_training_batch"]


def forward_gflops(model: str, size: int) -> float:
    """Forward GFLOP of one image of the variant's body for 80 classes: 2 x the multiply-adds of
    its convolutions (Darknet's count: 65.9 for YOLOv3-416)."""
    import keras
    body = build_spec_body(get_spec(model), NUM_CLASSES, input_shape=(size, size))
    flops = 0
    for layer in body.layers:
        if isinstance(layer, keras.layers.Conv2D):
            kh, kw, cin, cout = layer.kernel.shape
            oh, ow = layer.output.shape[1:3]
            flops += 2 * kh * kw * cin * cout * oh * ow
    return flops / 1e9


def random_training_batch(spec, size: int, batch: int, max_boxes: int, seed: int = 0):
    """``(inputs, zeros)`` of a training model of ``spec`` for 80 classes at ``size``: images
    ``(batch, size, size, 3)`` in [0, 1] with two random boxes each, padded to ``max_boxes``
    (pixels ``x1, y1, x2, y2, class``); the anchor head's ``y_true`` encoded with the variant's
    default anchors. Inputs: ``(images, boxes)`` (anchor-free) or ``(images, *y_true, boxes)``."""
    import numpy as np
    rng = np.random.default_rng(seed)
    x = rng.uniform(0, 1, (batch, size, size, 3)).astype("float32")
    boxes = np.zeros((batch, max_boxes, 5), "float32")
    for i in range(batch):
        for k in range(2):
            x1, y1 = rng.uniform(0, 0.6 * size, 2)
            w, h = rng.uniform(0.1 * size, 0.4 * size, 2)
            boxes[i, k] = [x1, y1, x1 + w, y1 + h, rng.integers(NUM_CLASSES)]
    encoding = as_head(spec.default_head()).target_encoding(NUM_CLASSES, assign_iou=1.0)
    return training_inputs(encoding, (x,), boxes)
