"""Random Darknet weights whose activations stay bounded and depend on the input.

Used by tests and benchmarks to compare forward passes (ours vs OpenCV's Darknet importer) without
downloading real weights. Kernels are zero-mean normals; each layer's expected second moment
``E[x^2]`` is propagated through the graph (input: uniform [0, 1] pixels), and each batch norm's
variance is set to the expected second moment of its convolution's output, so every normalised
activation is O(1) whatever the depth (residual sums included). Convolutions without batch norm
get kernels scaled to give O(1) outputs.
"""
from __future__ import annotations

from typing import Dict

import numpy as np

from yolo3.core.errors import PathLike
from yolo3.darknet.cfg import (
    ConvSpec,
    DarknetCfg,
    MaxpoolSpec,
    RouteSpec,
    ShortcutSpec,
    UpsampleSpec,
    parse_cfg,
)
from yolo3.darknet.weights import FLOAT, Header, in_channels

INPUT_SECOND_MOMENT = 1.0 / 3.0  # E[x^2] of uniform [0, 1] pixels
_ACT_GAIN = {"leaky": 0.5 * (1 + 0.1 ** 2), "relu": 0.5, "mish": 0.5, "logistic": 0.3, "linear": 1.0}


def write_random_weights(cfg_path: PathLike, weights_path: PathLike, seed: int = 0, major: int = 0,
                         minor: int = 2, revision: int = 0, seen: int = 0) -> Header:
    """Write random weights for ``cfg_path`` to ``weights_path``; returns the header written."""
    cfg = parse_cfg(cfg_path)
    return write_random_weights_for(cfg, weights_path, seed, Header(major, minor, revision, seen))


def write_random_weights_for(cfg: DarknetCfg, weights_path: PathLike, seed: int = 0,
                             header: Header = Header()) -> Header:
    """Like :func:`write_random_weights` for a parsed ``cfg``."""
    rng = np.random.default_rng(seed)
    moment: Dict[int, float] = {}
    with open(weights_path, "wb") as f:
        f.write(header.to_bytes())
        for layer in cfg.layers:
            prev = moment[layer.index - 1] if layer.index else INPUT_SECOND_MOMENT
            s = layer.spec
            if isinstance(s, ConvSpec):
                fan_in = in_channels(cfg, layer) * s.size * s.size
                n = s.filters
                kernel_shape = (n, in_channels(cfg, layer), s.size, s.size)
                if s.batch_normalize:
                    w_std = np.sqrt(2.0 / fan_in)
                    pre = fan_in * prev * w_std ** 2  # expected E[z^2] of the conv output
                    beta = rng.normal(0.0, 0.2, n)
                    gamma = rng.uniform(0.5, 1.5, n)
                    var = pre * rng.uniform(0.5, 1.5, n)
                    mean = rng.normal(0.0, 0.2, n) * np.sqrt(pre)
                    out = float(np.mean(gamma ** 2 + beta ** 2))
                    blocks = [beta, gamma, mean, var]
                else:
                    w_std = np.sqrt(1.0 / (fan_in * prev))
                    bias = rng.normal(0.0, 0.2, n)
                    out = 1.0
                    blocks = [bias]
                for b in blocks:
                    np.asarray(b, dtype=FLOAT).tofile(f)
                kernel = rng.standard_normal(kernel_shape, dtype=np.float32)
                kernel *= np.float32(w_std)
                kernel.astype(FLOAT, copy=False).tofile(f)
                del kernel
                moment[layer.index] = out * _ACT_GAIN[s.activation]
            elif isinstance(s, ShortcutSpec):
                moment[layer.index] = (prev + moment[s.source]) * _ACT_GAIN[s.activation]
            elif isinstance(s, RouteSpec):
                srcs = [cfg.layers[i] for i in s.sources]
                total = sum(l.channels for l in srcs)
                moment[layer.index] = sum(moment[l.index] * l.channels for l in srcs) / total
            elif isinstance(s, (UpsampleSpec, MaxpoolSpec)):
                moment[layer.index] = prev
            else:  # [yolo]
                moment[layer.index] = prev
    return header
