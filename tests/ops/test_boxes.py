"""Box formats and IoU in NumPy (yolo3.ops.boxes) against float64 loops written here."""
from __future__ import annotations

import numpy as np
import pytest

from yolo3.ops.boxes import cxcywh_to_xyxy, iou_xyxy, wh_iou, xyxy_to_cxcywh


def _iou_loop(a, b):
    out = np.zeros((len(a), len(b)))
    for i, (ax1, ay1, ax2, ay2) in enumerate(a):
        for j, (bx1, by1, bx2, by2) in enumerate(b):
            iw = max(0.0, min(ax2, bx2) - max(ax1, bx1))
            ih = max(0.0, min(ay2, by2) - max(ay1, by1))
            union = (max(0.0, ax2 - ax1) * max(0.0, ay2 - ay1)
                     + max(0.0, bx2 - bx1) * max(0.0, by2 - by1) - iw * ih)
            out[i, j] = iw * ih / union if union > 0 else 0.0
    return out


def _random_xyxy(rng, n):
    xy = rng.uniform(0, 100, (n, 2))
    return np.concatenate([xy, xy + rng.uniform(0.5, 60, (n, 2))], axis=1)


def test_formats_round_trip(rng):
    boxes = _random_xyxy(rng, 50)
    centre = xyxy_to_cxcywh(boxes)
    np.testing.assert_allclose(centre[:, :2], (boxes[:, :2] + boxes[:, 2:]) / 2)
    np.testing.assert_allclose(centre[:, 2:], boxes[:, 2:] - boxes[:, :2])
    np.testing.assert_allclose(cxcywh_to_xyxy(centre), boxes, atol=1e-12)
    batch = boxes.reshape(5, 10, 4)  # any leading shape
    np.testing.assert_allclose(cxcywh_to_xyxy(xyxy_to_cxcywh(batch)), batch, atol=1e-12)


def test_iou_matches_the_loop(rng):
    a, b = _random_xyxy(rng, 30), _random_xyxy(rng, 20)
    b[:5] = a[:5]  # identical pairs: IoU 1
    got = iou_xyxy(a, b)
    np.testing.assert_allclose(got, _iou_loop(a, b), rtol=1e-12, atol=0)
    np.testing.assert_allclose(np.diag(got[:5, :5]), 1.0)


def test_iou_of_empty_and_degenerate_boxes_is_zero():
    point = [[5, 5, 5, 5]]
    assert iou_xyxy(point, point).tolist() == [[0.0]]  # empty union: 0, not NaN
    assert iou_xyxy([[0, 0, 1, 1]], [[2, 2, 3, 3]]).tolist() == [[0.0]]  # apart
    assert iou_xyxy([[0, 0, 2, 2]], [[1, 0, 3, 2]]).tolist() == [[1 / 3]]
    assert iou_xyxy(np.zeros((0, 4)), [[0, 0, 1, 1]]).shape == (0, 1)


def test_shape_iou_is_the_iou_of_centred_boxes(rng):
    wh1, wh2 = rng.uniform(1, 50, (12, 2)), rng.uniform(1, 50, (9, 2))
    centred = lambda wh: np.concatenate([-wh / 2, wh / 2], axis=1)  # noqa: E731
    np.testing.assert_allclose(wh_iou(wh1, wh2), _iou_loop(centred(wh1), centred(wh2)),
                               rtol=1e-12)
    assert wh_iou([[0, 0]], [[0, 0]]).tolist() == [[0.0]]


def test_ioa_is_the_share_of_each_first_box_inside_each_second():
    from yolo3.ops.boxes import ioa_xyxy
    a = np.array([[0, 0, 10, 10], [5, 5, 15, 25], [3, 3, 3, 9]], float)
    b = np.array([[0, 0, 100, 100], [5, 0, 10, 10]], float)
    expected = np.array([[1.0, 0.5], [1.0, 25 / 200], [0.0, 0.0]])  # a box without area: 0
    np.testing.assert_allclose(ioa_xyxy(a, b), expected)


def test_iou_with_inclusive_pixel_indices_counts_one_more_pixel():
    a = np.array([[1, 1, 10, 10]], float)   # VOC: pixels 1..10, 10 wide
    b = np.array([[6, 1, 15, 10]], float)   # pixels 6..15: 5 of 10 columns shared
    assert iou_xyxy(a, b, plus_one=True)[0, 0] == pytest.approx(50 / 150)
    assert iou_xyxy(a, b)[0, 0] == pytest.approx(36 / 126)  # continuous: 4 x 9 of 81 + 81 - 36
