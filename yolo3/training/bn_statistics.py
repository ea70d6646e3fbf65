"""Batch-norm statistics recomputed for the weights a model holds now ("precise BN").

Keras keeps each batch norm's moving mean and variance as an exponential average over training
steps (momentum 0.99: about the last 100 steps). In a short run, with a large batch (few steps) or
with weights that move fast, that average lags the weights, and a model evaluated or saved with
it normalises with statistics of weights it no longer has; with EMA weights swapped in for
evaluation it never had them. :class:`BatchNormStatistics` replaces the moving statistics by the
average batch mean and variance of each batch norm's input over a fixed set of images, computed
with the current weights in training mode (each batch norm normalising with its batch's own
statistics, as during training), as detectron2's PreciseBN does.

Frozen batch norms (``trainable=False``: they normalise with their moving statistics even while
training) keep theirs. The computation runs on a private copy of the body, so the body's own
variables (mirrored under a distribution strategy) are only assigned, once each.
"""
from __future__ import annotations

from typing import Iterable, List

import keras
import numpy as np
from keras import ops

from yolo3.inference.portable import compiled_call
from yolo3.modeling.keras_compat import all_layers, inbound_tensors
from yolo3.training.jax_cluster import SINGLE, ProcessGroup

__all__ = ["BatchNormStatistics", "trainable_batch_norms"]


def trainable_batch_norms(body: keras.Model) -> List[keras.layers.BatchNormalization]:
    """The batch norms of ``body`` (nested models too) that normalise with batch statistics while
    training, in graph order."""
    return [layer for layer in all_layers(body)
            if isinstance(layer, keras.layers.BatchNormalization) and layer.trainable]


class BatchNormStatistics:
    """Recompute the moving statistics of ``body``'s trainable batch norms over ``batches``.

    ``batches``: an iterable (re-iterable, e.g. a cached ``tf.data.Dataset``) of image batches
    ``(n, h, w, 3)`` float32 in ``[0, 1]`` as the body takes them. With several processes
    (``group``) each gives its own share of the batches
    (:func:`yolo3.training.datasets.batch_norm_images`), computed on a copy of its own, and the
    sums are gathered: the statistics of one process over all the batches.
    """

    def __init__(self, body: keras.Model, batches: Iterable, group: ProcessGroup = SINGLE):
        self.body = body
        self.batches = batches
        self.group = group
        self.layers = trainable_batch_norms(body)
        self._copy = None
        self._moments = None

    def _build(self) -> None:
        copy = keras.models.clone_model(self.body)
        names = [layer.name for layer in self.layers]
        inputs = copy.inputs[0] if len(copy.inputs) == 1 else copy.inputs  # called with one array
        probe = keras.Model(inputs, [inbound_tensors(copy.get_layer(n))[0] for n in names])

        def batch_moments(inputs):
            out = []
            for x, layer in zip(inputs, self.layers):
                axes = [a for a in range(len(x.shape)) if a != layer.axis % len(x.shape)]
                out.append(ops.moments(ops.cast(x, "float32"), axes=axes))
            return out

        if keras.backend.backend() == "tensorflow":
            import tensorflow as tf

            @tf.function(reduce_retracing=True)
            def moments(images):
                inputs = probe(images, training=True)
                return batch_moments(inputs if isinstance(inputs, (list, tuple)) else [inputs])
        else:  # JAX, PyTorch: jit / eager, the statistics untouched
            run = compiled_call(probe, batch_moments, training=True)

            def moments(images):
                return run(np.asarray(images, np.float32))
        self._copy, self._moments = copy, moments

    def recompute(self) -> int:
        """Set each trainable batch norm's moving mean and variance to the image-weighted average
        of its batch means and variances over ``batches``; returns the number of images used (0:
        nothing changed)."""
        if not self.layers:
            return 0
        with self.group.local():  # the copy stays on this process's devices
            if self._copy is None:
                self._build()
            self._copy.set_weights(self.body.get_weights())
            sums = [[np.zeros(layer.moving_mean.shape, np.float64),
                     np.zeros(layer.moving_variance.shape, np.float64)] for layer in self.layers]
            count = 0
            for batch in self.batches:
                images = batch[0] if isinstance(batch, (tuple, list)) else batch
                n = int(images.shape[0])
                if n == 0:
                    continue
                for acc, (mean, variance) in zip(sums, self._moments(images)):
                    acc[0] += n * np.asarray(ops.convert_to_numpy(mean), np.float64)
                    acc[1] += n * np.asarray(ops.convert_to_numpy(variance), np.float64)
                count += n
        if self.group.several:  # every process's sums, added in process order (the same everywhere)
            flat = np.concatenate([np.ravel(a) for pair in sums for a in pair] + [[count]])
            total = self.group.allgather(flat).sum(axis=0)
            count, at = int(total[-1]), 0
            for pair in sums:
                for j, a in enumerate(pair):
                    pair[j] = total[at:at + a.size].reshape(a.shape)
                    at += a.size
        if count == 0:
            return 0
        for layer, (mean, variance) in zip(self.layers, sums):
            layer.moving_mean.assign((mean / count).astype(np.float32))
            layer.moving_variance.assign((variance / count).astype(np.float32))
        return count
