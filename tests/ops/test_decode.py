"""Batched decoding (yolo_head, correct_boxes, decode_detections) against float64 NumPy references."""
from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

from yolo3.ops.anchors import TINY_YOLO_ANCHORS, YOLO_ANCHORS
from yolo3.ops.decode import correct_boxes as yolo_correct_boxes
from yolo3.ops.decode import decode_detections as yolo_eval
from yolo3.ops.decode import yolo_head


def sigmoid(x):
    return 1 / (1 + np.exp(-x))


def reference_head(feats, anchors, num_classes, input_hw):
    """Loop over cells and anchors: returns xy, wh, conf, probs as ``(b, gh, gw, A, .)`` float64."""
    feats = np.asarray(feats, np.float64)
    b, gh, gw, _ = feats.shape
    a = len(anchors)
    t = feats.reshape(b, gh, gw, a, 5 + num_classes)
    xy = np.zeros((b, gh, gw, a, 2))
    wh = np.zeros((b, gh, gw, a, 2))
    for j in range(gh):
        for i in range(gw):
            for k, (aw, ah) in enumerate(anchors):
                xy[:, j, i, k] = (sigmoid(t[:, j, i, k, 0:2]) + [i, j]) / [gw, gh]
                wh[:, j, i, k] = np.exp(t[:, j, i, k, 2:4]) * [aw, ah] / [input_hw[1], input_hw[0]]
    return xy, wh, sigmoid(t[..., 4:5]), sigmoid(t[..., 5:])


def reference_unletterbox(xy, wh, input_hw, image_hw):
    """Input-relative centre/size -> original-image corners, for one image, float64."""
    in_h, in_w = input_hw
    img_h, img_w = image_hw
    s = min(in_w / img_w, in_h / img_h)
    new_w, new_h = min(max(round(img_w * s), 1), in_w), min(max(round(img_h * s), 1), in_h)
    off_x, off_y = (in_w - new_w) // 2, (in_h - new_h) // 2
    sx, sy = new_w / img_w, new_h / img_h
    cx = (xy[..., 0] * in_w - off_x) / sx
    cy = (xy[..., 1] * in_h - off_y) / sy
    w = wh[..., 0] * in_w / sx
    h = wh[..., 1] * in_h / sy
    return np.stack([cx - w / 2, cy - h / 2, cx + w / 2, cy + h / 2], axis=-1)


@pytest.mark.parametrize("input_hw,grid", [((64, 96), (2, 3)), ((128, 64), (8, 4))])
def test_yolo_head_matches_reference(input_hw, grid, rng):
    anchors = YOLO_ANCHORS[[3, 4, 5]]
    feats = rng.normal(0, 1.5, (2, *grid, 3 * 9)).astype(np.float32)
    got = yolo_head(tf.constant(feats), anchors, 4, tf.constant(input_hw))
    want = reference_head(feats, anchors, 4, input_hw)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g.numpy(), w, rtol=1e-5, atol=1e-6)
    grid_t, raw, xy, wh = yolo_head(feats, anchors, 4, input_hw, calc_loss=True)
    assert tuple(grid_t.shape) == (*grid, 1, 2)
    assert grid_t.numpy()[grid[0] - 1, 0, 0].tolist() == [0, grid[0] - 1]  # (x, y) order
    np.testing.assert_array_equal(raw.numpy(), feats.reshape(2, *grid, 3, 9))
    np.testing.assert_allclose(xy.numpy(), want[0], rtol=1e-5, atol=1e-6)


def test_yolo_correct_boxes_per_image_sizes(rng):
    input_hw = (128, 96)
    image_hw = np.array([[480, 640], [300, 200], [128, 96]])
    xy = rng.uniform(0, 1, (3, 5, 2)).astype(np.float32)
    wh = rng.uniform(0.01, 0.8, (3, 5, 2)).astype(np.float32)
    got = yolo_correct_boxes(xy, wh, input_hw, image_hw).numpy()
    for b in range(3):
        want = reference_unletterbox(xy[b].astype(np.float64), wh[b].astype(np.float64), input_hw,
                                     image_hw[b])
        np.testing.assert_allclose(got[b], want, rtol=1e-4, atol=1e-3)
    # One shared image size broadcasts over the batch.
    shared = yolo_correct_boxes(xy, wh, input_hw, image_hw[0]).numpy()
    np.testing.assert_allclose(shared[1], reference_unletterbox(xy[1].astype(np.float64),
                                                                wh[1].astype(np.float64), input_hw,
                                                                image_hw[0]), rtol=1e-4, atol=1e-3)


def test_letterbox_round_trip():
    # A box in image pixels, letterboxed forward by hand, comes back to the same pixels.
    input_hw, image_hw = (96, 128), (300, 500)
    s = min(128 / 500, 96 / 300)
    new_w, new_h = round(500 * s), round(300 * s)
    off_x, off_y = (128 - new_w) // 2, (96 - new_h) // 2
    box = np.array([50.0, 40.0, 250.0, 280.0])
    sx, sy = new_w / 500, new_h / 300
    x1, y1, x2, y2 = box[0] * sx + off_x, box[1] * sy + off_y, box[2] * sx + off_x, box[3] * sy + off_y
    xy = np.array([[[(x1 + x2) / 2 / 128, (y1 + y2) / 2 / 96]]], np.float32)
    wh = np.array([[[(x2 - x1) / 128, (y2 - y1) / 96]]], np.float32)
    got = yolo_correct_boxes(xy, wh, input_hw, image_hw).numpy()[0, 0]
    np.testing.assert_allclose(got, box, atol=1e-3)


