"""The work in one image: a body's forward GFLOP, counted from its convolutions (no TensorFlow:
the backend benchmark's JAX and PyTorch children use it too)."""
from __future__ import annotations

from yolo3.config.specs import get_spec
from yolo3.modeling.bodies import build_spec_body

NUM_CLASSES = 80

__all__ = ["NUM_CLASSES", "forward_gflops"]


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
