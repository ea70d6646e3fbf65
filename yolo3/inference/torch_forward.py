"""A functional Keras model's forward pass as plain PyTorch calls, for the detector on PyTorch.

Keras's eager layer calls cost PyTorch some 0.1-0.3 ms of Python each (argument checks, dtype
rules, tree walks), and its convolution does not hand PyTorch channels-last memory: tiny-af's
forward at 192 px took 20 ms through Keras where the same operators take 10.
:class:`TorchForward` walks the model's graph once and keeps one PyTorch call per layer: the
convolutions of a channels-first twin (:class:`yolo3.modeling.graph_surgery.ChannelsFirstConv2D`,
leaky ReLU fused) as ``torch.nn.functional.conv2d`` on channels-last memory (oneDNN's kernels on a
CPU, cuDNN's on a GPU), pooling, upsampling, padding, concatenation, addition and permutes as
their PyTorch functions, and any other layer through its own Keras call. Weights are read from
the layers' variables on every call (views, no copies), so new weights need no rebuild.

PyTorch backend only; float32 layers only (a ValueError names the first layer that is not).
"""
from __future__ import annotations

import math
from typing import Callable, Dict, List, Sequence, Tuple

import keras

from yolo3.modeling.graph_surgery import ChannelsFirstConv2D
from yolo3.modeling.keras_compat import call_graph

__all__ = ["TorchForward"]

Step = Tuple[Callable, List[int], int]  # (the call, its input tensors' ids, its output's id)


class TorchForward:
    """``forward(x, training=False)``: the maps ``model(x, training=False)`` gives, computed by
    plain PyTorch functions (a list where the model has several outputs; ``x`` a float32 batch,
    a NumPy array or a tensor, in the model's input layout). Inference only: ``training=True``
    is refused. ValueError (at construction) on another backend, a model with several inputs or
    a layer that does not compute in float32."""

    def __init__(self, model: keras.Model):
        if keras.backend.backend() != "torch":
            raise ValueError(f"TorchForward runs on the PyTorch backend, not "
                             f"{keras.backend.backend()!r}")
        if len(model.inputs) != 1:
            raise ValueError(f"{model.name}: TorchForward takes a model of one input, not "
                             f"{len(model.inputs)}")
        self.steps: List[Step] = []
        self.input_id = -1
        for layer, inputs, outputs in call_graph(model):
            if isinstance(layer, keras.layers.InputLayer):
                self.input_id = id(outputs[0])
                continue
            if layer.compute_dtype != "float32":
                raise ValueError(f"layer {layer.name!r} computes in {layer.compute_dtype}: "
                                 f"TorchForward runs float32 models only")
            if len(outputs) != 1:
                raise ValueError(f"layer {layer.name!r} has {len(outputs)} outputs: "
                                 f"TorchForward takes layers of one")
            self.steps.append((_torch_call(layer), [id(t) for t in inputs], id(outputs[0])))
        self.output_ids = [id(t) for t in model.outputs]
        self.several = isinstance(model.output, (list, tuple))

    def __call__(self, x, training: bool = False):
        if training:
            raise ValueError("TorchForward is for inference (training=False)")
        import torch
        with torch.no_grad():
            values: Dict[int, object] = {self.input_id: keras.ops.convert_to_tensor(x, "float32")}
            for call, inputs, output in self.steps:
                values[output] = call(*[values[i] for i in inputs])
            outputs = [values[i] for i in self.output_ids]
        return outputs if self.several else outputs[0]


def _torch_call(layer: keras.layers.Layer) -> Callable:
    """The PyTorch function standing in for ``layer``'s call (its own Keras call where there is
    none here)."""
    import torch
    import torch.nn.functional as F
    if isinstance(layer, ChannelsFirstConv2D):
        return _convolution(layer)
    config = layer.get_config()
    channels_first = config.get("data_format") == "channels_first"
    if isinstance(layer, keras.layers.MaxPooling2D) and channels_first:
        return _max_pooling(tuple(layer.pool_size), tuple(layer.strides), layer.padding)
    if (isinstance(layer, keras.layers.UpSampling2D) and channels_first
            and layer.interpolation == "nearest"):
        size = tuple(int(s) for s in layer.size)
        return lambda x: F.interpolate(x, scale_factor=size, mode="nearest")
    if isinstance(layer, keras.layers.ZeroPadding2D) and channels_first:
        (top, bottom), (left, right) = layer.padding
        return lambda x: F.pad(x, (left, right, top, bottom))
    if isinstance(layer, keras.layers.Concatenate):
        axis = int(layer.axis)
        return lambda *xs: torch.cat(xs, dim=axis)
    if isinstance(layer, keras.layers.Add):
        return lambda *xs: sum(xs[1:], xs[0])
    if isinstance(layer, keras.layers.Permute):
        dims = (0, *(int(d) for d in layer.dims))
        return lambda x: x.permute(dims)
    if isinstance(layer, keras.layers.LeakyReLU):
        slope = float(layer.negative_slope)
        return lambda x: F.leaky_relu(x, slope)
    return lambda *xs: layer(list(xs) if len(xs) > 1 else xs[0], training=False)


def _convolution(layer: ChannelsFirstConv2D) -> Callable:
    """``conv2d`` of a channels-first twin's convolution (kernel ``(out, kh, kw, in)`` read as
    ``(out, in, kh, kw)`` in channels-last memory), with its leaky ReLU in place."""
    import torch.nn.functional as F
    kh, kw = layer.kernel_size
    dh, dw = layer.dilation_rate
    if layer.padding == "valid":
        padding: Tuple[int, int] = (0, 0)
    elif layer.strides == (1, 1) and (kh - 1) * dh % 2 == 0 and (kw - 1) * dw % 2 == 0:
        padding = ((kh - 1) * dh // 2, (kw - 1) * dw // 2)  # Keras's "same": even on both sides
    else:  # "same" padding that differs from side to side: Keras's own call
        return lambda x: layer(x, training=False)
    strides, dilation, slope = layer.strides, layer.dilation_rate, layer.leaky_alpha

    def conv(x):
        bias = layer.bias.value if layer.use_bias else None
        out = F.conv2d(x, layer.kernel.value.permute(0, 3, 1, 2), bias, strides, padding, dilation)
        return out if slope is None else F.leaky_relu(out, slope, inplace=True)
    return conv


def _max_pooling(pool: Sequence[int], strides: Sequence[int], padding: str) -> Callable:
    """Keras's channels-first ``MaxPooling2D``: "same" pads the far side more, with -inf."""
    import torch.nn.functional as F
    if padding == "valid":
        return lambda x: F.max_pool2d(x, pool, strides)

    def same(x):
        pads = []
        for n, p, s in ((x.shape[3], pool[1], strides[1]), (x.shape[2], pool[0], strides[0])):
            total = max((math.ceil(n / s) - 1) * s + p - n, 0)
            pads += [total // 2, total - total // 2]
        return F.max_pool2d(F.pad(x, pads, value=float("-inf")), pool, strides)
    return same
