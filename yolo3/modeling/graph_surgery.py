"""Copies of a body: batch norms folded into convolutions, another compute dtype, Keras's own
batch norms in place of yolo3's fused ones.

Both return new functional models with the same weights values; the body itself is not changed.
"""
from __future__ import annotations

from typing import Callable, Dict

import keras
import numpy as np

from yolo3.modeling.batch_norm import BatchNormalization, has_fused_batch_norms
from yolo3.modeling.keras_compat import inbound_tensors, node_counts, producing_layer

__all__ = ["FoldedBatchNorm", "fold_batch_norms", "refold_batch_norms", "with_compute_dtype",
           "keras_batch_norms", "float32_body"]


@keras.saving.register_keras_serializable(package="yolo3")
class FoldedBatchNorm(keras.layers.Layer):
    """Identity standing in for a BatchNormalization folded into the preceding convolution."""

    def call(self, inputs, training=None, mask=None):
        return inputs

    def compute_output_shape(self, input_shape):
        return input_shape


def _foldable_pairs(body: keras.Model) -> Dict[str, keras.layers.BatchNormalization]:
    """``{conv name: batch norm}`` for every linear Conv2D whose only consumer is a channel-last
    BatchNormalization called once."""
    pairs: Dict[str, keras.layers.BatchNormalization] = {}
    for layer in body.layers:
        if not isinstance(layer, keras.layers.BatchNormalization) or node_counts(layer)[0] != 1:
            continue
        axis = layer.axis if isinstance(layer.axis, int) else layer.axis[0]
        src = producing_layer(inbound_tensors(layer)[0])
        if (isinstance(src, keras.layers.Conv2D) and axis in (-1, 3) and node_counts(src) == (1, 1)
                and src.activation is keras.activations.linear):
            pairs[src.name] = layer
    return pairs


def fold_batch_norms(body: keras.Model) -> keras.Model:
    """An inference copy of ``body`` with every ``Conv2D -> BatchNormalization`` pair folded into one
    biased convolution (``w * g / sqrt(v + eps)``, ``beta + (b - mean) * g / sqrt(v + eps)``) and the
    BN layer replaced by an identity. Other layers are shared with ``body``. Outputs equal ``body``'s
    (``training=False``) up to float rounding; about 10% faster on CPU.
    """
    pairs = _foldable_pairs(body)
    if not pairs:
        return body
    bn_names = {bn.name for bn in pairs.values()}

    def clone(layer):
        if layer.name in pairs:
            config = layer.get_config()
            config["use_bias"] = True
            return keras.layers.Conv2D.from_config(config)
        if layer.name in bn_names:
            return FoldedBatchNorm(name=layer.name, dtype=layer.dtype_policy.name)  # not the global one
        return layer

    folded = keras.models.clone_model(body, clone_function=clone)
    _fold_weights(body, folded, pairs)
    return folded


def refold_batch_norms(body: keras.Model, folded: keras.Model) -> None:
    """Bring ``folded`` (made by :func:`fold_batch_norms` from ``body``) up to date with
    ``body``'s current weights, e.g. after training steps; no new model, nothing retraced."""
    if folded is not body:
        _fold_weights(body, folded, _foldable_pairs(body))


def _fold_weights(body: keras.Model, folded: keras.Model,
                  pairs: Dict[str, keras.layers.BatchNormalization]) -> None:
    for conv_name, bn in pairs.items():
        conv = body.get_layer(conv_name)
        weights = conv.get_weights()
        kernel = weights[0].astype(np.float64)
        bias = weights[1].astype(np.float64) if conv.use_bias else np.zeros(kernel.shape[-1])
        values = dict(zip([w.path.split("/")[-1] for w in bn.weights], bn.get_weights()))
        gamma = values.get("gamma", np.ones_like(bias))
        beta = values.get("beta", np.zeros_like(bias))
        factor = gamma / np.sqrt(values["moving_variance"].astype(np.float64) + bn.epsilon)
        folded.get_layer(conv_name).set_weights([
            (kernel * factor).astype(np.float32),
            (beta + (bias - values["moving_mean"]) * factor).astype(np.float32)])


def _copy(model: keras.Model, rebuild: Callable[[keras.layers.Layer], keras.layers.Layer]
          ) -> keras.Model:
    """A copy of functional ``model`` with each layer made by ``rebuild(layer)``, and the same
    weight values."""
    copy = keras.models.clone_model(model, clone_function=rebuild)
    for layer in model.layers:
        if layer.weights:
            copy.get_layer(layer.name).set_weights(layer.get_weights())
    return copy


def with_compute_dtype(model: keras.Model, policy: str) -> keras.Model:
    """A copy of functional ``model`` whose layers use the Keras dtype ``policy`` (e.g.
    ``"mixed_bfloat16"``: float32 variables, bfloat16 computation), with the same weight values."""
    def rebuild(layer):
        config = layer.get_config()
        config["dtype"] = policy
        return layer.__class__.from_config(config)
    return _copy(model, rebuild)


def keras_batch_norms(model: keras.Model) -> keras.Model:
    """``model`` itself when none of its layers is yolo3's fused
    :class:`yolo3.modeling.batch_norm.BatchNormalization`, else a copy of the functional ``model``
    with Keras's own layer in their place (same config, same weights): what files hold."""
    if not has_fused_batch_norms(model):
        return model

    def rebuild(layer):
        kind = (keras.layers.BatchNormalization if isinstance(layer, BatchNormalization)
                else layer.__class__)
        return kind.from_config(layer.get_config())
    return _copy(model, rebuild)


def float32_body(body: keras.Model) -> keras.Model:
    """``body`` itself when it computes in float32, else a float32 copy with its weights (what a
    checkpoint of a mixed-precision run holds, so that detectors compute in float32 by default)."""
    if all(layer.dtype_policy.name == "float32" for layer in body.layers):
        return body
    return with_compute_dtype(body, "float32")
