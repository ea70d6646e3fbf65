"""Helpers for the Darknet tests: OpenCV's Darknet importer as the independent reference."""
from __future__ import annotations

import re
from pathlib import Path
from typing import List, Sequence

import numpy as np

from yolo3.darknet.cfg import ConvSpec, DarknetCfg


def random_images(rng: np.random.Generator, n: int, h: int, w: int) -> np.ndarray:
    """``(n, h, w, 3)`` float32 RGB in [0, 1] with some spatial structure (smoothed noise + noise)."""
    base = rng.random((n, h // 8 + 1, w // 8 + 1, 3), dtype=np.float32)
    smooth = np.repeat(np.repeat(base, 8, axis=1), 8, axis=2)[:, :h, :w]
    return np.clip(0.7 * smooth + 0.3 * rng.random((n, h, w, 3), dtype=np.float32), 0, 1)


def opencv_output_names(cfg: DarknetCfg, net) -> List[str]:
    """OpenCV layer names giving the body's outputs: ``conv_<i>`` feeding each [yolo], else the last."""
    yolos = cfg.yolo_layers()
    if not yolos:
        return list(net.getUnconnectedOutLayersNames())
    names = []
    for y in yolos:
        src = cfg.layers[y.index - 1]
        assert isinstance(src.spec, ConvSpec) and not src.spec.batch_normalize
        assert src.spec.activation == "linear", "OpenCV's conv_<i> is pre-activation"
        names.append(f"conv_{src.index}")
    return names


def opencv_forward(cfg: DarknetCfg, cfg_path: Path, weights_path: Path,
                   images: np.ndarray) -> List[np.ndarray]:
    """Run ``cv2.dnn.readNetFromDarknet`` on NHWC float images; outputs NHWC, in cfg order."""
    import cv2
    net = cv2.dnn.readNetFromDarknet(str(cfg_path), str(weights_path))
    net.setPreferableBackend(cv2.dnn.DNN_BACKEND_OPENCV)
    net.setPreferableTarget(cv2.dnn.DNN_TARGET_CPU)
    net.setInput(np.ascontiguousarray(images.transpose(0, 3, 1, 2)))
    names = opencv_output_names(cfg, net)
    outs = net.forward(names)
    return [np.asarray(o).transpose(0, 2, 3, 1) for o in outs]


def keras_forward(model, images: np.ndarray) -> List[np.ndarray]:
    outs = model(images, training=False)
    outs = outs if isinstance(outs, (list, tuple)) else [outs]
    return [np.asarray(o) for o in outs]


def rel_err(a: np.ndarray, ref: np.ndarray) -> float:
    """``|a - ref| / |ref|`` (Frobenius norms, in float64)."""
    a64, r64 = np.asarray(a, np.float64), np.asarray(ref, np.float64)
    return float(np.linalg.norm(a64 - r64) / np.linalg.norm(r64))


SPP_BLOCK = """
[maxpool]
stride=1
size=5

[route]
layers=-2

[maxpool]
stride=1
size=9

[route]
layers=-4

[maxpool]
stride=1
size=13

[route]
layers=-1,-3,-5,-6

[convolutional]
batch_normalize=1
filters=512
size=1
stride=1
pad=1
activation=leaky
"""


def spp_cfg_text(yolov3_cfg_text: str) -> str:
    """yolov3-spp's layer structure from yolov3.cfg (114 layers, as in Darknet's yolov3-spp.cfg).

    yolov3-spp follows the first head's third conv (layer 77) with the SPP block (maxpools 5, 9, 13
    at stride 1 and a 4-way route) and one more 1x1 conv. Later absolute routes (61, 36) point before
    the insertion, relative ones stay valid, so the rest of yolov3.cfg is unchanged.
    """
    sections = re.split(r"\n(?=\[)", yolov3_cfg_text)
    # sections[0] is [net]; layer i is sections[i + 1]. Head s32 starts at layer 75; its third conv
    # (1x1, 512) is layer 77: insert SPP after it, as yolov3-spp does.
    insert_after = 77 + 1
    head = sections[:insert_after + 1]
    assert head[-1].startswith("[convolutional]") and "size=1" in head[-1].replace(" ", "")
    return "\n".join(head) + "\n" + SPP_BLOCK + "\n" + "\n".join(sections[insert_after + 1:])


def shapes(arrays: Sequence[np.ndarray]) -> List[tuple]:
    return [a.shape for a in arrays]


def randomise_batch_norms(model, rng: np.random.Generator) -> None:
    """Non-trivial batch-norm statistics (a fresh body has mean 0 / var 1), so that exporting or
    folding all four of them is checked."""
    import keras
    for layer in model.layers:
        if isinstance(layer, keras.layers.BatchNormalization):
            n = layer.gamma.shape[0]
            layer.set_weights([rng.uniform(0.5, 1.5, n), rng.normal(0, 0.2, n),
                               rng.normal(0, 0.2, n), rng.uniform(0.5, 2.0, n)])
