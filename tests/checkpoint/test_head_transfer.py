"""Carrying an output layer's box and objectness channels over to another class count
(yolo3.checkpoint.head_transfer), checked against a per-anchor reshape written independently
here."""
from __future__ import annotations

import numpy as np
import pytest

from yolo3.checkpoint.head_transfer import classes_per_anchor, transfer_head


def _head(rng, anchors, classes, c_in=8, size=1):
    filters = anchors * (5 + classes)
    return [rng.normal(size=(size, size, c_in, filters)), rng.normal(size=filters)]


def _per_anchor(array, anchors):
    """``(..., A * (5 + C))`` as ``(..., A, 5 + C)``: one row of channels per anchor."""
    return np.asarray(array, np.float64).reshape(*np.shape(array)[:-1], anchors, -1)


@pytest.mark.parametrize("anchors,src_classes,dst_classes", [(3, 80, 4), (3, 1, 20), (2, 7, 7),
                                                             (1, 80, 2)])
def test_box_and_objectness_come_from_the_source_and_the_classes_stay(anchors, src_classes,
                                                                       dst_classes):
    rng = np.random.default_rng(anchors * 100 + src_classes)
    source, target = _head(rng, anchors, src_classes), _head(rng, anchors, dst_classes)
    kernel, bias = transfer_head(source, target, anchors)
    assert kernel.shape == target[0].shape and bias.shape == target[1].shape
    for got, src, dst in ((kernel, source[0], target[0]), (bias, source[1], target[1])):
        got, src, dst = (_per_anchor(a, anchors) for a in (got, src, dst))
        np.testing.assert_array_equal(got[..., :5], src[..., :5])  # x, y, w, h, objectness
        np.testing.assert_array_equal(got[..., 5:], dst[..., 5:])  # every class channel
    # the target's own arrays are not written
    assert not np.shares_memory(kernel, target[0]) and not np.shares_memory(bias, target[1])


def test_layers_that_are_not_heads_of_those_anchors_give_none():
    rng = np.random.default_rng(0)
    coco, ours = _head(rng, 3, 80), _head(rng, 3, 4)
    assert transfer_head(coco, _head(rng, 3, 4, c_in=16), 3) is None  # other input channels
    assert transfer_head(coco, _head(rng, 3, 4, size=3), 3) is None  # other kernel size
    assert transfer_head(coco, ours, 4) is None  # 255 filters are not 4 anchors' worth
    assert transfer_head(coco[:1], ours, 3) is None  # no bias
    assert transfer_head([coco[0], coco[1][:10]], ours, 3) is None  # a bias of another width
    assert transfer_head([coco[0][0, 0], coco[1]], ours, 3) is None  # not a convolution kernel


@pytest.mark.parametrize("filters,anchors,expected", [(255, 3, 80), (27, 3, 4), (18, 3, 1),
                                                      (15, 3, None), (255, 4, None), (6, 1, 1),
                                                      (10, 0, None)])
def test_classes_per_anchor(filters, anchors, expected):
    assert classes_per_anchor(filters, anchors) == expected
