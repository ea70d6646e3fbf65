"""yolo3.ops.anchor_free: the anchor-free head's decoding, task-aligned assignment and loss, each
against a float64 NumPy reference written here from the definitions (loops, no vectorised tricks),
plus the properties training relies on (gradients, learning on a fixed batch)."""
from __future__ import annotations

import math

import keras
import numpy as np
import pytest
import tensorflow as tf

from yolo3.config.anchor_free_head import AnchorFreeHead
from yolo3.config.loss_options import LossOptions
from yolo3.ops import anchor_free
from yolo3.ops.decode import decode_detections

HEAD = AnchorFreeHead((32, 16), 8)
HW = (64, 96)  # grids 2x3 and 4x6: 30 cells
CLASSES = 3


# ------------------------------------------------------------------------- the NumPy reference

def ref_cells(hw, strides):
    points, cell_strides = [], []
    for s in strides:
        for j in range(hw[0] // s):
            for i in range(hw[1] // s):
                points.append(((i + 0.5) * s, (j + 0.5) * s))
                cell_strides.append(s)
    return np.array(points, np.float64), np.array(cell_strides, np.float64)


def ref_softmax(x):
    e = np.exp(x - x.max())
    return e / e.sum()


def ref_decode(outputs, head, num_classes):
    """-> boxes (B, N, 4) corners in pixels, scores (B, N, C), distance logits (B, N, 4, R)."""
    points, strides = ref_cells(HW, head.strides)
    batch = outputs[0].shape[0]
    logits = np.concatenate([o.reshape(batch, -1, o.shape[-1]) for o in outputs], 1)
    logits = logits.astype(np.float64)
    r = head.reg_max
    boxes = np.zeros((batch, len(points), 4))
    for b in range(batch):
        for n, ((px, py), s) in enumerate(zip(points, strides)):
            d = [sum(k * p for k, p in enumerate(ref_softmax(logits[b, n, side * r:(side + 1) * r])))
                 for side in range(4)]
            boxes[b, n] = (px - d[0] * s, py - d[1] * s, px + d[2] * s, py + d[3] * s)
    scores = 1.0 / (1.0 + np.exp(-logits[..., 4 * r:]))
    return boxes, scores, logits[..., :4 * r].reshape(batch, -1, 4, r)


def ref_ciou(a, b, eps=1e-9):
    (ax1, ay1, ax2, ay2), (bx1, by1, bx2, by2) = a, b
    aw, ah, bw, bh = ax2 - ax1, ay2 - ay1, bx2 - bx1, by2 - by1
    iw = max(0.0, min(ax2, bx2) - max(ax1, bx1))
    ih = max(0.0, min(ay2, by2) - max(ay1, by1))
    inter = iw * ih
    union = aw * ah + bw * bh - inter
    iou = inter / (union + eps)
    cw = max(ax2, bx2) - min(ax1, bx1)
    ch = max(ay2, by2) - min(ay1, by1)
    rho2 = ((ax1 + ax2) / 2 - (bx1 + bx2) / 2) ** 2 + ((ay1 + ay2) / 2 - (by1 + by2) / 2) ** 2
    v = 4 / math.pi ** 2 * (math.atan(bw / (bh + eps)) - math.atan(aw / (ah + eps))) ** 2
    alpha = v / (1 - iou + v + eps)
    return iou - rho2 / (cw ** 2 + ch ** 2 + eps) - alpha * v


def ref_assign(scores, boxes, points, gt, num_classes, topk, alpha, beta):
    """One image: target boxes (N, 4), class targets (N, C), positives (N,)."""
    n_cells, m_boxes = len(points), len(gt)
    align = np.zeros((m_boxes, n_cells))
    overlap = np.zeros((m_boxes, n_cells))
    candidate = np.zeros((m_boxes, n_cells), bool)
    for m, (x1, y1, x2, y2, c) in enumerate(gt):
        if not (x2 > x1 and y2 > y1):
            continue
        for n, (px, py) in enumerate(points):
            if min(px - x1, py - y1, x2 - px, y2 - py) > 1e-9:
                candidate[m, n] = True
                overlap[m, n] = max(ref_ciou((x1, y1, x2, y2), boxes[n]), 0.0)
                align[m, n] = scores[n, int(c)] ** alpha * overlap[m, n] ** beta
    positive = np.zeros_like(candidate)
    for m in range(m_boxes):
        for n in np.argsort(-align[m], kind="stable")[:topk]:
            positive[m, n] = candidate[m, n]
    for n in range(n_cells):
        if positive[:, n].sum() > 1:
            best = max((m for m in range(m_boxes) if positive[m, n]), key=lambda m: overlap[m, n])
            positive[:, n] = False
            positive[best, n] = True
    t_boxes = np.zeros((n_cells, 4))
    t_scores = np.zeros((n_cells, num_classes))
    fg = positive.any(0)
    best_align = (align * positive).max(1)
    best_overlap = (overlap * positive).max(1)
    for n in np.flatnonzero(fg):
        m = int(np.flatnonzero(positive[:, n])[0])
        t_boxes[n] = gt[m, :4]
        t_scores[n, int(gt[m, 4])] = align[m, n] * best_overlap[m] / (best_align[m] + 1e-9)
    return t_boxes, t_scores, fg


def ref_dfl(logits, target):
    """Mean over the four sides of the two-bin cross-entropy around each target distance."""
    total = 0.0
    for side in range(4):
        log_p = np.log(ref_softmax(logits[side]))
        t = target[side]
        low = int(math.floor(t))
        total -= (low + 1 - t) * log_p[low] + (t - low) * log_p[low + 1]
    return total / 4


def ref_loss(outputs, true_boxes, head, num_classes, box_gain=1.0, class_gain=1.0,
             class_weights=None, focal_gamma=0.0):
    boxes, scores, dist = ref_decode(outputs, head, num_classes)
    points, strides = ref_cells(HW, head.strides)
    batch = len(boxes)
    logits = np.concatenate([o.reshape(batch, -1, o.shape[-1]) for o in outputs], 1)
    logits = logits.astype(np.float64)[..., 4 * head.reg_max:]
    box = dfl = cls = 0.0
    for b in range(batch):
        t_boxes, t_scores, fg = ref_assign(scores[b], boxes[b], points, true_boxes[b], num_classes,
                                           anchor_free.TOPK, anchor_free.ALPHA, anchor_free.BETA)
        cell_weight = np.ones(len(fg))
        for n in np.flatnonzero(fg):
            if class_weights is not None and t_scores[n].max() > 0:
                cell_weight[n] = class_weights[int(np.argmax(t_scores[n]))]
            w = t_scores[n].sum() * cell_weight[n]
            box += w * (1 - ref_ciou(boxes[b, n], t_boxes[n]))
            px, py = points[n]
            x1, y1, x2, y2 = t_boxes[n]
            sides = np.clip(np.array([px - x1, py - y1, x2 - px, y2 - py]) / strides[n], 0,
                            head.reg_max - 1.01)
            dfl += w * ref_dfl(dist[b, n], sides)
        x = logits[b]
        bce = np.maximum(x, 0) - x * t_scores + np.log1p(np.exp(-np.abs(x)))
        focal = np.abs(t_scores - 1 / (1 + np.exp(-x))) ** focal_gamma
        cls += np.sum(cell_weight[:, None] * focal * bce)
    scale = 1.0 / batch
    return {"box": box_gain * anchor_free.BOX_WEIGHT * box * scale,
            "dfl": box_gain * anchor_free.DFL_WEIGHT * dfl * scale,
            "class": class_gain * anchor_free.CLASS_WEIGHT * cls * scale}


# ------------------------------------------------------------------------------------ fixtures

def random_outputs(rng, batch=2, scale=1.0):
    return [rng.normal(0, scale, (batch, HW[0] // s, HW[1] // s, HEAD.channels(CLASSES)))
            .astype(np.float32) for s in HEAD.strides]


TRUE_BOXES = np.zeros((2, 5, 5), np.float32)
TRUE_BOXES[0, :3] = [[4, 6, 60, 50, 0], [40, 10, 90, 62, 2], [10, 30, 30, 58, 1]]
TRUE_BOXES[1, :2] = [[0, 0, 44, 63, 1], [50, 20, 90, 60, 0]]  # image 1: a full-height box


# ----------------------------------------------------------------------------------- decoding

def test_cells_are_every_outputs_centres_largest_stride_first():
    outputs = random_outputs(np.random.default_rng(0))
    points, strides = anchor_free.cell_centres([tf.constant(o) for o in outputs], HEAD.strides)
    want_points, want_strides = ref_cells(HW, HEAD.strides)
    np.testing.assert_array_equal(points.numpy(), want_points)
    np.testing.assert_array_equal(strides.numpy()[:, 0], want_strides)


def test_decode_outputs_matches_the_reference():
    outputs = random_outputs(np.random.default_rng(1), scale=2.0)
    boxes, scores = anchor_free.decode_outputs([tf.constant(o) for o in outputs], HEAD, CLASSES)
    want_boxes, want_scores, _ = ref_decode(outputs, HEAD, CLASSES)
    np.testing.assert_allclose(boxes.numpy(), want_boxes, rtol=1e-5, atol=1e-4)
    np.testing.assert_allclose(scores.numpy(), want_scores, rtol=1e-5, atol=1e-7)


def _one_box_outputs(cell, bins, cls, num_classes=CLASSES):
    """Raw maps with every score near 0 but class ``cls`` of flat cell ``cell`` (of the stride-16
    output), whose distance logits peak at ``bins`` (left, top, right, bottom)."""
    outputs = [np.full((1, HW[0] // s, HW[1] // s, HEAD.channels(num_classes)), -30.0, np.float32)
               for s in HEAD.strides]
    flat = outputs[1].reshape(-1, HEAD.channels(num_classes))
    for side, b in enumerate(bins):
        flat[cell, side * HEAD.reg_max + b] = 60.0
    flat[cell, 4 * HEAD.reg_max + cls] = 30.0
    return outputs


def test_decode_detections_of_a_known_box_in_image_pixels():
    # cell (row 1, col 2) of stride 16: centre (40, 24); distances 2, 1, 3, 2 strides
    outputs = _one_box_outputs(1 * 6 + 2, (2, 1, 3, 2), cls=2)
    image_hw = (128, 240)  # letterboxed into 64x96: scale 0.4, offset 6.4 -> 6 rows on top
    boxes, scores, classes, count = decode_detections(
        [tf.constant(o) for o in outputs], None, CLASSES, tf.constant(image_hw), max_boxes=5,
        score_threshold=0.5, iou_threshold=0.5, input_shape=HW, head=HEAD)
    assert int(count[0]) == 1 and int(classes[0, 0]) == 2 and float(scores[0, 0]) > 0.99
    scale = min(HW[0] / image_hw[0], HW[1] / image_hw[1])
    new_h = round(image_hw[0] * scale)
    offset_y = (HW[0] - new_h) // 2
    corners = np.array([40 - 32, 24 - 16, 40 + 48, 24 + 32], np.float64)
    scale_xy = [HW[1] / image_hw[1], new_h / image_hw[0]] * 2  # x, y, x, y
    want = (corners - [0, offset_y, 0, offset_y]) / scale_xy
    want = np.clip(want, 0, [image_hw[1], image_hw[0]] * 2)
    np.testing.assert_allclose(boxes[0, 0].numpy(), want, atol=1e-3)


def test_the_anchor_head_decoding_is_unchanged_without_a_head():
    from yolo3.config.specs import get_spec
    spec = get_spec("tiny")
    rng = np.random.default_rng(2)
    outputs = [tf.constant(rng.normal(0, 2, (1, 64 // s, 64 // s, 3 * (5 + 2))), tf.float32)
               for s in spec.strides]
    a = decode_detections(outputs, spec.default_anchors(), 2, (64, 64), score_threshold=0.05)
    b = decode_detections(outputs, spec.default_anchors(), 2, (64, 64), score_threshold=0.05,
                          head=None)
    for x, y in zip(a, b):
        np.testing.assert_array_equal(x.numpy(), y.numpy())


# --------------------------------------------------------------------------------- assignment

def test_task_aligned_assignment_matches_the_reference():
    rng = np.random.default_rng(3)
    outputs = random_outputs(rng, scale=1.5)
    boxes, scores, _ = ref_decode(outputs, HEAD, CLASSES)
    points, _ = ref_cells(HW, HEAD.strides)
    got = anchor_free.task_aligned_assign(tf.constant(scores, tf.float32),
                                          tf.constant(boxes, tf.float32),
                                          tf.constant(points, tf.float32),
                                          tf.constant(TRUE_BOXES), CLASSES, topk=4)
    for b in range(2):
        want = ref_assign(scores[b], boxes[b], points, TRUE_BOXES[b], CLASSES, 4,
                          anchor_free.ALPHA, anchor_free.BETA)
        np.testing.assert_array_equal(got[2].numpy()[b], want[2])
        fg = want[2]
        assert fg.sum() > 3  # the case is not trivial
        np.testing.assert_allclose(got[0].numpy()[b][fg], want[0][fg], atol=1e-5)
        np.testing.assert_allclose(got[1].numpy()[b], want[1], rtol=2e-3, atol=1e-6)


def _assign_random(seed, true_boxes, **kw):
    """The assignment of random predictions to ``true_boxes``, as NumPy arrays, and the cells."""
    boxes, scores, _ = ref_decode(random_outputs(np.random.default_rng(seed)), HEAD, CLASSES)
    points, _ = ref_cells(HW, HEAD.strides)
    got = anchor_free.task_aligned_assign(
        tf.constant(scores, tf.float32), tf.constant(boxes, tf.float32),
        tf.constant(points, tf.float32), tf.constant(true_boxes, tf.float32), CLASSES, **kw)
    return [t.numpy() for t in got], points


def test_each_box_gets_at_most_topk_cells_inside_it():
    (t_boxes, t_scores, fg), points = _assign_random(4, TRUE_BOXES, topk=3)
    for b in range(2):
        for box in TRUE_BOXES[b]:
            if box[2] <= box[0]:
                continue
            mine = fg[b] & np.all(t_boxes[b] == box[:4], axis=-1)
            assert 1 <= mine.sum() <= 3
            inside = ((points[mine] > box[:2]) & (points[mine] < box[2:4])).all()
            assert inside
            assert np.all(t_scores[b][mine].argmax(-1) == int(box[4]))
    assert np.all(t_scores[~fg] == 0) and np.all(t_scores <= 1.0)


def test_no_true_box_no_positive():
    (_, t_scores, fg), _ = _assign_random(5, np.zeros((2, 5, 5)))
    assert not fg.any() and not t_scores.any()


# ------------------------------------------------------------------------------------- the loss

def test_dfl_matches_the_reference():
    rng = np.random.default_rng(6)
    logits = rng.normal(0, 2, (5, 4, 8))
    targets = rng.uniform(0, 6.99, (5, 4))
    got = anchor_free.dfl(tf.constant(logits, tf.float32), tf.constant(targets, tf.float32))
    want = [ref_dfl(logits[i], targets[i]) for i in range(5)]
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-5)
    # a distribution split between the two bins around the target has the least loss
    best = np.full((4, 8), -50.0)
    best[:, 2], best[:, 3] = np.log(0.25), np.log(0.75)
    t = np.full(4, 2.75)
    assert ref_dfl(best, t) < ref_dfl(best + rng.normal(0, 0.5, (4, 8)), t)


@pytest.mark.parametrize("gains", [(1.0, 1.0), (2.0, 0.5)])
def test_loss_terms_match_the_reference(gains):
    rng = np.random.default_rng(7)
    outputs = random_outputs(rng, scale=1.5)
    got = anchor_free.loss_terms([tf.constant(o) for o in outputs], tf.constant(TRUE_BOXES),
                                 HEAD, CLASSES, LossOptions(box_gain=gains[0],
                                                            class_gain=gains[1]))
    want = ref_loss(outputs, TRUE_BOXES, HEAD, CLASSES, *gains)
    for key in ("box", "dfl", "class"):
        assert float(got[key]) == pytest.approx(want[key], rel=2e-4), key
    assert float(got["positives"]) > 0


@pytest.mark.parametrize("options", [{"class_weights": [0.5, 4.0, 1.5]}, {"focal_gamma": 2.0},
                                     {"class_weights": [2.0, 0.3, 1.0], "focal_gamma": 1.0}])
def test_class_weights_and_focal_loss_match_the_reference(options):
    rng = np.random.default_rng(9)
    outputs = random_outputs(rng, scale=1.5)
    got = anchor_free.loss_terms([tf.constant(o) for o in outputs], tf.constant(TRUE_BOXES),
                                 HEAD, CLASSES, LossOptions(**options))
    want = ref_loss(outputs, TRUE_BOXES, HEAD, CLASSES, **options)
    plain = ref_loss(outputs, TRUE_BOXES, HEAD, CLASSES)
    for key in ("box", "dfl", "class"):
        assert float(got[key]) == pytest.approx(want[key], rel=2e-4), key
    assert want["class"] != pytest.approx(plain["class"], rel=1e-2)


def test_images_without_boxes_leave_only_the_class_term():
    outputs = random_outputs(np.random.default_rng(8))
    got = anchor_free.loss_terms([tf.constant(o) for o in outputs], tf.zeros((2, 5, 5)), HEAD,
                                 CLASSES)
    assert float(got["box"]) == 0 and float(got["dfl"]) == 0 and float(got["positives"]) == 0
    want = ref_loss(outputs, np.zeros((2, 5, 5)), HEAD, CLASSES)["class"]
    assert float(got["class"]) == pytest.approx(want, rel=1e-5) and want > 0


@pytest.mark.slow  # CI runs it; anchor-free training keeps test_models' run at several sizes
def test_gradients_are_finite_and_descent_learns_a_fixed_batch():
    rng = np.random.default_rng(9)
    variables = [tf.Variable(o) for o in random_outputs(rng, scale=0.1)]
    boxes = tf.constant(TRUE_BOXES)
    losses = []
    optimizer = keras.optimizers.Adam(0.1)
    for _ in range(150):
        with tf.GradientTape() as tape:
            terms = anchor_free.loss_terms(variables, boxes, HEAD, CLASSES)
            loss = terms["box"] + terms["dfl"] + terms["class"]
        grads = tape.gradient(loss, variables)
        assert all(np.isfinite(g.numpy()).all() for g in grads)
        optimizer.apply_gradients(zip(grads, variables))
        losses.append(float(loss))
    assert losses[-1] < 0.5 * losses[0]
    # the learnt maps decode to the true boxes: each one found with its class
    detections = decode_detections(variables, None, CLASSES, tf.constant(HW), max_boxes=10,
                                   score_threshold=0.3, iou_threshold=0.5, input_shape=HW,
                                   head=HEAD)
    for b in range(2):
        found = detections[0][b, :int(detections[3][b])].numpy()
        classes = detections[2][b, :int(detections[3][b])].numpy()
        for box in TRUE_BOXES[b][TRUE_BOXES[b, :, 2] > 0]:
            hit = [ref_ciou(box[:4], f) > 0.5 and c == box[4] for f, c in zip(found, classes)]
            assert any(hit), (b, box)
