"""yolo3.config.anchor_free_head: the anchor-free head's facts (channels, class count, what model files record)."""
from __future__ import annotations

import numpy as np
import pytest

from yolo3.config.anchor_free_head import (
    AF_PRIOR_DISTANCE,
    ANCHOR_FREE,
    AnchorFreeHead,
    anchor_free_bias_priors,
)


def test_channels_are_four_distributions_then_the_classes():
    head = AnchorFreeHead((32, 16), 8)
    assert head.num_scales == 2 and head.box_channels == 32
    assert head.channels(4) == 36 and head.num_classes(36) == 4
    with pytest.raises(ValueError, match="32 output channels leave no class after the 32"):
        head.num_classes(32)


def test_recorded_as_data_and_read_back():
    head = AnchorFreeHead([32, 16, 8], "6")
    assert head.strides == (32, 16, 8) and head.reg_max == 6  # normalised
    data = head.to_dict()
    assert data == {"kind": ANCHOR_FREE, "strides": [32, 16, 8], "reg_max": 6}
    assert AnchorFreeHead.from_dict(data) == head
    with pytest.raises(ValueError, match="not an anchor-free head"):
        AnchorFreeHead.from_dict({"kind": "anchors"})
    with pytest.raises(ValueError, match="without 'reg_max'"):
        AnchorFreeHead.from_dict({"kind": ANCHOR_FREE, "strides": [32]})


@pytest.mark.parametrize("strides, reg_max, message", [
    ((), 8, "positive strides"), ((32, 0), 8, "positive strides"), ((32,), 1, "at least 2")])
def test_bad_heads_are_refused(strides, reg_max, message):
    with pytest.raises(ValueError, match=message):
        AnchorFreeHead(strides, reg_max)


@pytest.mark.parametrize("reg_max", [6, 8, 16])
def test_anchor_free_priors_start_each_side_at_the_prior_distance(reg_max):
    box, classes = anchor_free_bias_priors(reg_max, 4, cells=144, objects_per_image=3.0)
    same = AnchorFreeHead((32, 16), reg_max).bias_priors(4, 144, 3.0)
    np.testing.assert_array_equal(same[0], box)
    np.testing.assert_array_equal(same[1], classes)
    assert box.shape == (4 * reg_max,) and classes.shape == (4,)
    for side in box.reshape(4, reg_max).astype(np.float64):
        p = np.exp(side - side.max())
        p /= p.sum()
        assert np.sum(p * np.arange(reg_max)) == pytest.approx(AF_PRIOR_DISTANCE, abs=1e-4)
        assert np.all(np.diff(p) < 0)  # the nearer bins first
    # the class scores: the data's objects per image spread over the cells and classes
    np.testing.assert_allclose(1 / (1 + np.exp(-classes.astype(np.float64))) * 144 * 4, 3.0,
                               rtol=1e-5)
