"""The anchor head kind (yolo3.heads.anchor): its training model is keras-yolo3's loss with the
options, its targets the y_true maps and padded boxes, its decoding the float64 reading of its
anchors and masks, its output convolutions the body's outputs."""
from __future__ import annotations

import numpy as np
import pytest

from yolo3.benchmarks.workload import NUM_CLASSES, random_training_batch
from yolo3.config.loss_options import LossOptions
from yolo3.config.specs import get_spec
from yolo3.heads import AnchorHead, as_head
from yolo3.modeling.bodies import build_spec_body, output_layer_names
from yolo3.modeling.loss import yolo_training_model
from yolo3.ops.anchors import TINY_YOLO_ANCHORS

SIZE, MAX_BOXES = 64, 10


def _loss(model, inputs) -> float:
    return float(np.asarray(model(list(inputs), training=False)).reshape(-1)[0])


def test_the_training_model_is_yolo_training_model_with_the_options():
    spec = get_spec("tiny")
    head = as_head(spec.default_head())
    assert isinstance(head, AnchorHead)
    body = build_spec_body(spec, NUM_CLASSES, 3, (SIZE, SIZE))
    weights = np.linspace(0.5, 2.0, NUM_CLASSES)
    options = LossOptions(ignore_iou=0.6, box_loss="ciou", objectness="iou", box_gain=2.0,
                          class_gain=0.5, class_weights=weights, focal_gamma=1.0,
                          label_smoothing=0.05)
    picked = head.training_model(body, NUM_CLASSES, MAX_BOXES, options)
    direct = yolo_training_model(body, spec.default_anchors(), NUM_CLASSES, options,
                                 anchor_mask=spec.default_masks(), max_boxes=MAX_BOXES)
    inputs, _ = random_training_batch(spec, SIZE, 2, MAX_BOXES)
    assert _loss(picked, inputs) == pytest.approx(_loss(direct, inputs), rel=1e-6)
    assert _loss(picked, inputs) != pytest.approx(
        _loss(head.training_model(body, NUM_CLASSES, MAX_BOXES), inputs),
        rel=1e-3)  # the options changed the loss
    config = picked.get_layer("yolo_loss").get_config()["options"]
    assert (config["box_loss"], config["objectness"], config["ignore_iou"]) == ("ciou", "iou", 0.6)
    np.testing.assert_allclose(config["class_weights"], weights)


def test_class_weights_of_another_class_count_are_refused_before_building():
    spec = get_spec("tiny")
    body = build_spec_body(spec, NUM_CLASSES, 3, (SIZE, SIZE))
    with pytest.raises(ValueError, match=f"2 class weights for {NUM_CLASSES} classes"):
        as_head(spec.default_head()).training_model(body, NUM_CLASSES, MAX_BOXES,
                                                    LossOptions(class_weights=(1.0, 2.0)))


def test_the_targets_are_the_y_true_maps_of_its_anchors_and_masks():
    head = as_head(get_spec("yolov3").default_head())
    encoding = head.target_encoding(4, assign_iou=0.35)
    np.testing.assert_array_equal(encoding.anchors, get_spec("yolov3").default_anchors())
    assert (encoding.masks, encoding.assign_iou, encoding.true_boxes) == (
        [[6, 7, 8], [3, 4, 5], [0, 1, 2]], 0.35, True)
    plain = head.target_encoding(4, true_boxes=False)
    assert (plain.masks, plain.assign_iou, plain.true_boxes) == (head.mask_lists(), 1.0, False)


def _sigmoid(x):
    return 1 / (1 + np.exp(-x))


def _reference(outputs, anchors, masks, num_classes, input_hw):
    """Every candidate, float64, one cell and anchor at a time: ``x1, y1, x2, y2`` input pixels
    (the image is the input's size: no letterbox) and objectness x class scores."""
    boxes, scores = [], []
    in_h, in_w = input_hw
    for out, mask in zip(outputs, masks):
        out = np.asarray(out, np.float64)
        _, gh, gw, _ = out.shape
        t = out.reshape(gh, gw, len(mask), 5 + num_classes)
        for j in range(gh):
            for i in range(gw):
                for k, a in enumerate(mask):
                    cx = (_sigmoid(t[j, i, k, 0]) + i) / gw * in_w
                    cy = (_sigmoid(t[j, i, k, 1]) + j) / gh * in_h
                    w, h = np.exp(t[j, i, k, 2:4]) * anchors[a]
                    boxes.append([cx - w / 2, cy - h / 2, cx + w / 2, cy + h / 2])
                    scores.append(_sigmoid(t[j, i, k, 4]) * _sigmoid(t[j, i, k, 5:]))
    return np.array(boxes), np.array(scores)


