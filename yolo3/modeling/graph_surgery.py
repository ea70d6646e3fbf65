"""Copies of a body: batch norms folded into convolutions, another compute dtype, Keras's own
batch norms in place of yolo3's fused ones, a channels-first twin.

Each returns a new functional model with the same weight values; the body itself is not changed.
"""
from __future__ import annotations

from typing import Callable, Dict, List, Optional

import keras
import numpy as np

from yolo3.modeling.batch_norm import BatchNormalization, has_fused_batch_norms
from yolo3.modeling.keras_compat import (
    all_layers,
    call_graph,
    inbound_tensors,
    node_counts,
    producing_layer,
)

__all__ = ["FoldedBatchNorm", "fold_batch_norms", "refold_batch_norms", "with_compute_dtype",
           "keras_batch_norms", "float32_body", "ChannelsFirstConv2D", "channels_first_twin",
           "copy_weights"]


@keras.saving.register_keras_serializable(package="yolo3")
class FoldedBatchNorm(keras.layers.Layer):
    """Identity standing in for a BatchNormalization folded into the preceding convolution."""

    def call(self, inputs, training=None, mask=None):
        return inputs

    def compute_output_shape(self, input_shape):
        return input_shape


# layers a channels-first twin leaves out (their output is their input)
_PASS_THROUGH = (keras.layers.Identity, FoldedBatchNorm)
# layers that compute the same whatever the channel axis (elementwise, or an identity)
_LAYOUT_FREE = (keras.layers.InputLayer, keras.layers.Add, keras.layers.LeakyReLU,
                keras.layers.Activation, *_PASS_THROUGH)
# layers that take a data_format or a channel axis
_LAYOUT_BOUND = (keras.layers.Conv2D, keras.layers.ZeroPadding2D, keras.layers.UpSampling2D,
                 keras.layers.MaxPooling2D, keras.layers.Concatenate,
                 keras.layers.BatchNormalization)


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


@keras.saving.register_keras_serializable(package="yolo3")
class ChannelsFirstConv2D(keras.layers.Layer):
    """A 2-D convolution of channels-first data ``(B, c, h, w)`` whose kernel is kept as ``(out,
    kh, kw, in)``: PyTorch's ``(out, in, kh, kw)`` kernel in its channels-last memory order, so
    that Keras's re-laying of a ``(kh, kw, in, out)`` kernel on every call (a strided copy: 16 of
    the 33 ms of tiny-af's forward on a CPU) becomes a view, and a channels-last input meets a
    channels-last kernel (oneDNN's path on a CPU; :mod:`yolo3.inference.torch_forward`). Built
    from a Keras ``Conv2D``'s config (linear, one group), with the ``LeakyReLU`` that follows it
    fused in (``leaky_alpha``; None: none); :meth:`load` takes that layer's weights."""

    def __init__(self, filters: int, kernel_size, strides=(1, 1), padding: str = "valid",
                 use_bias: bool = True, dilation_rate=(1, 1), leaky_alpha: Optional[float] = None,
                 **kwargs):
        super().__init__(**kwargs)
        self.leaky_alpha = None if leaky_alpha is None else float(leaky_alpha)
        self.filters = int(filters)
        self.kernel_size = tuple(int(k) for k in kernel_size)
        self.strides = tuple(int(k) for k in strides)
        self.padding = padding
        self.use_bias = bool(use_bias)
        self.dilation_rate = tuple(int(k) for k in dilation_rate)

    @classmethod
    def from_conv_config(cls, config: dict, leaky_alpha: Optional[float] = None
                         ) -> "ChannelsFirstConv2D":
        """The layer standing in for a ``Conv2D`` of ``config`` and the ``LeakyReLU`` of
        ``leaky_alpha`` after it (ValueError for what it lacks: an activation, groups)."""
        activation = config.get("activation", "linear")
        if activation not in ("linear", None) or int(config.get("groups", 1)) != 1:
            raise ValueError(f"convolution {config.get('name')!r}: a channels-first twin takes "
                             f"linear convolutions of one group")
        return cls(config["filters"], config["kernel_size"], config["strides"], config["padding"],
                   config["use_bias"], config["dilation_rate"], leaky_alpha, name=config["name"],
                   dtype=config.get("dtype"))

    def build(self, input_shape):
        self.kernel = self.add_weight(shape=(self.filters, *self.kernel_size, int(input_shape[1])),
                                      initializer="zeros", name="kernel")
        self.bias = (self.add_weight(shape=(self.filters,), initializer="zeros", name="bias")
                     if self.use_bias else None)

    def load(self, conv: keras.layers.Conv2D) -> None:
        """Take ``conv``'s weights (kernel ``(kh, kw, in, out)``, bias)."""
        weights = conv.get_weights()
        self.kernel.assign(np.transpose(weights[0], (3, 0, 1, 2)))
        if self.use_bias:
            self.bias.assign(weights[1])

    def call(self, inputs):
        kernel = keras.ops.transpose(keras.ops.cast(self.kernel, self.compute_dtype), (1, 2, 3, 0))
        out = keras.ops.conv(inputs, kernel, self.strides, self.padding, "channels_first",
                             self.dilation_rate)
        if self.use_bias:
            out = out + keras.ops.reshape(keras.ops.cast(self.bias, self.compute_dtype),
                                          (1, self.filters, 1, 1))
        if self.leaky_alpha is not None:
            out = keras.ops.leaky_relu(out, negative_slope=self.leaky_alpha)
        return out

    def compute_output_shape(self, input_shape):
        conv = keras.layers.Conv2D(self.filters, self.kernel_size, self.strides, self.padding,
                                   "channels_first", self.dilation_rate)
        return conv.compute_output_shape(input_shape)

    def get_config(self) -> dict:
        config = super().get_config()
        config.update(filters=self.filters, kernel_size=list(self.kernel_size),
                      strides=list(self.strides), padding=self.padding, use_bias=self.use_bias,
                      dilation_rate=list(self.dilation_rate), leaky_alpha=self.leaky_alpha)
        return config


