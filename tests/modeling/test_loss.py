"""yolo3.modeling.loss against a float64 NumPy implementation written here from the formula."""
from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

from yolo3.config.loss_options import LossOptions
from yolo3.config.masks import default_masks
from yolo3.modeling.loss import YoloLoss, gather_true_boxes, identity_loss, yolo_loss
from yolo3.ops.anchors import TINY_YOLO_ANCHORS, YOLO_ANCHORS
from yolo3.ops.targets import preprocess_true_boxes


def bce_logits(labels, logits):
    """Binary cross-entropy of sigmoid(logits), stable form, float64."""
    return np.maximum(logits, 0) - logits * labels + np.log1p(np.exp(-np.abs(logits)))


def iou_cxcywh(a, b):
    """``(..., 4)`` x ``(T, 4)`` centre/size boxes -> ``(..., T)`` IoU, float64."""
    a = a[..., None, :]
    a_lo, a_hi = a[..., :2] - a[..., 2:] / 2, a[..., :2] + a[..., 2:] / 2
    b_lo, b_hi = b[:, :2] - b[:, 2:] / 2, b[:, :2] + b[:, 2:] / 2
    inter = np.prod(np.clip(np.minimum(a_hi, b_hi) - np.maximum(a_lo, b_lo), 0, None), axis=-1)
    union = np.prod(a[..., 2:], -1) + np.prod(b[:, 2:], -1) - inter
    return inter / union


def reference_loss(outputs, y_true, anchors, num_classes, masks, ignore_thresh=.5, all_scales=True,
                   class_weights=None, focal_gamma=0.0):
    outputs = [np.asarray(o, np.float64) for o in outputs]
    y_true = [np.asarray(y, np.float64) for y in y_true]
    anchors = np.asarray(anchors, np.float64)
    batch = outputs[0].shape[0]
    in_h, in_w = outputs[0].shape[1] * 32, outputs[0].shape[2] * 32
    total = 0.0
    for layer, (feats, y, mask) in enumerate(zip(outputs, y_true, masks)):
        _, gh, gw, _ = feats.shape
        t = feats.reshape(batch, gh, gw, len(mask), 5 + num_classes)
        for b in range(batch):
            sources = y_true if all_scales else [y]
            truth = np.concatenate([s[b][s[b][..., 4] > 0][:, :4] for s in sources], axis=0)
            for j in range(gh):
                for i in range(gw):
                    for k, a in enumerate(mask):
                        aw, ah = anchors[a]
                        tv, yv = t[b, j, i, k], y[b, j, i, k]
                        px = (1 / (1 + np.exp(-tv[0])) + i) / gw
                        py = (1 / (1 + np.exp(-tv[1])) + j) / gh
                        pw = np.exp(tv[2]) * aw / in_w
                        ph = np.exp(tv[3]) * ah / in_h
                        best = iou_cxcywh(np.array([px, py, pw, ph]), truth).max() if len(truth) else 0
                        ignore = float(best < ignore_thresh)
                        m = yv[4]
                        conf = bce_logits(m, tv[4])
                        weight = 1.0
                        if m and class_weights is not None:
                            weight = class_weights[int(np.argmax(yv[5:]))]
                        total += weight * m * conf + (1 - m) * conf * ignore
                        if m == 0:
                            continue
                        scale = weight * (2 - yv[2] * yv[3])
                        raw_xy = np.array([yv[0] * gw - i, yv[1] * gh - j])
                        raw_wh = np.log(np.array([yv[2] * in_w / aw, yv[3] * in_h / ah]))
                        total += scale * bce_logits(raw_xy, tv[0:2]).sum()
                        total += scale * 0.5 * np.sum((raw_wh - tv[2:4]) ** 2)
                        p = 1 / (1 + np.exp(-tv[5:]))
                        focal = np.abs(yv[5:] - p) ** focal_gamma
                        total += weight * (focal * bce_logits(yv[5:], tv[5:])).sum()
    return total / batch


def random_case(rng, anchors, input_hw, num_classes, batch=3, max_boxes=6, scale=1.0):
    h, w = input_hw
    centre = rng.uniform(0, [w, h], (batch, max_boxes, 2))
    size = rng.uniform(4, [w, h], (batch, max_boxes, 2))
    cls = rng.integers(0, num_classes, (batch, max_boxes, 1))
    boxes = np.concatenate([centre - size / 2, centre + size / 2, cls], -1).astype(np.float32)
    boxes[-1] = 0  # the last image has no boxes
    y_true = preprocess_true_boxes(boxes, input_hw, anchors, num_classes)
    a = len(anchors) // len(y_true)
    outputs = [rng.normal(0, scale, (batch, y.shape[1], y.shape[2], a * (5 + num_classes)))
               .astype(np.float32) for y in y_true]
    return outputs, y_true


