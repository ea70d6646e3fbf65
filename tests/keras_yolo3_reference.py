"""keras-yolo3's model structure and its Keras 2 weight files, written here for the tests.

:func:`reference_body` builds keras-yolo3's ``yolo_body`` / ``tiny_yolo_body`` the way its
``yolo3/model.py`` does (layers created in its order, Keras's default batch-norm epsilon 1e-3, the
stride-2 top/left padding), recording every layer's Keras 2 default name (``conv2d_N``,
``batch_normalization_N``, ...) in creation order. :func:`write_keras2_h5` writes the weights in
Keras 2's HDF5 layouts with h5py: ``save_weights`` (layer groups at the root) and whole-model
``save`` (under ``model_weights``, with a ``model_config``). Nothing here uses yolo3.
"""
from __future__ import annotations

import json
from collections import defaultdict
from typing import Dict, List, Tuple

import h5py
import keras
import numpy as np
from keras import layers

_KERAS2_KIND = {layers.Conv2D: "conv2d", layers.BatchNormalization: "batch_normalization",
                layers.LeakyReLU: "leaky_re_lu", layers.ZeroPadding2D: "zero_padding2d",
                layers.Add: "add", layers.UpSampling2D: "up_sampling2d",
                layers.Concatenate: "concatenate", layers.MaxPooling2D: "max_pooling2d"}


class _Keras2Names:
    """Creates layers and remembers them with the name Keras 2 would have given them."""

    def __init__(self, first_index: int = 1):
        self.first_index = first_index
        self.counts = defaultdict(int)
        self.created: List[Tuple[str, keras.layers.Layer]] = []

    def __call__(self, cls, *args, **kwargs):
        layer = cls(*args, **kwargs)
        kind = _KERAS2_KIND[cls]
        index = self.counts[kind] + self.first_index
        self.counts[kind] += 1
        self.created.append((kind if index == 0 else f"{kind}_{index}", layer))
        return layer