def channels_first_twin(model: keras.Model) -> keras.Model:
    """A copy of functional ``model`` (channels-last ``(B, h, w, 3)`` in, channels-last maps out)
    that computes in channels-first inside and calls fewer layers: one transpose of the input;
    every convolution a :class:`ChannelsFirstConv2D` (its kernel kept in PyTorch's layout, the
    ``LeakyReLU`` after it fused in); padding, pooling, upsampling, concatenation and batch norm
    on ``(B, c, h, w)``; identities (folded batch norms, taps) left out; one transpose of each
    output. The same weight values, the same maps.

    For PyTorch, where Keras's convolution copies every channels-last tensor to channels-first and
    back and re-lays every kernel on every call, and every layer call costs Python time. Not for
    TensorFlow's CPU kernels, which have no channels-first convolution. ValueError naming the first
    layer it cannot lay out."""
    _check_twinnable(model)
    calls = call_graph(model)
    consumers: Dict[int, List[tuple]] = {}
    for call in calls:
        for tensor in call[1]:
            consumers.setdefault(id(tensor), []).append(call)
    image = keras.Input(model.input_shape[1:], name="image")
    twin = {id(model.inputs[0]): keras.layers.Permute((3, 1, 2), name="to_channels_first")(image)}
    fused = set()
    for layer, inputs, outputs in calls:
        if isinstance(layer, keras.layers.InputLayer) or id(outputs[0]) in fused:
            continue
        inputs = [twin[id(t)] for t in inputs]
        if isinstance(layer, _PASS_THROUGH):
            twin[id(outputs[0])] = inputs[0]
        elif isinstance(layer, keras.layers.Conv2D):
            chain = _leaky_chain(outputs[0], consumers)
            leaky = chain[-1][0].negative_slope if chain else None
            out = ChannelsFirstConv2D.from_conv_config(layer.get_config(), leaky)(inputs[0])
            for tensor in [outputs[0], *(link[2][0] for link in chain)]:
                twin[id(tensor)] = out
                fused.add(id(tensor))
        else:
            twin[id(outputs[0])] = _channels_first_layer(layer)(
                inputs if len(inputs) > 1 else inputs[0])
    outputs = [keras.layers.Permute((2, 3, 1), name=f"to_channels_last_{i}")(twin[id(o)])
               for i, o in enumerate(model.outputs)]
    copy = keras.Model(image, outputs if len(outputs) > 1 else outputs[0],
                       name=f"{model.name}_nchw")
    copy_weights(model, copy)
    return copy


def _check_twinnable(model: keras.Model) -> None:
    for layer in model.layers:
        if isinstance(layer, BatchNormalization) or not isinstance(layer,
                                                                   _LAYOUT_FREE + _LAYOUT_BOUND):
            raise ValueError(f"no channels-first twin for layer {layer.name!r} "
                             f"({type(layer).__name__})")
        if isinstance(layer, (keras.layers.Concatenate, keras.layers.BatchNormalization)):
            axis = layer.axis if isinstance(layer.axis, int) else list(layer.axis)[0]
            if axis not in (-1, 3):
                raise ValueError(f"no channels-first twin for layer {layer.name!r}: it works on "
                                 f"axis {axis}, not the channels")


def _leaky_chain(tensor, consumers: Dict[int, List[tuple]]) -> List[tuple]:
    """The calls of identities and the ``LeakyReLU`` that take a convolution's output ``tensor``,
    each alone, in order (empty unless the chain ends in a ``LeakyReLU``): what fuses into its
    twin. Calls as :func:`yolo3.modeling.keras_compat.call_graph` gives them."""
    chain = []
    while len(consumers.get(id(tensor), ())) == 1:
        (call,) = consumers[id(tensor)]
        chain.append(call)
        if isinstance(call[0], keras.layers.LeakyReLU):
            return chain
        if not isinstance(call[0], _PASS_THROUGH):
            break
        tensor = call[2][0]
    return []


def _channels_first_layer(layer: keras.layers.Layer) -> keras.layers.Layer:
    config = layer.get_config()
    if "data_format" in config:
        config["data_format"] = "channels_first"
    if isinstance(layer, (keras.layers.Concatenate, keras.layers.BatchNormalization)):
        config["axis"] = 1
    return layer.__class__.from_config(config)


def copy_weights(source: keras.Model, target: keras.Model) -> None:
    """Set each layer of ``target`` (or of a model nested in it) that has weights to the values of
    ``source``'s layer of the same name (a :class:`ChannelsFirstConv2D` re-lays its kernel)."""
    layers = {layer.name: layer for layer in all_layers(target)}
    for layer in source.layers:
        if isinstance(layers.get(layer.name), ChannelsFirstConv2D):
            layers[layer.name].load(layer)
        elif layer.weights:
            layers[layer.name].set_weights(layer.get_weights())