@pytest.mark.parametrize("anchors,input_hw", [(YOLO_ANCHORS, (64, 96)), (TINY_YOLO_ANCHORS, (128, 96))],
                         ids=["yolov3", "tiny"])
def test_yolo_loss_matches_numpy_reference(anchors, input_hw, rng):
    outputs, y_true = random_case(rng, anchors, input_hw, num_classes=3)
    masks = default_masks(len(anchors))
    want = reference_loss(outputs, y_true, anchors, 3, masks)
    got = float(yolo_loss([*outputs, *y_true], anchors, 3))
    assert abs(got - want) <= 1e-4 * abs(want)
    # The ignore mask is active in this case: the loss without it would differ.
    no_ignore = reference_loss(outputs, y_true, anchors, 3, masks, ignore_thresh=2.0)
    assert abs(no_ignore - want) > 1e-3 * want


def test_class_weights_and_focal_loss_match_the_reference(rng):
    outputs, y_true = random_case(rng, TINY_YOLO_ANCHORS, (96, 128), num_classes=3)
    masks = default_masks(len(TINY_YOLO_ANCHORS))
    weights = np.array([0.5, 3.0, 1.25])
    for kwargs in ({"class_weights": weights}, {"focal_gamma": 2.0},
                   {"class_weights": weights, "focal_gamma": 1.5}):
        want = reference_loss(outputs, y_true, TINY_YOLO_ANCHORS, 3, masks, **kwargs)
        got = float(yolo_loss([*outputs, *y_true], TINY_YOLO_ANCHORS, 3,
                              LossOptions(box_loss="mse", objectness="one", **kwargs)))
        assert abs(got - want) <= 1e-4 * abs(want), kwargs
    plain = reference_loss(outputs, y_true, TINY_YOLO_ANCHORS, 3, masks)
    assert abs(want - plain) > 1e-2 * plain  # the options change the loss
    # weights of 1 are the plain loss; the layer carries them through its config
    ones = float(yolo_loss([*outputs, *y_true], TINY_YOLO_ANCHORS, 3,
                           LossOptions(class_weights=[1, 1, 1])))
    assert abs(ones - float(yolo_loss([*outputs, *y_true], TINY_YOLO_ANCHORS, 3))) <= 1e-6 * ones
    layer = YoloLoss(TINY_YOLO_ANCHORS, 3, LossOptions(class_weights=weights, focal_gamma=1.5))
    clone = YoloLoss.from_config(layer.get_config())
    assert clone.options == layer.options
    assert clone.options.class_weights == tuple(weights) and clone.options.focal_gamma == 1.5
    with pytest.raises(ValueError, match="2 class weights for 3 classes"):
        YoloLoss(TINY_YOLO_ANCHORS, 3, class_weights=[1, 2])
    with pytest.raises(ValueError, match="focal_gamma must be in"):
        YoloLoss(TINY_YOLO_ANCHORS, 3, focal_gamma=-1)


def test_ignore_mask_uses_boxes_of_every_scale():
    # Image 0: one 64x64 box, encoded on the stride-32 scale only. A stride-16 prediction that covers
    # it with a confident objectness must be ignored (no confidence loss) because of that box.
    anchors, num_classes, hw = TINY_YOLO_ANCHORS, 1, (64, 64)
    boxes = np.array([[[0, 0, 64, 64, 0]], [[0, 0, 0, 0, 0]]], np.float32)
    y_true = preprocess_true_boxes(boxes, hw, anchors, num_classes)
    assert y_true[0][0, ..., 4].sum() == 1 and y_true[1][..., 4].sum() == 0
    out32 = np.zeros((2, 2, 2, 3 * 6), np.float32)
    out16 = np.zeros((2, 4, 4, 3, 6), np.float32)
    out16[:, 1, 1, 2, 2:4] = np.log(64 / anchors[2])  # 64x64 box centred near (24, 24)
    out16[:, 1, 1, 2, 4] = 6.0  # confident objectness
    outputs = [out32, out16.reshape(2, 4, 4, 18)]
    masks = default_masks(6)
    all_scales = reference_loss(outputs, y_true, anchors, num_classes, masks)
    same_scale = reference_loss(outputs, y_true, anchors, num_classes, masks, all_scales=False)
    assert same_scale - all_scales > 2.5  # BCE(0, 6) / batch 2 of image 0 is ignored only with all scales
    got = float(yolo_loss([*outputs, *y_true], anchors, num_classes))
    assert abs(got - all_scales) <= 1e-4 * all_scales


