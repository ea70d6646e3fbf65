"""The anchor-free head kind (yolo3.heads.anchor_free): its training model is the task-aligned
loss with the options, its targets the padded boxes alone, its decoding the float64 reading of
the distance distributions, its output convolutions the (distances, classes) pairs."""
from __future__ import annotations

import numpy as np
import pytest

from yolo3.benchmarks.workload import NUM_CLASSES, random_training_batch
from yolo3.config.loss_options import LossOptions
from yolo3.config.specs import get_spec
from yolo3.data.dataset_config import TargetEncoding
from yolo3.heads import AnchorFreeHead, as_head
from yolo3.modeling.anchor_free_loss import anchor_free_training_model
from yolo3.modeling.bodies import build_spec_body

SIZE, MAX_BOXES = 64, 10


def _loss(model, inputs) -> float:
    return float(np.asarray(model(list(inputs), training=False)).reshape(-1)[0])


def test_the_training_model_is_its_own_with_the_options():
    spec = get_spec("tiny-af")
    head = as_head(spec.default_head())
    assert isinstance(head, AnchorFreeHead)
    body = build_spec_body(spec, NUM_CLASSES, None, (SIZE, SIZE))
    options = LossOptions(box_gain=3.0, class_gain=0.7, focal_gamma=2.0)
    picked = head.training_model(body, NUM_CLASSES, MAX_BOXES, options)
    direct = anchor_free_training_model(body, spec.head, NUM_CLASSES, MAX_BOXES, options)
    inputs, _ = random_training_batch(spec, SIZE, 2, MAX_BOXES)
    assert len(picked.inputs) == 2  # the image and the padded boxes
    assert _loss(picked, inputs) == pytest.approx(_loss(direct, inputs), rel=1e-6)
    assert picked.get_layer("anchor_free_loss").get_config()["options"]["focal_gamma"] == 2.0


def test_the_targets_are_the_padded_boxes_alone():
    head = as_head(get_spec("tiny-af").default_head())
    assert head.target_encoding(4, assign_iou=0.35) == TargetEncoding(None, 4, true_boxes=True)
    assert head.target_encoding(4, true_boxes=False).true_boxes  # the loss assigns from them


def _reference(outputs, strides, reg_max, num_classes):
    """Every cell, float64: each side's expected distance (softmax over ``reg_max`` bins) in
    strides from the cell's centre -> ``x1, y1, x2, y2`` input pixels; sigmoid class scores."""
    boxes, scores = [], []
    for out, stride in zip(outputs, strides):
        out = np.asarray(out, np.float64)[0]
        gh, gw, _ = out.shape
        for j in range(gh):
            for i in range(gw):
                logits = out[j, i, :4 * reg_max].reshape(4, reg_max)
                p = np.exp(logits - logits.max(-1, keepdims=True))
                d = (p / p.sum(-1, keepdims=True)) @ np.arange(reg_max) * stride
                cx, cy = (i + 0.5) * stride, (j + 0.5) * stride
                boxes.append([cx - d[0], cy - d[1], cx + d[2], cy + d[3]])
                scores.append(1 / (1 + np.exp(-out[j, i, 4 * reg_max:])))
    return np.array(boxes), np.array(scores)


def test_decoding_reads_the_distance_distributions(rng):
    head = AnchorFreeHead((32, 16), 4)
    outputs = [rng.normal(size=(1, 2, 2, 16 + 3)).astype(np.float32),
               rng.normal(size=(1, 4, 4, 16 + 3)).astype(np.float32)]
    boxes, scores = head.raw_boxes_and_scores(outputs, 3, np.array([[64, 64]]), (64, 64))
    want_boxes, want_scores = _reference(outputs, (32, 16), 4, 3)
    np.testing.assert_allclose(np.asarray(boxes)[0], want_boxes, rtol=1e-4, atol=1e-3)
    np.testing.assert_allclose(np.asarray(scores)[0], want_scores, rtol=1e-5, atol=1e-6)
    # letterboxed: a 128 x 64 (w x h) image fills the 64 x 64 input at 1/2, 16 px of grey above
    wide, _ = head.raw_boxes_and_scores(outputs, 3, np.array([[64, 128]]), (64, 64))
    np.testing.assert_allclose(np.asarray(wide)[0], (want_boxes - [0, 16, 0, 16]) * 2,
                               rtol=1e-4, atol=2e-3)


def test_its_output_convolutions_are_the_distance_and_class_predictions():
    spec = get_spec("tiny-af")
    body = build_spec_body(spec, NUM_CLASSES, None, (SIZE, SIZE))
    head = as_head(spec.default_head())
    groups = head.output_layer_groups(body)
    assert len(groups) == len(head.strides)
    for group in groups:
        biases = head.bias_priors(NUM_CLASSES, 4, 2.0)
        assert len(group) == len(biases) == 2
        for name, bias in zip(group, biases):
            assert body.get_layer(name).get_weights()[1].shape == bias.shape


def test_it_has_no_anchors_to_refit_show_or_write():
    head = as_head(get_spec("tiny-af").default_head())

    def choose(anchors):
        raise AssertionError("an anchor-free head asks for no anchors")
    assert head.refit_anchors(choose) is head
    assert head.anchor_sizes() is None and head.run_files() == {}
    assert head.anchor_array().shape == (0, 2) and head.mask_lists() == []


def test_darknet_has_no_layer_for_it_and_its_variants_load_their_bases_weights():
    from yolo3.config.anchor_free_head import AnchorFreeHead
    from yolo3.config.heads import AnchorHead as AnchorFacts
    assert AnchorFacts.darknet_layer and not AnchorFreeHead.darknet_layer
    assert get_spec("tiny-af").darknet_layout is None and get_spec("tiny").darknet_layout == "tiny"
    assert get_spec("tiny-af").darknet_sources[0] == "tiny"
    assert get_spec("yolov3").darknet_sources[0] == "yolov3"
