"""yolo3.ops.targets against a loop-based float64 reference encoder written here from the definition."""
from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

from yolo3.ops.anchors import TINY_YOLO_ANCHORS, YOLO_ANCHORS
from yolo3.ops.targets import encode_targets, preprocess_true_boxes


def reference_encode(true_boxes, input_hw, anchors, num_classes, masks, strides, assign_iou=1.0):
    """One box at a time, in order (so a later box overwrites an earlier one). With
    ``assign_iou < 1``, extra anchors (shape IoU above it) are written in a first pass and best
    anchors in a second, so that a best-anchor assignment overwrites any extra one."""
    h, w = input_hw
    anchors = np.asarray(anchors, dtype=np.float64)
    out = [np.zeros((len(true_boxes), h // s, w // s, len(m), 5 + num_classes)) for m, s in
           zip(masks, strides)]
    for best_pass in (False, True):
        for b, image_boxes in enumerate(np.asarray(true_boxes, dtype=np.float64)):
            for x1, y1, x2, y2, c in image_boxes:
                bw, bh = x2 - x1, y2 - y1
                if not (bw > 0 and bh > 0):
                    continue
                ious = []
                for aw, ah in anchors:
                    inter = min(bw, aw) * min(bh, ah)
                    ious.append(inter / (bw * bh + aw * ah - inter))
                best = int(np.argmax(ious))
                chosen = [best] if best_pass else [a for a, v in enumerate(ious)
                                                   if v > assign_iou and a != best]
                cx, cy = (x1 + x2) / 2, (y1 + y2) / 2
                for anchor in chosen:
                    for layer, (mask, stride) in enumerate(zip(masks, strides)):
                        if anchor not in mask:
                            continue
                        gh, gw = h // stride, w // stride
                        i = min(max(int(np.floor(cx / w * gw)), 0), gw - 1)
                        j = min(max(int(np.floor(cy / h * gh)), 0), gh - 1)
                        k = mask.index(anchor)
                        vec = np.zeros(5 + num_classes)
                        vec[:5] = [cx / w, cy / h, bw / w, bh / h, 1.0]
                        vec[5 + int(c)] = 1.0
                        out[layer][b, j, i, k] = vec
    return out


def random_boxes(rng, batch, max_boxes, input_hw, num_classes, pad=True):
    h, w = input_hw
    centre = rng.uniform(0, [w, h], (batch, max_boxes, 2))
    size = rng.uniform(2, [w, h], (batch, max_boxes, 2)) * rng.uniform(0.05, 1, (batch, max_boxes, 1))
    cls = rng.integers(0, num_classes, (batch, max_boxes, 1))
    boxes = np.concatenate([centre - size / 2, centre + size / 2, cls], -1).astype(np.float32)
    if pad:  # trailing padding rows of zeros, a different count per image
        for b in range(batch):
            boxes[b, rng.integers(1, max_boxes + 1):] = 0
    return boxes


CASES = [
    ("yolov3", YOLO_ANCHORS, [[6, 7, 8], [3, 4, 5], [0, 1, 2]], [32, 16, 8], (256, 320)),
    ("tiny", TINY_YOLO_ANCHORS, [[3, 4, 5], [0, 1, 2]], [32, 16], (128, 96)),
    ("tiny-old-mask", TINY_YOLO_ANCHORS, [[3, 4, 5], [1, 2, 3]], [32, 16], (96, 160)),
]


@pytest.mark.parametrize("name,anchors,masks,strides,input_hw", CASES, ids=[c[0] for c in CASES])
def test_preprocess_matches_reference(name, anchors, masks, strides, input_hw, rng):
    boxes = random_boxes(rng, 4, 24, input_hw, num_classes=5)
    explicit = None if name != "tiny-old-mask" else masks
    got = preprocess_true_boxes(boxes, input_hw, anchors, 5, anchor_mask=explicit)
    want = reference_encode(boxes, input_hw, anchors, 5, masks, strides)
    assert len(got) == len(want)
    total = 0
    for g, r in zip(got, want):
        assert g.dtype == np.float32 and g.shape == r.shape
        np.testing.assert_allclose(g, r, rtol=1e-6, atol=1e-7)
        total += int(r[..., 4].sum())
    assert total > 10  # the case exercises many boxes


def test_boxes_outside_every_mask_are_dropped():
    # Mask uses only anchors 3..5 on one scale: a box whose best anchor is 0 appears nowhere.
    boxes = np.array([[[0, 0, 10, 14, 0], [0, 0, 300, 300, 0]]], np.float32)
    y = preprocess_true_boxes(boxes, (416, 416), TINY_YOLO_ANCHORS, 1, anchor_mask=[[3, 4, 5]])
    assert len(y) == 1 and y[0][..., 4].sum() == 1
    assert y[0][0, 4, 4, 2, 4] == 1  # the big box: centre (150, 150) / 32, best anchor 5 -> slot 2


def test_degenerate_boxes_ignored_without_nan():
    boxes = np.array([[[10, 10, 10, 40, 0],      # zero width
                       [10, 40, 30, 20, 1],      # negative height
                       [np.nan, 0, 5, 5, 0],     # NaN corner
                       [0, 0, 0, 0, 0],          # padding
                       [20, 20, 60, 50, 1]]], np.float32)
    y = preprocess_true_boxes(boxes, (64, 64), TINY_YOLO_ANCHORS, 2)
    assert all(np.isfinite(a).all() for a in y)
    assert sum(a[..., 4].sum() for a in y) == 1
    z = encode_targets(boxes[0], (64, 64), TINY_YOLO_ANCHORS, 2)
    for a, b in zip(y, z):
        np.testing.assert_array_equal(a[0], b.numpy())


def test_later_box_wins_same_cell_and_anchor():
    # Two same-shape boxes centred in the same stride-32 cell, different classes.
    first = [40, 40, 80, 80, 0]
    second = [42, 41, 82, 79, 2]
    boxes = np.array([[first, second]], np.float32)
    y = preprocess_true_boxes(boxes, (128, 128), TINY_YOLO_ANCHORS, 3)
    want = reference_encode(boxes, (128, 128), TINY_YOLO_ANCHORS, 3, [[3, 4, 5], [0, 1, 2]], [32, 16])
    hit = [(l, idx) for l, a in enumerate(y) for idx in zip(*np.nonzero(a[..., 4]))]
    assert len(hit) == 1
    layer, idx = hit[0]
    np.testing.assert_allclose(y[layer][idx], want[layer][idx], rtol=1e-6)
    assert y[layer][idx][5 + 2] == 1 and y[layer][idx][5] == 0
    z = encode_targets(boxes, (128, 128), TINY_YOLO_ANCHORS, 3)
    for a, b in zip(y, z):
        np.testing.assert_array_equal(a, b.numpy())


def test_many_duplicates_later_wins_in_tf():
    # 30 boxes in the same cell and anchor: scatter order must not decide; the last one wins.
    rng = np.random.default_rng(7)
    base = np.array([30.0, 30.0, 70.0, 70.0])
    boxes = np.zeros((1, 30, 5), np.float32)
    boxes[0, :, :4] = base + rng.uniform(-1, 1, (30, 1))
    boxes[0, :, 4] = rng.integers(0, 4, 30)
    y = preprocess_true_boxes(boxes, (96, 96), TINY_YOLO_ANCHORS, 4)
    want = reference_encode(boxes, (96, 96), TINY_YOLO_ANCHORS, 4, [[3, 4, 5], [0, 1, 2]], [32, 16])
    z = encode_targets(boxes, (96, 96), TINY_YOLO_ANCHORS, 4)
    for a, r, b in zip(y, want, z):
        np.testing.assert_allclose(a, r, rtol=1e-6, atol=1e-7)
        np.testing.assert_array_equal(a, b.numpy())


def test_bad_class_and_input_shape_refused():
    boxes = np.array([[[0, 0, 10, 10, 3]]], np.float32)
    with pytest.raises(ValueError, match="class"):
        preprocess_true_boxes(boxes, (64, 64), TINY_YOLO_ANCHORS, 3)
    with pytest.raises(ValueError, match="multiples of 32"):
        preprocess_true_boxes(boxes, (64, 70), TINY_YOLO_ANCHORS, 4)


@pytest.mark.parametrize("anchors,input_hw", [(YOLO_ANCHORS, (160, 96)), (TINY_YOLO_ANCHORS, (64, 128))])
def test_encode_targets_eager_equals_preprocess(anchors, input_hw, rng):
    boxes = random_boxes(rng, 3, 10, input_hw, num_classes=4)
    want = preprocess_true_boxes(boxes, input_hw, anchors, 4)
    batched = encode_targets(boxes, input_hw, anchors, 4)
    for a, b in zip(want, batched):
        assert b.dtype == tf.float32
        np.testing.assert_array_equal(a, b.numpy())
    for i in range(3):
        single = encode_targets(boxes[i], input_hw, anchors, 4)
        for a, b in zip(want, single):
            np.testing.assert_array_equal(a[i], b.numpy())


def test_encode_targets_in_tf_function_with_dynamic_input_shape(rng):
    fn = tf.function(lambda b, hw: encode_targets(b, hw, YOLO_ANCHORS, 3),
                     input_signature=[tf.TensorSpec([None, None, 5], tf.float32),
                                      tf.TensorSpec([2], tf.int32)])
    for input_hw in [(96, 64), (128, 160)]:  # one trace, two grid sizes
        boxes = random_boxes(rng, 2, 8, input_hw, num_classes=3)
        want = preprocess_true_boxes(boxes, input_hw, YOLO_ANCHORS, 3)
        got = fn(boxes, tf.constant(input_hw, tf.int32))
        for a, b in zip(want, got):
            np.testing.assert_array_equal(a, b.numpy())


def test_encode_targets_in_dataset_map(rng):
    input_hw = (64, 96)
    boxes = random_boxes(rng, 5, 6, input_hw, num_classes=2)
    want = preprocess_true_boxes(boxes, input_hw, TINY_YOLO_ANCHORS, 2)
    ds = tf.data.Dataset.from_tensor_slices(boxes).map(
        lambda b: encode_targets(b, input_hw, TINY_YOLO_ANCHORS, 2)).batch(5)
    got = next(iter(ds))
    assert got[0].shape == (5, 2, 3, 3, 7)  # static grid when the input size is static
    for a, b in zip(want, got):
        np.testing.assert_array_equal(a, b.numpy())
    ds = tf.data.Dataset.from_tensors(boxes).map(
        lambda b: encode_targets(b, tf.constant(input_hw), TINY_YOLO_ANCHORS, 2))
    for a, b in zip(want, next(iter(ds))):
        np.testing.assert_array_equal(a, b.numpy())


def test_anchor_tie_goes_to_first_anchor_in_both_versions():
    # A 5x5 box lies inside anchors 0 (10x20) and 1 (20x10): equal IoU 25/200; the first one wins.
    anchors = np.array([[10, 20], [20, 10], [30, 30], [60, 60], [90, 90], [120, 120]], np.float32)
    boxes = np.array([[[30, 30, 35, 35, 0]]], np.float32)
    y = preprocess_true_boxes(boxes, (64, 64), anchors, 1)
    assert y[1][0, 2, 2, 0, 4] == 1 and y[1][..., 4].sum() == 1
    z = encode_targets(boxes, (64, 64), anchors, 1)
    for a, b in zip(y, z):
        np.testing.assert_array_equal(a, b.numpy())


@pytest.mark.parametrize("assign_iou", [0.213, 0.5])
@pytest.mark.parametrize("name,anchors,masks,strides,input_hw", CASES, ids=[c[0] for c in CASES])
def test_multi_anchor_assignment_matches_reference(name, anchors, masks, strides, input_hw,
                                                   assign_iou, rng):
    boxes = random_boxes(rng, 4, 24, input_hw, num_classes=5)
    explicit = None if name != "tiny-old-mask" else masks
    got = preprocess_true_boxes(boxes, input_hw, anchors, 5, anchor_mask=explicit,
                                assign_iou=assign_iou)
    want = reference_encode(boxes, input_hw, anchors, 5, masks, strides, assign_iou)
    single = reference_encode(boxes, input_hw, anchors, 5, masks, strides)
    for g, r in zip(got, want):
        np.testing.assert_allclose(g, r, rtol=1e-6, atol=1e-7)
    # more positives than one anchor per box (the case exercises the extra assignments)
    assert sum(r[..., 4].sum() for r in want) > sum(r[..., 4].sum() for r in single)
    tf_got = encode_targets(boxes, input_hw, anchors, 5, anchor_mask=explicit,
                            assign_iou=assign_iou)
    for g, t in zip(got, tf_got):
        np.testing.assert_array_equal(g, t.numpy())


def test_best_anchor_beats_an_extra_assignment_of_a_later_box():
    # Box A (30x30, class 0) has best anchor 2 and, IoU 0.54, extra anchor 1; box B (22x22,
    # class 1), later, in the same stride-16 cell (1, 1), has best anchor 1 and extra anchor 2:
    # each slot keeps the box whose best anchor it is, whatever the order.
    anchors = np.array([[10, 10], [22, 22], [30, 30], [60, 60], [90, 90], [120, 120]], np.float32)
    boxes = np.array([[[1, 1, 31, 31, 0], [6, 6, 28, 28, 1]]], np.float32)
    for y in (preprocess_true_boxes(boxes, (64, 64), anchors, 2, assign_iou=0.3),
              [t.numpy() for t in encode_targets(boxes, (64, 64), anchors, 2, assign_iou=0.3)]):
        cell = y[1][0, 1, 1]  # the stride-16 scale holds anchors 0, 1, 2
        assert cell[2, 4] == 1 and cell[2, 5] == 1  # box A on its best anchor
        assert cell[1, 4] == 1 and cell[1, 6] == 1  # box B on its best anchor
        assert y[1][..., 4].sum() == 2 and y[0][..., 4].sum() == 0


@pytest.mark.parametrize("bad", [0.0, -0.1, 1.5])
def test_assign_iou_out_of_range_refused(bad):
    boxes = np.zeros((1, 1, 5), np.float32)
    with pytest.raises(ValueError, match="assign_iou"):
        preprocess_true_boxes(boxes, (64, 64), TINY_YOLO_ANCHORS, 1, assign_iou=bad)
    with pytest.raises(ValueError, match="assign_iou"):
        encode_targets(boxes, (64, 64), TINY_YOLO_ANCHORS, 1, assign_iou=bad)
