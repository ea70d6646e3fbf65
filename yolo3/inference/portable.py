"""The detector's compiled forward pass on the JAX and PyTorch backends (TensorFlow's is a
``tf.function`` in :mod:`yolo3.inference.detector`).

JAX: one ``jax.jit`` of the body's stateless call and whatever follows it (decoding and NMS), with
the weights passed in on every call, so that a detector whose weights changed (``sync_weights``)
runs the new ones without compiling again; it compiles once per input shape. PyTorch: the eager
call under ``torch.no_grad()``.
"""
from __future__ import annotations

from typing import Callable, List

import keras

__all__ = ["float_maps", "compiled_call"]


def float_maps(outputs) -> List:
    """A body's output(s) as a list of float32 maps, one per scale (``keras.ops``)."""
    items = outputs if isinstance(outputs, (list, tuple)) else [outputs]
    return [keras.ops.cast(o, "float32") for o in items]


def compiled_call(body, after: Callable, training: bool = False) -> Callable:
    """``run(x, *extra) = after(float_maps(body(x)), *extra)``, compiled for the backend.

    body: a Keras model; x: a float32 batch ``(B, in_h, in_w, 3)``; ``after`` takes the maps and
    ``extra`` and returns tensors (``keras.ops``). Returns the backend's tensors. ``training``: the
    body's mode (batch norms normalise with the batch's statistics; their moving statistics are
    not updated).
    """
    backend = keras.backend.backend()
    if backend == "jax":
        import jax

        def pure(trainable, non_trainable, x, *extra):
            outputs, _ = body.stateless_call(trainable, non_trainable, x, training=training)
            return after(float_maps(outputs), *extra)
        jitted = jax.jit(pure)

        def run(x, *extra):
            return jitted([v.value for v in body.trainable_variables],
                          [v.value for v in body.non_trainable_variables], x, *extra)
        return run
    if backend == "torch":
        import torch

        def run(x, *extra):
            with torch.no_grad():
                if not training:
                    return after(float_maps(body(x, training=False)), *extra)
                saved = [v.value.clone() for v in body.non_trainable_variables]
                try:
                    return after(float_maps(body(x, training=True)), *extra)
                finally:  # the moving statistics stay as they were
                    for v, value in zip(body.non_trainable_variables, saved):
                        v.assign(value)
        return run
    raise ValueError(f"compiled_call is for the JAX and PyTorch backends, not {backend!r} "
                     "(TensorFlow's detector compiles a tf.function)")
