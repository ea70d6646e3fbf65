"""yolo3.checkpoint.weight_names: the pure mapping of a weights file's layer names onto a model's.

No model and no file: sources are ``{layer: [arrays]}`` dictionaries built here, and the target is
described by layer names, as :func:`yolo3.checkpoint.weights.load_weights_by_name` describes a body.
"""
from __future__ import annotations

import numpy as np
import pytest

from yolo3.checkpoint.weight_names import (
    KERAS_YOLO3_BN_EPSILON,
    WeightsError,
    rename_for_model,
    shift_variance,
)
from yolo3.config.specs import get_spec
from yolo3.darknet.layout import body_to_cfg_index, layout_blocks

BODY_EPSILON = 1e-6


def _tiny_target():
    """Layer names of a tiny body and its weighted layers' batch-norm epsilons."""
    epsilons = {}
    for block in get_spec("tiny").blocks():
        if block.startswith("output_s"):
            epsilons[block] = None
        else:
            epsilons[f"{block}_conv"] = None
            epsilons[f"{block}_bn"] = BODY_EPSILON
    return sorted(epsilons) + ["input", "backbone_pool0"], epsilons


def _bn(seed):
    rng = np.random.default_rng(seed)
    return [rng.random(4, np.float32) for _ in range(4)]


def test_a_yolo3_source_keeps_its_names():
    names, epsilons = _tiny_target()
    source = {"head_conv0_conv": [np.ones((1, 1, 2, 2))]}
    renaming = rename_for_model("w.h5", source, names, "tiny_body", epsilons)
    assert renaming.arrays is source and renaming.darknet_layout is None
    assert renaming.keras_yolo3 is None and renaming.unmapped == []


def test_a_converted_darknet_source_is_renamed_by_its_cfg_layout():
    names, epsilons = _tiny_target()
    source = {}
    for block, index in body_to_cfg_index("tiny").items():
        source[f"conv_{index}"] = [np.full((1,), index, np.float32)]
        if not block.startswith("output_s"):
            source[f"bn_{index}"] = _bn(index)
    source["conv_99"] = [np.zeros(1)]  # beyond the layout: reported, not loaded
    renaming = rename_for_model("yolov3-tiny.keras", source, names, "tiny_body", epsilons)
    assert renaming.darknet_layout == "tiny" and renaming.unmapped == ["conv_99"]
    for block, index in body_to_cfg_index("tiny").items():
        conv = block if block.startswith("output_s") else f"{block}_conv"
        assert renaming.arrays[conv][0][0] == index
    assert set(renaming.arrays) <= set(epsilons)


def test_a_keras_yolo3_source_is_renamed_by_creation_order_and_its_variances_shifted():
    names, epsilons = _tiny_target()
    blocks = layout_blocks("tiny")
    source, bn_index = {}, 0
    for i, block in enumerate(blocks):
        source["conv2d" if i == 0 else f"conv2d_{i}"] = [np.full((1,), i, np.float32)]
        if not block.startswith("output_s"):
            source["batch_normalization" if bn_index == 0 else
                   f"batch_normalization_{bn_index}"] = _bn(i)
            bn_index += 1
    renaming = rename_for_model("yolo.h5", source, names, "tiny_body", epsilons)
    assert "creation order" in renaming.keras_yolo3
    for i, block in enumerate(blocks):
        conv = block if block.startswith("output_s") else f"{block}_conv"
        assert renaming.arrays[conv][0][0] == i
    first_bn = renaming.arrays[f"{blocks[0]}_bn"]
    gamma, beta, mean, variance = _bn(0)
    np.testing.assert_array_equal(first_bn[0], gamma)
    # float64 reference: the body's variance + its epsilon is keras-yolo3's variance + 1e-3
    np.testing.assert_allclose(first_bn[3].astype(np.float64) + BODY_EPSILON,
                               variance.astype(np.float64) + KERAS_YOLO3_BN_EPSILON, rtol=1e-6)


def test_sources_that_fit_no_layout_are_refused_naming_the_file():
    names, epsilons = _tiny_target()
    with pytest.raises(WeightsError, match=r"^w.h5: .*keras-yolo3 order"):
        rename_for_model("w.h5", {"conv2d": [np.zeros(1)], "conv2d_1": [np.zeros(1)]}, names,
                         "tiny_body", epsilons)
    with pytest.raises(WeightsError, match=r"^c.keras: converted Darknet model"):
        rename_for_model("c.keras", {"conv_0": [np.zeros(1)], "conv_5": [np.zeros(1)]}, names,
                         "tiny_body", epsilons)
    with pytest.raises(WeightsError, match="maps only onto a yolo3 body"):
        rename_for_model("c.keras", {"conv_0": [np.zeros(1)]}, ["dense"], "classifier",
                         {"dense": None})


def test_shift_variance_is_exact_in_float32():
    variance = np.random.default_rng(0).random(1000, np.float32)
    shifted = shift_variance(variance, 1e-3, 1e-6)
    np.testing.assert_array_equal(shifted + np.float32(1e-6), variance + np.float32(1e-3))
