"""yolo3.config.anchor_free_head: the anchor-free head's facts (channels, class count, what model files record)."""
from __future__ import annotations

import pytest

from yolo3.config.anchor_free_head import ANCHOR_FREE, AnchorFreeHead


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
