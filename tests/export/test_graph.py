"""yolo3.export.graph: input ranges, the built-in-ops NMS against a float64 NumPy per-class NMS,
and the exported functions' outputs with a stand-in detector (fixed batch = free batch)."""
from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
import tensorflow as tf

from yolo3.config.masks import default_masks
from yolo3.export.graph import (
    DETECTION_KEYS,
    class_aware_nms,
    image_function,
    model_function,
    raw_names,
    to_unit_range,
)
from yolo3.heads import AnchorHead
from yolo3.ops.anchors import TINY_YOLO_ANCHORS


def test_inputs_map_to_the_unit_range():
    np.testing.assert_allclose(to_unit_range(tf.constant([0, 128, 255], tf.uint8)).numpy(),
                               [0, 128 / 255, 1])
    np.testing.assert_allclose(to_unit_range(tf.constant([-128, 0, 127], tf.int8)).numpy(),
                               [0, 128 / 255, 1])
    assert to_unit_range(tf.constant([0.25])).numpy().tolist() == [0.25]


def _iou(a, b):
    iw = max(0.0, min(a[2], b[2]) - max(a[0], b[0]))
    ih = max(0.0, min(a[3], b[3]) - max(a[1], b[1]))
    inter = iw * ih
    union = (a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter
    return inter / union if union > 0 else 0.0


def numpy_per_class_nms(boxes, scores, max_boxes, iou, score):
    """Greedy NMS per class, then the overall top ``max_boxes`` by score: (score, class, box) list."""
    kept = []
    for k in range(scores.shape[1]):
        order = [i for i in np.argsort(-scores[:, k], kind="stable") if scores[i, k] > score]
        chosen = []
        for i in order:
            if all(_iou(boxes[i], boxes[j]) <= iou for j in chosen):
                chosen.append(i)
        kept += [(float(scores[i, k]), k, tuple(boxes[i])) for i in chosen]
    return sorted(kept, key=lambda t: -t[0])[:max_boxes]


@pytest.mark.parametrize("seed", range(4))
def test_class_aware_nms_equals_per_class_nms(seed):
    rng = np.random.default_rng(seed)
    xy = rng.uniform(0, 80, (40, 2))
    boxes = np.concatenate([xy, xy + rng.uniform(5, 30, (40, 2))], axis=1).astype(np.float32)
    scores = rng.uniform(0, 1, (40, 3)).astype(np.float32) ** 2
    got_boxes, got_scores, got_classes, count = (t.numpy() for t in class_aware_nms(
        tf.constant(boxes), tf.constant(scores), 15, 0.45, 0.2))
    want = numpy_per_class_nms(boxes.astype(np.float64), scores.astype(np.float64), 15, 0.45, 0.2)
    assert int(count) == len(want)
    np.testing.assert_allclose(got_scores[:count], [w[0] for w in want], rtol=1e-6)
    assert got_classes[:count].tolist() == [w[1] for w in want]
    np.testing.assert_allclose(got_boxes[:count], [w[2] for w in want], rtol=1e-6)
    assert not got_boxes[count:].any() and not got_scores[count:].any()


def test_no_candidate_gives_an_empty_padded_result():
    boxes, scores, classes, count = class_aware_nms(tf.zeros([5, 4]), tf.zeros([5, 2]), 4, 0.5, 0.3)
    assert int(count) == 0 and boxes.shape == (4, 4) and not boxes.numpy().any()


def _detector(rng, batch=2):
    maps = [rng.normal(0, 1, (batch, 2, 3, 21)), rng.normal(0, 1, (batch, 4, 6, 21))]
    for m in maps:
        m[..., 4::7] = rng.choice([-8.0, 3.0], size=m[..., 4::7].shape, p=[0.8, 0.2])
    maps = [tf.constant(m, tf.float32) for m in maps]
    return SimpleNamespace(input_hw=(64, 96), anchors=TINY_YOLO_ANCHORS, num_classes=2,
                           anchor_mask=default_masks(6), max_boxes=12, iou=0.45, score=0.3,
                           head=AnchorHead.of(TINY_YOLO_ANCHORS, default_masks(6)),
                           info=SimpleNamespace(strides=[32, 16]),
                           raw_outputs=lambda x: [m[:x.shape[0]] for m in maps])


def test_fixed_batch_decoding_equals_free_batch_decoding():
    detector = _detector(np.random.default_rng(5))
    images = tf.zeros([2, 64, 96, 3], tf.uint8)
    fixed = model_function(detector, tf.uint8, batch=2)(images)
    free = model_function(detector, tf.uint8)(images)
    assert set(fixed) == set(free) == {"raw_s32", "raw_s16", *DETECTION_KEYS}
    np.testing.assert_array_equal(fixed["count"].numpy(), free["count"].numpy())
    assert int(fixed["count"].numpy().sum()) > 0
    for i, n in enumerate(fixed["count"].numpy()):
        for key in ("boxes", "scores"):
            a = fixed[key].numpy()[i, :n]
            b = free[key].numpy()[i, :n]
            order_a = np.lexsort((fixed["classes"].numpy()[i, :n], -fixed["scores"].numpy()[i, :n]))
            order_b = np.lexsort((free["classes"].numpy()[i, :n], -free["scores"].numpy()[i, :n]))
            np.testing.assert_allclose(a[order_a], b[order_b], rtol=1e-5, atol=1e-3)
    raw = model_function(detector, tf.float32, raw=True)(tf.zeros([2, 64, 96, 3]))
    assert list(raw) == raw_names(detector) == ["raw_s32", "raw_s16"]


def test_image_function_returns_boxes_in_the_images_pixels():
    detector = _detector(np.random.default_rng(6), batch=1)
    out = image_function(detector)(tf.zeros([128, 192, 3], tf.uint8))  # twice the input size
    n = int(out["count"].numpy()[0])
    assert n > 0
    boxes = out["boxes"].numpy()[0, :n]
    free = model_function(detector, tf.uint8)(tf.zeros([1, 64, 96, 3], tf.uint8))
    np.testing.assert_allclose(np.sort(boxes.ravel()),
                               np.sort(np.clip(free["boxes"].numpy()[0, :n] * 2, 0, 192).ravel()),
                               rtol=1e-4, atol=1e-2)
