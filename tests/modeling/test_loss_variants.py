"""The loss's recipe options against a float64 NumPy loop written here from the formulas: GIoU, DIoU
and CIoU box losses, label smoothing, and the static padded ground truth (XLA-compilable)."""
from __future__ import annotations

import math

import numpy as np
import pytest
import tensorflow as tf

from yolo3.config.loss_options import LossOptions
from yolo3.config.masks import default_masks
from yolo3.modeling.bodies import build_spec_body
from yolo3.modeling.loss import YoloLoss, loss_terms, yolo_loss, yolo_training_model
from yolo3.ops.anchors import TINY_YOLO_ANCHORS, YOLO_ANCHORS
from yolo3.ops.targets import preprocess_true_boxes


def sigmoid(x):
    return 1 / (1 + np.exp(-x))


def bce(labels, logits):
    return np.maximum(logits, 0) - logits * labels + np.log1p(np.exp(-np.abs(logits)))


def corners(b):
    return b[0] - b[2] / 2, b[1] - b[3] / 2, b[0] + b[2] / 2, b[1] + b[3] / 2


def ref_iou_variant(p, t, kind):
    """One pair of (cx, cy, w, h) boxes, float64, the textbook formulas."""
    px1, py1, px2, py2 = corners(p)
    tx1, ty1, tx2, ty2 = corners(t)
    iw, ih = max(0.0, min(px2, tx2) - max(px1, tx1)), max(0.0, min(py2, ty2) - max(py1, ty1))
    inter = iw * ih
    union = p[2] * p[3] + t[2] * t[3] - inter
    iou = inter / union
    if kind == "iou":
        return iou
    cw, ch = max(px2, tx2) - min(px1, tx1), max(py2, ty2) - min(py1, ty1)
    if kind == "giou":
        return iou - (cw * ch - union) / (cw * ch)
    diou = iou - ((p[0] - t[0]) ** 2 + (p[1] - t[1]) ** 2) / (cw ** 2 + ch ** 2)
    if kind == "diou":
        return diou
    v = 4 / math.pi ** 2 * (math.atan(t[2] / t[3]) - math.atan(p[2] / p[3])) ** 2
    return diou - v / (1 - iou + v) * v


def iou_cxcywh(a, b):
    ax1, ay1, ax2, ay2 = corners(a)
    out = []
    for t in b:
        tx1, ty1, tx2, ty2 = corners(t)
        inter = max(0.0, min(ax2, tx2) - max(ax1, tx1)) * max(0.0, min(ay2, ty2) - max(ay1, ty1))
        union = a[2] * a[3] + t[2] * t[3] - inter
        out.append(inter / union if union > 0 else 0.0)
    return max(out) if out else 0.0