def reference_body(kind: str, num_classes: int, first_index: int = 1):
    """``(model, [(keras 2 name, layer) in creation order])`` of keras-yolo3's ``yolo_body``
    (``kind='yolov3'``) or ``tiny_yolo_body`` (``'tiny'``) for 3 anchors per scale.
    ``first_index`` 1 names like Keras 2.1 (``conv2d_1`` first), 0 like tf.keras (``conv2d``)."""
    make = _Keras2Names(first_index)
    out_filters = 3 * (num_classes + 5)

    def conv_bn_leaky(x, filters, size, strides=1):
        x = make(layers.Conv2D, filters, size, strides=strides, use_bias=False,
                 padding="valid" if strides == 2 else "same")(x)
        x = make(layers.BatchNormalization)(x)  # epsilon 1e-3: Keras's default
        return make(layers.LeakyReLU, negative_slope=0.1)(x)

    def output_conv(x):
        return make(layers.Conv2D, out_filters, 1, padding="same")(x)

    def resblock(x, filters, blocks):
        x = make(layers.ZeroPadding2D, ((1, 0), (1, 0)))(x)
        x = conv_bn_leaky(x, filters, 3, strides=2)
        for _ in range(blocks):
            y = conv_bn_leaky(x, filters // 2, 1)
            y = conv_bn_leaky(y, filters, 3)
            x = make(layers.Add)([x, y])
        return x

    def last_layers(x, filters):
        for f, k in ((filters, 1), (filters * 2, 3), (filters, 1), (filters * 2, 3), (filters, 1)):
            x = conv_bn_leaky(x, f, k)
        return x, output_conv(conv_bn_leaky(x, filters * 2, 3))

    inputs = keras.Input((None, None, 3))
    if kind == "yolov3":
        x = conv_bn_leaky(inputs, 32, 3)
        x = resblock(x, 64, 1)
        x = resblock(x, 128, 2)
        c3 = x = resblock(x, 256, 8)    # keras-yolo3's darknet.layers[92]
        c4 = x = resblock(x, 512, 8)    # darknet.layers[152]
        x = resblock(x, 1024, 4)
        x, y1 = last_layers(x, 512)
        x = make(layers.UpSampling2D, 2)(conv_bn_leaky(x, 256, 1))
        x, y2 = last_layers(make(layers.Concatenate)([x, c4]), 256)
        x = make(layers.UpSampling2D, 2)(conv_bn_leaky(x, 128, 1))
        _, y3 = last_layers(make(layers.Concatenate)([x, c3]), 128)
        outputs = [y1, y2, y3]
    else:
        x = inputs
        for filters in (16, 32, 64, 128):
            x = conv_bn_leaky(x, filters, 3)
            x = make(layers.MaxPooling2D, 2, strides=2, padding="same")(x)
        x1 = conv_bn_leaky(x, 256, 3)
        x = make(layers.MaxPooling2D, 2, strides=2, padding="same")(x1)
        x = conv_bn_leaky(x, 512, 3)
        x = make(layers.MaxPooling2D, 2, strides=1, padding="same")(x)
        x = conv_bn_leaky(x, 1024, 3)
        x2 = conv_bn_leaky(x, 256, 1)
        y1 = output_conv(conv_bn_leaky(x2, 512, 3))
        x2 = make(layers.UpSampling2D, 2)(conv_bn_leaky(x2, 128, 1))
        y2 = output_conv(conv_bn_leaky(make(layers.Concatenate)([x2, x1]), 256, 3))
        outputs = [y1, y2]
    return keras.Model(inputs, outputs), make.created


def randomise(created, rng: np.random.Generator) -> None:
    """Random kernels/biases and non-trivial batch-norm statistics for every created layer."""
    for _, layer in created:
        if isinstance(layer, layers.BatchNormalization):
            n = layer.gamma.shape[0]
            layer.set_weights([rng.uniform(0.5, 1.5, n), rng.normal(0, 0.2, n),
                               rng.normal(0, 0.2, n), rng.uniform(0.5, 2.0, n)])
        elif isinstance(layer, layers.Conv2D):
            weights = layer.get_weights()
            fan_in = np.prod(weights[0].shape[:3])
            layer.set_weights([rng.normal(0, np.sqrt(2 / fan_in), w.shape).astype(np.float32)
                               if i == 0 else rng.normal(0, 0.1, w.shape).astype(np.float32)
                               for i, w in enumerate(weights)])


_WEIGHT_NAMES = {"conv2d": ("kernel", "bias"),
                 "batch_normalization": ("gamma", "beta", "moving_mean", "moving_variance")}


def write_keras2_h5(path, created, whole_model: bool, extra_names=("input_1",)) -> None:
    """Write the created layers' weights as Keras 2's ``save_weights`` (``whole_model=False``) or
    ``save`` (``True``: under ``model_weights``, with ``model_config`` and ``training_config``)."""
    with h5py.File(path, "w") as f:
        if whole_model:
            f.attrs["model_config"] = json.dumps({"class_name": "Model", "config": {
                "name": "model_1", "layers": []}}).encode()
            f.attrs["training_config"] = json.dumps({"loss": "yolo_loss"}).encode()
            root = f.create_group("model_weights")
        else:
            root = f
        names = list(extra_names) + [name for name, _ in created]
        root.attrs["layer_names"] = [n.encode() for n in names]
        root.attrs["backend"] = b"tensorflow"
        root.attrs["keras_version"] = b"2.1.5"
        for name in extra_names:
            root.create_group(name).attrs["weight_names"] = []
        for name, layer in created:
            group = root.create_group(name)
            kind = name.rsplit("_", 1)[0] if name[-1].isdigit() else name
            arrays = layer.get_weights()
            weight_names = [f"{name}/{w}:0" for w in _WEIGHT_NAMES.get(kind, ())[:len(arrays)]]
            group.attrs["weight_names"] = [w.encode() for w in weight_names]
            for weight_name, array in zip(weight_names, arrays):
                group.create_dataset(weight_name, data=array)


def outputs(model, images) -> List[np.ndarray]:
    result = model(images, training=False)
    return [np.asarray(o) for o in (result if isinstance(result, (list, tuple)) else [result])]


def rel_err(a, ref) -> float:
    a, ref = np.asarray(a, np.float64), np.asarray(ref, np.float64)
    return float(np.linalg.norm(a - ref) / np.linalg.norm(ref))


def layer_counts(created) -> Dict[str, int]:
    counts: Dict[str, int] = defaultdict(int)
    for name, _ in created:
        counts[name.rsplit("_", 1)[0] if name[-1].isdigit() else name] += 1
    return dict(counts)
