"""The box operations on tensors (yolo3.ops.box_ops, keras.ops; the pipeline's wh_iou_tf in
yolo3.ops.targets) against their NumPy twins in yolo3.ops.boxes, which test_boxes checks against
float64 loops; float64 inputs, so the two must agree to rounding."""
from __future__ import annotations

import numpy as np
import tensorflow as tf

from yolo3.ops.box_ops import box_iou, swap_last_pair
from yolo3.ops.boxes import cxcywh_to_xyxy, iou_xyxy, wh_iou
from yolo3.ops.targets import wh_iou_tf


def _cxcywh(rng, shape):
    return np.concatenate([rng.uniform(0, 1, (*shape, 2)), rng.uniform(0.01, 0.5, (*shape, 2))], -1)


def test_box_iou_broadcasts_any_leading_shape(rng):
    b1, b2 = _cxcywh(rng, (2, 3, 4)), _cxcywh(rng, (7,))
    b2[0] = b1[1, 2, 3]
    got = box_iou(tf.constant(b1), tf.constant(b2)).numpy()
    assert got.shape == (2, 3, 4, 7)
    want = iou_xyxy(cxcywh_to_xyxy(b1).reshape(-1, 4), cxcywh_to_xyxy(b2)).reshape(2, 3, 4, 7)
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-15)
    assert abs(got[1, 2, 3, 0] - 1.0) < 1e-12


def test_box_iou_of_zero_padding_is_zero_not_nan():
    zeros = tf.zeros((3, 4), tf.float32)
    got = box_iou(zeros, zeros).numpy()
    assert np.all(got == 0.0)


def test_wh_iou_tf_equals_numpy_and_names_nan_shapes_no_match(rng):
    wh1, wh2 = rng.uniform(1, 60, (10, 2)), rng.uniform(1, 60, (6, 2))
    np.testing.assert_allclose(wh_iou_tf(tf.constant(wh1), tf.constant(wh2)).numpy(),
                               wh_iou(wh1, wh2), rtol=1e-12)
    nan = wh_iou_tf(tf.constant([[np.nan, 3.0], [0.0, 0.0]]), tf.constant([[2.0, 3.0]])).numpy()
    assert nan.tolist() == [[0.0], [0.0]]


def test_swap_last_pair():
    t = tf.constant([[1, 2], [3, 4]])
    assert swap_last_pair(t).numpy().tolist() == [[2, 1], [4, 3]]
    assert swap_last_pair([7, 9]).numpy().tolist() == [9, 7]