def reference(outputs, y_true, anchors, num_classes, masks, box_loss, smoothing=0.0,
              ignore_thresh=0.5, truth_boxes=None, objectness="one", box_gain=1.0,
              class_gain=1.0):
    """Loop over images, cells and anchors; ``truth_boxes`` (b, T, 4) relative cxcywh or None
    (gathered from y_true); ``objectness="iou"``: a positive's confidence target is the plain IoU
    of its decoded box with its true box; the box terms weighted by ``box_gain``, the class term
    by ``class_gain``."""
    outputs = [np.asarray(o, np.float64) for o in outputs]
    y_true = [np.asarray(y, np.float64) for y in y_true]
    batch = outputs[0].shape[0]
    in_h, in_w = outputs[0].shape[1] * 32, outputs[0].shape[2] * 32
    total = 0.0
    for feats, y, mask in zip(outputs, y_true, masks):
        _, gh, gw, _ = feats.shape
        t = feats.reshape(batch, gh, gw, len(mask), 5 + num_classes)
        for b in range(batch):
            if truth_boxes is None:
                truth = np.concatenate([s[b][s[b][..., 4] > 0][:, :4] for s in y_true], axis=0)
            else:
                truth = truth_boxes[b]
            for j in range(gh):
                for i in range(gw):
                    for k, a in enumerate(mask):
                        aw, ah = anchors[a]
                        tv, yv = t[b, j, i, k], y[b, j, i, k]
                        px = (sigmoid(tv[0]) + i) / gw
                        py = (sigmoid(tv[1]) + j) / gh
                        pw, ph = np.exp(tv[2]) * aw / in_w, np.exp(tv[3]) * ah / in_h
                        ignore = float(iou_cxcywh([px, py, pw, ph], truth) < ignore_thresh)
                        m = yv[4]
                        target = m
                        if objectness == "iou" and m > 0:
                            target = m * ref_iou_variant(
                                [px * in_w, py * in_h, pw * in_w, ph * in_h],
                                [yv[0] * in_w, yv[1] * in_h, yv[2] * in_w, yv[3] * in_h], "iou")
                        conf = bce(target, tv[4])
                        total += m * conf + (1 - m) * conf * ignore
                        if m == 0:
                            continue
                        scale = 2 - yv[2] * yv[3]
                        if box_loss == "mse":
                            raw_xy = np.array([yv[0] * gw - i, yv[1] * gh - j])
                            raw_wh = np.log(np.array([yv[2] * in_w / aw, yv[3] * in_h / ah]))
                            total += box_gain * scale * bce(raw_xy, tv[0:2]).sum()
                            total += box_gain * scale * 0.5 * np.sum((raw_wh - tv[2:4]) ** 2)
                        else:
                            pred = [px * in_w, py * in_h, pw * in_w, ph * in_h]
                            true = [yv[0] * in_w, yv[1] * in_h, yv[2] * in_w, yv[3] * in_h]
                            total += box_gain * scale * (1 - ref_iou_variant(pred, true,
                                                                             box_loss))
                        target = yv[5:] * (1 - smoothing) + 0.5 * smoothing
                        total += class_gain * bce(target, tv[5:]).sum()
    return total / batch


def case(rng, anchors, hw, num_classes, batch=2, boxes_per_image=4):
    h, w = hw
    centre = rng.uniform(0, [w, h], (batch, boxes_per_image, 2))
    size = rng.uniform(6, [w * 0.8, h * 0.8], (batch, boxes_per_image, 2))
    cls = rng.integers(0, num_classes, (batch, boxes_per_image, 1))
    boxes = np.concatenate([np.clip(centre - size / 2, 0, [w, h]), np.clip(centre + size / 2, 0, [w, h]),
                            cls], -1).astype(np.float32)
    y_true = preprocess_true_boxes(boxes, hw, anchors, num_classes)
    per = len(anchors) // len(y_true)
    outputs = [rng.normal(0, 0.8, (batch, y.shape[1], y.shape[2], per * (5 + num_classes)))
               .astype(np.float32) for y in y_true]
    return boxes, outputs, y_true


@pytest.mark.parametrize("box_loss", ["giou", "diou", "ciou"])
@pytest.mark.parametrize("anchors,hw", [(YOLO_ANCHORS, (64, 96)), (TINY_YOLO_ANCHORS, (96, 64))],
                         ids=["yolov3", "tiny"])
def test_iou_box_losses_match_the_reference(box_loss, anchors, hw):
    rng = np.random.default_rng(hash(box_loss) % 1000)
    _, outputs, y_true = case(rng, anchors, hw, 3)
    masks = default_masks(len(anchors))
    want = reference(outputs, y_true, anchors, 3, masks, box_loss)
    got = float(yolo_loss([*outputs, *y_true], anchors, 3, LossOptions(box_loss=box_loss)))
    assert got == pytest.approx(want, rel=1e-4)
    terms = loss_terms([*outputs, *y_true], anchors, 3, LossOptions(box_loss=box_loss))
    assert set(terms) == {"box", "confidence", "class", "ignored"} and float(terms["box"]) > 0


def test_mse_is_unchanged_and_label_smoothing_matches():
    rng = np.random.default_rng(4)
    _, outputs, y_true = case(rng, TINY_YOLO_ANCHORS, (64, 64), 4)
    masks = default_masks(6)
    plain = reference(outputs, y_true, TINY_YOLO_ANCHORS, 4, masks, "mse")
    assert float(yolo_loss([*outputs, *y_true], TINY_YOLO_ANCHORS, 4)) == pytest.approx(plain, rel=1e-4)
    smooth = reference(outputs, y_true, TINY_YOLO_ANCHORS, 4, masks, "mse", smoothing=0.1)
    got = float(yolo_loss([*outputs, *y_true], TINY_YOLO_ANCHORS, 4,
                          LossOptions(label_smoothing=0.1)))
    assert got == pytest.approx(smooth, rel=1e-4) and abs(smooth - plain) > 1e-3