def test_true_boxes_do_not_leak_between_images():
    # Image 0 has a box; image 1 has none but predicts the same box confidently: not ignored there.
    anchors, hw = TINY_YOLO_ANCHORS, (64, 64)
    boxes = np.array([[[0, 0, 64, 64, 0]], [[0, 0, 0, 0, 0]]], np.float32)
    y_true = preprocess_true_boxes(boxes, hw, anchors, 1)
    gathered = gather_true_boxes([tf.constant(y) for y in y_true]).numpy()
    assert gathered.shape[0] == 2 and np.all(gathered[1] == 0)
    np.testing.assert_allclose(gathered[0][np.any(gathered[0] != 0, -1)], [[0.5, 0.5, 1, 1]])
    out16 = np.zeros((2, 4, 4, 3, 6), np.float32)
    out16[:, 1, 1, 2, 2:4] = np.log(64 / anchors[2])
    out16[:, 1, 1, 2, 4] = 6.0
    outputs = [np.zeros((2, 2, 2, 18), np.float32), out16.reshape(2, 4, 4, 18)]
    want = reference_loss(outputs, y_true, anchors, 1, default_masks(6))
    got = float(yolo_loss([*outputs, *y_true], anchors, 1))
    assert abs(got - want) <= 1e-4 * want


def test_gradients_finite_with_degenerate_and_empty_images():
    anchors, hw = TINY_YOLO_ANCHORS, (64, 96)
    boxes = np.zeros((3, 4, 5), np.float32)
    boxes[0, 0] = [10, 10, 10, 30, 1]   # zero width
    boxes[0, 1] = [20, 30, 40, 30, 0]   # zero height
    boxes[1, 0] = [5, 5, 60, 50, 1]
    boxes[1, 1] = [50, 40, 30, 20, 0]   # inverted
    y_true = preprocess_true_boxes(boxes, hw, anchors, 2)  # image 2: no boxes at all
    rng = np.random.default_rng(3)
    outputs = [tf.Variable(rng.normal(0, 3, (3, y.shape[1], y.shape[2], 21)).astype(np.float32))
               for y in y_true]
    with tf.GradientTape() as tape:
        loss = yolo_loss([*outputs, *y_true], anchors, 2)
    grads = tape.gradient(loss, outputs)
    assert np.isfinite(float(loss))
    assert all(np.isfinite(g.numpy()).all() for g in grads)
    assert all(float(tf.reduce_sum(tf.abs(g))) > 0 for g in grads)
    want = reference_loss([o.numpy() for o in outputs], y_true, anchors, 2, default_masks(6))
    assert abs(float(loss) - want) <= 1e-4 * want


def test_all_empty_batch_has_finite_loss_and_gradients():
    anchors = TINY_YOLO_ANCHORS
    y_true = preprocess_true_boxes(np.zeros((2, 3, 5), np.float32), (64, 64), anchors, 1)
    outputs = [tf.Variable(tf.zeros((2, y.shape[1], y.shape[2], 18))) for y in y_true]
    with tf.GradientTape() as tape:
        loss = yolo_loss([*outputs, *y_true], anchors, 1)
    grads = tape.gradient(loss, outputs)
    # Only the no-object confidence term remains: BCE(0, 0) = log 2 per prediction, / batch.
    cells = sum(y.shape[1] * y.shape[2] * 3 for y in y_true)
    np.testing.assert_allclose(float(loss), cells * np.log(2), rtol=1e-6)
    assert all(np.isfinite(g.numpy()).all() for g in grads)


def test_float16_outputs_are_computed_in_float32(rng):
    outputs, y_true = random_case(rng, TINY_YOLO_ANCHORS, (64, 64), num_classes=2)
    half = [o.astype(np.float16) for o in outputs]
    got = yolo_loss([*[tf.constant(h) for h in half], *y_true], TINY_YOLO_ANCHORS, 2)
    assert got.dtype == tf.float32
    want = reference_loss([h.astype(np.float64) for h in half], y_true, TINY_YOLO_ANCHORS, 2,
                          default_masks(6))
    assert abs(float(got) - want) <= 1e-4 * want


