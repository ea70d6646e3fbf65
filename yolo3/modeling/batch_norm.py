"""Batch normalisation that trains through TensorFlow's fused kernel.

Keras 3's ``BatchNormalization`` computes a training step's batch statistics and normalisation as
separate operations (a float32 cast of the input, mean, squared difference, mean, scale, shift and
their gradients): on a CPU they took about 30% of a mixed-bfloat16 YOLOv3 training step, and under
mixed bfloat16 they were slower than in float32 (``yolo3 benchmark training --profile``).
:class:`BatchNormalization` is that layer with its training call through ``FusedBatchNormV3`` (oneDNN's
fused kernel on CPUs, cuDNN's on GPUs: bfloat16/float16 input, float32 statistics) and everything
else inherited: variables, inference call, moving averages (momentum, biased batch variance, as
Keras keeps them), config. Where TensorFlow sees a GPU, the epsilon of the *training*
normalisation is at least 1.001e-5, the smallest cuDNN takes (as ``tf.nn.fused_batch_norm``
does); on CPUs it is the layer's own (Darknet's 1e-6), as are inference's everywhere. On the JAX
and PyTorch backends the layer is Keras's own (TensorFlow is imported only by the fused call).

It has Keras's class name on purpose: Keras names a layer's weights in a ``.weights.h5`` file after
its class, so a body with these layers and a body with Keras's write and read the same weights
files, either way. A ``.keras`` file names the class itself:
:func:`yolo3.modeling.graph_surgery.keras_batch_norms` gives a copy with Keras's own layer (the same
weights), and :mod:`yolo3.checkpoint.saving` writes every ``.keras`` through it, so the file loads
in plain Keras.
"""
from __future__ import annotations

import keras

__all__ = ["BatchNormalization", "MIN_FUSED_EPSILON", "training_epsilon", "has_fused_batch_norms"]

MIN_FUSED_EPSILON = 1.001e-5  # cuDNN's CUDNN_BN_MIN_EPSILON, with TensorFlow's margin


def training_epsilon(epsilon: float) -> float:
    """The epsilon the fused training call normalises with: ``epsilon``, raised to
    :data:`MIN_FUSED_EPSILON` where TensorFlow sees a GPU (cuDNN refuses smaller ones)."""
    import tensorflow as tf
    if epsilon >= MIN_FUSED_EPSILON or not tf.config.list_physical_devices("GPU"):
        return float(epsilon)
    return MIN_FUSED_EPSILON


@keras.saving.register_keras_serializable(package="yolo3")
class BatchNormalization(keras.layers.BatchNormalization):
    """``keras.layers.BatchNormalization`` whose training call is one fused kernel (NHWC, 4-D
    input, no mask, renorm or synchronised statistics; other cases, and the JAX and PyTorch
    backends, take Keras's own path)."""

    def _fusable(self, inputs, mask) -> bool:
        return (keras.backend.backend() == "tensorflow" and mask is None and not self.renorm and not self.synchronized
                and len(inputs.shape) == 4 and self.axis in (3, -1))

    def call(self, inputs, training=None, mask=None):
        if not (training and self.trainable) or not self._fusable(inputs, mask):
            return super().call(inputs, training=training, mask=mask)
        import tensorflow as tf
        x = tf.cast(inputs, self.compute_dtype)
        channels = x.shape[-1]
        scale = tf.cast(self.gamma, tf.float32) if self.scale else tf.ones([channels], tf.float32)
        offset = tf.cast(self.beta, tf.float32) if self.center else tf.zeros([channels], tf.float32)
        empty = tf.constant([], tf.float32)
        y, mean, unbiased, *_ = tf.raw_ops.FusedBatchNormV3(
            x=x, scale=scale, offset=offset, mean=empty, variance=empty,
            epsilon=training_epsilon(self.epsilon), exponential_avg_factor=1.0,
            data_format="NHWC", is_training=True)
        count = tf.cast(tf.reduce_prod(tf.shape(x)[:3]), tf.float32)
        variance = unbiased * (count - 1.0) / tf.maximum(count, 1.0)  # Keras keeps the biased one
        momentum = self.momentum
        self.moving_mean.assign(self.moving_mean * momentum + mean * (1.0 - momentum))
        self.moving_variance.assign(self.moving_variance * momentum + variance * (1.0 - momentum))
        return y


def has_fused_batch_norms(model: keras.Model) -> bool:
    """Whether any layer of functional ``model`` is yolo3's fused :class:`BatchNormalization`."""
    return any(isinstance(layer, BatchNormalization) for layer in model.layers)