@pytest.mark.parametrize("box_loss", ["mse", "ciou"])
def test_iou_objectness_target_matches_the_reference(box_loss):
    rng = np.random.default_rng(12)
    _, outputs, y_true = case(rng, TINY_YOLO_ANCHORS, (96, 64), 3, boxes_per_image=5)
    masks = default_masks(6)
    want = reference(outputs, y_true, TINY_YOLO_ANCHORS, 3, masks, box_loss, objectness="iou")
    one = reference(outputs, y_true, TINY_YOLO_ANCHORS, 3, masks, box_loss)
    got = float(yolo_loss([*outputs, *y_true], TINY_YOLO_ANCHORS, 3,
                          LossOptions(box_loss=box_loss, objectness="iou")))
    assert got == pytest.approx(want, rel=1e-4) and abs(want - one) > 1e-2


def test_iou_objectness_target_passes_no_gradient_to_the_box():
    """The IoU target is a constant: the confidence term's gradient reaches only the objectness
    logits, never the box logits."""
    rng = np.random.default_rng(13)
    _, outputs, y_true = case(rng, TINY_YOLO_ANCHORS, (64, 64), 2)
    variables = [tf.Variable(o) for o in outputs]
    with tf.GradientTape() as tape:
        terms = loss_terms([*variables, *y_true], TINY_YOLO_ANCHORS, 2,
                           LossOptions(box_loss="ciou", objectness="iou"))
    grads = tape.gradient(terms["confidence"], variables)
    for g, y in zip(grads, y_true):
        g = g.numpy().reshape(*y.shape[:3], 3, 7)
        assert np.all(g[..., 0:4] == 0) and np.abs(g[..., 4]).max() > 0
        assert np.all(g[..., 5:] == 0)


def test_unknown_objectness_target_is_refused_and_the_layer_keeps_it():
    with pytest.raises(ValueError, match="objectness must be one of"):
        YoloLoss(TINY_YOLO_ANCHORS, 2, objectness="quality")
    layer = YoloLoss(TINY_YOLO_ANCHORS, 2, box_loss="ciou", objectness="iou")
    assert YoloLoss.from_config(layer.get_config()).options.objectness == "iou"
    assert YoloLoss(TINY_YOLO_ANCHORS, 2).options.objectness == "one"


@pytest.mark.parametrize("box_loss", ["mse", "ciou"])
def test_loss_gains_weight_the_box_and_class_terms_as_the_reference_does(box_loss):
    rng = np.random.default_rng(14)
    _, outputs, y_true = case(rng, TINY_YOLO_ANCHORS, (64, 96), 3, boxes_per_image=5)
    masks = default_masks(6)
    want = reference(outputs, y_true, TINY_YOLO_ANCHORS, 3, masks, box_loss, objectness="iou",
                     box_gain=3.0, class_gain=0.25)
    plain = reference(outputs, y_true, TINY_YOLO_ANCHORS, 3, masks, box_loss, objectness="iou")
    got = float(yolo_loss([*outputs, *y_true], TINY_YOLO_ANCHORS, 3,
                          LossOptions(box_loss=box_loss, objectness="iou", box_gain=3.0,
                                      class_gain=0.25)))
    assert got == pytest.approx(want, rel=1e-4) and abs(want - plain) > 1e-1
    base = loss_terms([*outputs, *y_true], TINY_YOLO_ANCHORS, 3, LossOptions(box_loss=box_loss))
    weighted = loss_terms([*outputs, *y_true], TINY_YOLO_ANCHORS, 3,
                          LossOptions(box_loss=box_loss, box_gain=3.0, class_gain=0.25))
    box_keys = ["xy", "wh"] if box_loss == "mse" else ["box"]
    for key in box_keys:
        assert float(weighted[key]) == pytest.approx(3.0 * float(base[key]), rel=1e-5)
    assert float(weighted["class"]) == pytest.approx(0.25 * float(base["class"]), rel=1e-5)
    assert float(weighted["confidence"]) == pytest.approx(float(base["confidence"]), rel=1e-6)


