"""yolo3.modeling.bodies: every registered variant's Keras body - named parts (backbone taps, heads,
outputs, Darknet blocks), output shapes for any input, the batch-norm kind, keras-yolo3's body
functions."""
from __future__ import annotations

import keras
import numpy as np
import pytest

from yolo3.config.specs import all_specs, get_spec
from yolo3.modeling.batch_norm import BatchNormalization as FusedTrainingBatchNorm
from yolo3.modeling.bodies import (
    block_names,
    build_body,
    build_spec_body,
    output_layer_names,
    tiny_yolo_body,
    yolo_body,
)

DETECTORS = [s.name for s in all_specs() if s.num_scales]


@pytest.mark.parametrize("variant", DETECTORS)
def test_outputs_per_stride_for_a_non_square_input(variant):
    spec = get_spec(variant)
    body = build_spec_body(spec, num_classes=3, input_shape=(64, 96))
    strides = [32, 16, 8][:spec.num_scales]
    channels = (4 * spec.head.reg_max + 3 if spec.anchor_free
                else spec.anchors_per_scale(len(spec.anchors)) * 8)
    assert [tuple(o.shape[1:]) for o in body.outputs] == \
        [(64 // s, 96 // s, channels) for s in strides]
    assert output_layer_names(body) == [f"output_s{s}" for s in strides]
    names = [layer.name for layer in body.layers]
    assert all(n == "image" or n.startswith(("backbone_", "head_s", "output_s")) for n in names)
    assert f"backbone_c{5}" in names and "backbone_c4" in names
    out = body(np.zeros((1, 64, 96, 3), np.float32))
    assert all(np.isfinite(np.asarray(o)).all() for o in out)


def test_any_input_size_and_a_bad_one():
    body = build_body("tiny", 2)  # (None, None): any multiple of 32
    for hw in ((64, 64), (96, 160)):
        outs = body(np.zeros((1, *hw, 3), np.float32))
        assert [tuple(o.shape[1:3]) for o in outs] == [(hw[0] // 32, hw[1] // 32),
                                                       (hw[0] // 16, hw[1] // 16)]
    with pytest.raises(ValueError, match="32"):
        build_body("tiny", 2, input_shape=(100, 96))


def test_darknet_blocks_are_named_and_padded_top_left():
    assert block_names("backbone_s2", stride=2).pad == "backbone_s2_pad"
    assert block_names("head_s32_a").pad is None
    body = build_body("yolov3", 1, input_shape=(64, 64))
    pads = [layer for layer in body.layers if isinstance(layer, keras.layers.ZeroPadding2D)]
    assert pads and all(layer.name.endswith("_pad") for layer in pads)
    assert all(tuple(map(tuple, layer.padding)) == ((1, 0), (1, 0)) for layer in pads)
    for layer in body.layers:
        if isinstance(layer, keras.layers.BatchNormalization):
            conv = body.get_layer(layer.name[:-len("_bn")] + "_conv")
            assert conv.use_bias is False and layer.epsilon == 1e-6
    assert all(body.get_layer(n).use_bias for n in output_layer_names(body))


@pytest.mark.parametrize("fused", [False, True])
def test_the_batch_norm_kind(fused):
    body = build_spec_body(get_spec("tiny"), 2, input_shape=(64, 64), fused_batch_norm=fused)
    kinds = {type(layer) for layer in body.layers
             if isinstance(layer, keras.layers.BatchNormalization)}
    assert kinds == {FusedTrainingBatchNorm if fused else keras.layers.BatchNormalization}


def test_keras_yolo3_body_functions():
    inputs = keras.Input((None, None, 3))
    full = yolo_body(inputs, 3, 80)
    tiny = tiny_yolo_body(keras.Input((None, None, 3)), 3, 80)
    assert full.count_params() == 62_001_757  # keras-yolo3's published counts
    assert tiny.count_params() == 8_858_734
    assert [o.shape[-1] for o in full.outputs] == [255] * 3
    assert [o.shape[-1] for o in tiny.outputs] == [255] * 2