def test_decoding_reads_the_maps_with_its_anchors_and_masks(rng):
    masks = [[3, 4, 5], [1, 2, 3]]  # keras-yolo3's tiny masks, not the default split
    head = AnchorHead.of(TINY_YOLO_ANCHORS, masks)
    outputs = [rng.normal(size=(1, 2, 2, 24)).astype(np.float32),
               rng.normal(size=(1, 4, 4, 24)).astype(np.float32)]
    boxes, scores = head.raw_boxes_and_scores(outputs, 3, np.array([[64, 64]]), (64, 64))
    want_boxes, want_scores = _reference(outputs, np.asarray(TINY_YOLO_ANCHORS), masks, 3,
                                         (64, 64))
    np.testing.assert_allclose(np.asarray(boxes)[0], want_boxes, rtol=1e-4, atol=1e-3)
    np.testing.assert_allclose(np.asarray(scores)[0], want_scores, rtol=1e-4, atol=1e-6)
    # decode: the threshold and NMS over the same candidates, the input size from the maps
    got_boxes, got_scores, _, valid = head.decode(outputs, 3, np.array([[64, 64]]),
                                                  score_threshold=0.3, iou_threshold=1.0)
    kept = np.sort(want_scores.reshape(-1)[want_scores.reshape(-1) > 0.3])[::-1][:20]
    assert int(np.asarray(valid)[0]) == len(kept)
    np.testing.assert_allclose(np.asarray(got_scores)[0, :len(kept)], kept, rtol=1e-4)


def test_its_output_convolutions_are_the_bodys_outputs():
    spec = get_spec("tiny")
    body = build_spec_body(spec, NUM_CLASSES, 3, (SIZE, SIZE))
    head = as_head(spec.default_head())
    groups = head.output_layer_groups(body)
    assert groups == [(name,) for name in output_layer_names(body)] and len(groups) == 2
    for group in groups:  # where the priors go: one bias per convolution of the group
        biases = head.bias_priors(NUM_CLASSES, 4, 2.0)
        assert len(biases) == len(group)
        for name, bias in zip(group, biases):
            assert body.get_layer(name).get_weights()[1].shape == bias.shape


def test_its_anchors_are_refitted_with_the_default_masks_over_its_outputs():
    head = as_head(get_spec("tiny").default_head())
    seen = []

    def choose(anchors):
        seen.append(anchors.copy())
        return anchors[:, ::-1] * 2  # any (N, 2): another shape and size
    refitted = head.refit_anchors(choose)
    np.testing.assert_array_equal(seen[0], head.anchor_array())  # it was given its anchors
    assert isinstance(refitted, AnchorHead) and refitted.num_scales == head.num_scales == 2
    np.testing.assert_allclose(refitted.anchor_array(), head.anchor_array()[:, ::-1] * 2)
    assert refitted.mask_lists() == [[3, 4, 5], [0, 1, 2]]  # the largest on the largest stride
    four = head.refit_anchors(lambda a: a[:4])  # 4 anchors over 2 outputs: 2 each
    assert four.mask_lists() == [[2, 3], [0, 1]]
    with pytest.raises(ValueError):
        head.refit_anchors(lambda a: a[:5])  # 5 anchors cannot be split over 2 outputs


def test_it_shows_its_anchors_and_writes_them_to_the_run_folder():
    head = AnchorHead.of(TINY_YOLO_ANCHORS)
    np.testing.assert_array_equal(head.anchor_sizes(), head.anchor_array())
    from yolo3.ops.anchors import parse_anchors
    files = head.run_files()
    assert list(files) == ["anchors.txt"]
    np.testing.assert_allclose(parse_anchors(files["anchors.txt"], "anchors.txt"),
                               head.anchor_array(), atol=0.01)


def test_it_describes_itself_with_darknets_anchors_line():
    assert AnchorHead.of(TINY_YOLO_ANCHORS).describe().startswith("anchor head, anchors 10,14")
    assert as_head(get_spec("tiny-af").default_head()).describe() == "anchor-free head"