@pytest.mark.parametrize("gains", [{"box_gain": 0.0}, {"class_gain": -1.0},
                                   {"box_gain": float("nan")}, {"class_gain": float("inf")}])
def test_a_gain_that_is_not_a_positive_number_is_refused_naming_it(gains):
    name = next(iter(gains))
    with pytest.raises(ValueError, match=f"{name} must be a positive number"):
        YoloLoss(TINY_YOLO_ANCHORS, 2, **gains)
    layer = YoloLoss(TINY_YOLO_ANCHORS, 2, box_gain=2.5, class_gain=0.5)
    restored = YoloLoss.from_config(layer.get_config())
    assert (restored.options.box_gain, restored.options.class_gain) == (2.5, 0.5)
    default = YoloLoss(TINY_YOLO_ANCHORS, 2).options
    assert (default.box_gain, default.class_gain) \
        == (1.0, 1.0)


def test_iou_variants_on_known_boxes():
    from yolo3.modeling.loss import iou_variant
    p = tf.constant([[10.0, 10.0, 4.0, 4.0]])
    t = tf.constant([[12.0, 10.0, 4.0, 2.0]])
    for kind in ("iou", "giou", "diou", "ciou"):
        want = ref_iou_variant([10, 10, 4, 4], [12, 10, 4, 2], kind) if kind != "iou" else 4 / 20
        assert float(iou_variant(p, t, kind)[0, 0]) == pytest.approx(want, rel=1e-5)
    same = iou_variant(p, p, "ciou")
    assert float(same[0, 0]) == pytest.approx(1.0, abs=1e-6)


@pytest.mark.slow  # CI runs it (.ci/run); moved out of the default suite (15 minutes) when issue 67's tests came in: 8 s; the layer harness keeps the loss's round trip and step
def test_padded_true_boxes_give_the_static_loss_and_compile_with_xla():
    """The ignore mask against the image's padded boxes (static shapes) equals the reference with
    those boxes, and the training step compiles with XLA."""
    import keras

    from yolo3.config.specs import get_spec
    rng = np.random.default_rng(5)
    hw = (64, 64)
    boxes, outputs, y_true = case(rng, TINY_YOLO_ANCHORS, hw, 2, boxes_per_image=3)
    padded = np.concatenate([boxes, np.zeros((2, 5, 5), np.float32)], axis=1)  # max_boxes 8
    rel = np.concatenate([(padded[..., 0:2] + padded[..., 2:4]) / 2 / [64, 64],
                          (padded[..., 2:4] - padded[..., 0:2]) / [64, 64]], -1)
    want = reference(outputs, y_true, TINY_YOLO_ANCHORS, 2, default_masks(6), "ciou", truth_boxes=rel)
    got = float(yolo_loss([*outputs, *y_true], TINY_YOLO_ANCHORS, 2, LossOptions(box_loss="ciou"),
                          true_boxes=tf.constant(padded)))
    assert got == pytest.approx(want, rel=1e-4)
    layer = YoloLoss(TINY_YOLO_ANCHORS, 2, box_loss="ciou", true_boxes=True)
    assert layer.supports_jit and YoloLoss.from_config(layer.get_config()).true_boxes
    body = build_spec_body(get_spec("tiny"), 2, input_shape=hw)
    model = yolo_training_model(body, TINY_YOLO_ANCHORS, 2, LossOptions(box_loss="ciou"),
                                max_boxes=8)
    assert model.inputs[-1].shape == (None, 8, 5)
    images = rng.uniform(0, 1, (2, *hw, 3)).astype(np.float32)
    model.compile(optimizer=keras.optimizers.SGD(1e-3), loss=lambda y, p: p, jit_compile=True)
    first = float(model.train_on_batch((images, *y_true, padded), np.zeros(2, np.float32)))
    eager = float(np.asarray(model((images, *y_true, padded))).reshape(-1)[0])
    assert np.isfinite(first) and np.isfinite(eager)