def _logit(p):
    return np.log(p / (1 - p))


def _plant(out, cell, k, box_rel, input_hw, anchor, obj, cls, num_classes):
    """Write logits into ``out`` ``(gh, gw, A, 5 + C)`` so that (cell, anchor k) decodes to ``box_rel`` (cx, cy, w, h) with scores."""
    gh, gw = out.shape[0:2]
    j, i = cell
    t = np.full(5 + num_classes, -12.0)
    t[0] = _logit(box_rel[0] * gw - i)
    t[1] = _logit(box_rel[1] * gh - j)
    t[2] = np.log(box_rel[2] * input_hw[1] / anchor[0])
    t[3] = np.log(box_rel[3] * input_hw[0] / anchor[1])
    t[4] = _logit(obj)
    t[5 + cls] = 12.0
    out[cell[0], cell[1], k] = t


def test_yolo_eval_decodes_and_suppresses(rng):
    num_classes, input_hw = 3, (64, 64)
    anchors = TINY_YOLO_ANCHORS
    out32 = np.full((2, 2, 2, 3, 8), -12.0, np.float32)
    out16 = np.full((2, 4, 4, 3, 8), -12.0, np.float32)
    # Image 0: two overlapping class-1 boxes (kept: the higher score) and a class-2 box on top of them.
    _plant(out32[0], (0, 0), 1, (0.40, 0.40, 0.50, 0.50), input_hw, anchors[4], 0.95, 1, num_classes)
    _plant(out16[0], (1, 1), 2, (0.42, 0.41, 0.48, 0.52), input_hw, anchors[2], 0.85, 1, num_classes)
    _plant(out16[0], (1, 1), 0, (0.41, 0.40, 0.50, 0.49), input_hw, anchors[0], 0.75, 2, num_classes)
    # Image 1: one box.
    _plant(out32[1], (1, 1), 0, (0.70, 0.60, 0.30, 0.20), input_hw, anchors[3], 0.90, 0, num_classes)
    outputs = [out32.reshape(2, 2, 2, 24), out16.reshape(2, 4, 4, 24)]
    image_hw = np.array([[200, 100], [64, 128]])
    boxes, scores, classes, valid = yolo_eval(outputs, anchors, num_classes, image_hw, max_boxes=5,
                                              score_threshold=0.5, iou_threshold=0.5)
    assert valid.numpy().tolist() == [2, 1]
    assert classes.numpy()[0, :2].tolist() == [1, 2] and classes.numpy()[1, 0] == 0
    np.testing.assert_allclose(scores.numpy()[0, :2], [0.95, 0.75], atol=1e-4)
    np.testing.assert_allclose(scores.numpy()[1, 0], 0.90, atol=1e-4)

    def expected(rel, hw):
        rel = np.asarray(rel, np.float64)
        corners = reference_unletterbox(rel[:2], rel[2:], input_hw, hw)
        return np.clip(corners, 0, [hw[1], hw[0], hw[1], hw[0]])

    np.testing.assert_allclose(boxes.numpy()[0, 0], expected((0.40, 0.40, 0.50, 0.50), image_hw[0]),
                               atol=1e-2)
    np.testing.assert_allclose(boxes.numpy()[0, 1], expected((0.41, 0.40, 0.50, 0.49), image_hw[0]),
                               atol=1e-2)
    np.testing.assert_allclose(boxes.numpy()[1, 0], expected((0.70, 0.60, 0.30, 0.20), image_hw[1]),
                               atol=1e-2)
    assert np.all(boxes.numpy()[0, 2:] == 0) and np.all(boxes.numpy()[1, 1:] == 0)
    # Without suppression (iou_threshold 1) the second class-1 box comes back too.
    _, _, classes_all, valid_all = yolo_eval(outputs, anchors, num_classes, image_hw, max_boxes=5,
                                             score_threshold=0.5, iou_threshold=1.0)
    assert valid_all.numpy().tolist() == [3, 1]


def test_an_anchor_head_decodes_as_its_anchors_and_masks(rng):
    """``head=AnchorHead`` reads the maps as ``anchors`` + ``anchor_mask`` do (the arguments it
    replaces are then unused)."""
    from yolo3.config.heads import AnchorHead
    from yolo3.ops.decode import raw_boxes_and_scores
    masks = [[3, 4, 5], [1, 2, 3]]  # keras-yolo3's tiny masks, not the default split
    outputs = [rng.normal(size=(1, 2, 2, 24)).astype(np.float32),
               rng.normal(size=(1, 4, 4, 24)).astype(np.float32)]
    image_hw = np.array([[100, 200]])
    by_args = raw_boxes_and_scores(outputs, TINY_YOLO_ANCHORS, 3, image_hw, masks, (64, 64))
    by_head = raw_boxes_and_scores(outputs, None, 3, image_hw, None, (64, 64),
                                   head=AnchorHead.of(TINY_YOLO_ANCHORS, masks))
    for a, b in zip(by_args, by_head):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    default = raw_boxes_and_scores(outputs, TINY_YOLO_ANCHORS, 3, image_hw, None, (64, 64))
    assert not np.allclose(np.asarray(default[0]), np.asarray(by_head[0]))  # the masks mattered