def test_yolo_loss_layer_equals_function_and_round_trips_config(rng):
    outputs, y_true = random_case(rng, TINY_YOLO_ANCHORS, (64, 96), num_classes=2)
    layer = YoloLoss(TINY_YOLO_ANCHORS, 2, LossOptions(ignore_iou=.6),
                     anchor_mask=[[3, 4, 5], [1, 2, 3]])
    value = layer([*outputs, *y_true])
    assert tuple(value.shape) == (1,) and value.dtype == tf.float32
    want = reference_loss(outputs, y_true, TINY_YOLO_ANCHORS, 2, [[3, 4, 5], [1, 2, 3]], .6)
    assert abs(float(value[0]) - want) <= 1e-4 * want
    fn = float(yolo_loss([*outputs, *y_true], TINY_YOLO_ANCHORS, 2, LossOptions(ignore_iou=.6),
                         anchor_mask=[[3, 4, 5], [1, 2, 3]]))
    assert abs(fn - float(value[0])) <= 1e-6 * fn
    config = layer.get_config()
    assert config["anchors"] == TINY_YOLO_ANCHORS.tolist() and config["anchor_mask"] == [[3, 4, 5], [1, 2, 3]]
    clone = YoloLoss.from_config(config)
    assert clone.get_config() == config
    np.testing.assert_allclose(clone([*outputs, *y_true]).numpy(), value.numpy(), rtol=1e-6)


def test_a_0x_config_of_separate_keywords_builds_the_same_layer():
    """0.x model files hold the options as separate keywords, keras-yolo3's ``ignore_thresh``
    among them: they load as the one LossOptions (the release fixtures load whole files)."""
    options = LossOptions(ignore_iou=.6, box_loss="ciou", objectness="iou", box_gain=2.0,
                          class_weights=[1, 2], focal_gamma=1.5)
    layer = YoloLoss(TINY_YOLO_ANCHORS, 2, options)
    old = {k: v for k, v in layer.get_config().items() if k != "options"}
    old.update(ignore_thresh=.6, box_loss="ciou", label_smoothing=0.0, objectness="iou",
               box_gain=2.0, class_gain=1.0, class_weights=[1.0, 2.0], focal_gamma=1.5)
    assert YoloLoss.from_config(old).options == options
    with pytest.raises(TypeError, match="loss options given twice"):
        YoloLoss(TINY_YOLO_ANCHORS, 2, options, box_gain=2.0)
    with pytest.raises(TypeError, match="must be a LossOptions"):
        YoloLoss(TINY_YOLO_ANCHORS, 2, 0.6)
    with pytest.raises(TypeError, match="'ignore' is not a loss option"):
        LossOptions.from_config({"ignore": 0.6})


def test_identity_loss_returns_prediction():
    y_pred = tf.constant([3.5])
    assert identity_loss(tf.zeros((4,)), y_pred) is y_pred


def test_wrong_number_of_tensors_refused(rng):
    outputs, y_true = random_case(rng, TINY_YOLO_ANCHORS, (64, 64), num_classes=2)
    with pytest.raises(ValueError, match="2 outputs and 2 y_true"):
        yolo_loss([*outputs, y_true[0]], TINY_YOLO_ANCHORS, 2)


def test_training_model_loss_is_float32_under_mixed_precision(rng):
    import keras

    from yolo3.modeling.bodies import build_body
    from yolo3.modeling.loss import yolo_training_model
    keras.mixed_precision.set_global_policy("mixed_float16")
    try:
        body = build_body("tiny", 2, input_shape=(64, 64))
        model = yolo_training_model(body, TINY_YOLO_ANCHORS, 2)
    finally:
        keras.mixed_precision.set_global_policy("float32")
    assert body.outputs[0].dtype == "float16"
    images = rng.uniform(0, 1, (2, 64, 64, 3)).astype(np.float32)
    y_true = preprocess_true_boxes(np.array([[[4, 8, 40, 50, 1]], [[0, 0, 0, 0, 0]]], np.float32),
                                   (64, 64), TINY_YOLO_ANCHORS, 2)
    loss = model((images, *y_true))
    assert loss.dtype == tf.float32 and tuple(loss.shape) == (1,)
    outputs = [np.asarray(o, np.float64) for o in body(images)]
    want = reference_loss(outputs, y_true, TINY_YOLO_ANCHORS, 2, default_masks(6))
    assert abs(float(loss[0]) - want) <= 1e-4 * want
