"""yolo3.modeling.heads.training_model: for each head, the loss of the training model it picks
equals the loss of that head's own training model built directly with the same options, on the
same body and batch; the options reach the loss layer's saved config."""
from __future__ import annotations

import numpy as np
import pytest

from yolo3.benchmarks.workload import NUM_CLASSES, random_training_batch
from yolo3.config.loss_options import LossOptions
from yolo3.config.specs import get_spec
from yolo3.modeling.anchor_free_loss import anchor_free_training_model
from yolo3.modeling.bodies import build_spec_body
from yolo3.modeling.heads import training_model
from yolo3.modeling.loss import yolo_training_model

SIZE, MAX_BOXES = 64, 10


def _loss(model, inputs) -> float:
    return float(np.asarray(model(list(inputs), training=False)).reshape(-1)[0])


def test_the_anchor_heads_model_is_yolo_training_model_with_the_options():
    spec = get_spec("tiny")
    body = build_spec_body(spec, NUM_CLASSES, 3, (SIZE, SIZE))
    weights = np.linspace(0.5, 2.0, NUM_CLASSES)
    options = LossOptions(ignore_iou=0.6, box_loss="ciou", objectness="iou", box_gain=2.0,
                          class_gain=0.5, class_weights=weights, focal_gamma=1.0,
                          label_smoothing=0.05)
    picked = training_model(body, spec.default_head(), NUM_CLASSES, MAX_BOXES, options)
    direct = yolo_training_model(body, spec.default_anchors(), NUM_CLASSES, options,
                                 anchor_mask=spec.default_masks(), max_boxes=MAX_BOXES)
    inputs, _ = random_training_batch(spec, SIZE, 2, MAX_BOXES)
    assert _loss(picked, inputs) == pytest.approx(_loss(direct, inputs), rel=1e-6)
    assert _loss(picked, inputs) != pytest.approx(
        _loss(training_model(body, spec.default_head(), NUM_CLASSES, MAX_BOXES), inputs),
        rel=1e-3)  # the options changed the loss
    config = picked.get_layer("yolo_loss").get_config()["options"]
    assert (config["box_loss"], config["objectness"], config["ignore_iou"]) == ("ciou", "iou", 0.6)
    np.testing.assert_allclose(config["class_weights"], weights)


def test_the_anchor_free_heads_model_is_its_own_with_the_options():
    spec = get_spec("tiny-af")
    body = build_spec_body(spec, NUM_CLASSES, None, (SIZE, SIZE))
    options = LossOptions(box_gain=3.0, class_gain=0.7, focal_gamma=2.0)
    picked = training_model(body, spec.default_head(), NUM_CLASSES, MAX_BOXES, options)
    direct = anchor_free_training_model(body, spec.head, NUM_CLASSES, MAX_BOXES,
                                        LossOptions(box_gain=3.0, class_gain=0.7,
                                                    focal_gamma=2.0))
    inputs, _ = random_training_batch(spec, SIZE, 2, MAX_BOXES)
    assert len(picked.inputs) == 2  # the image and the padded boxes
    assert _loss(picked, inputs) == pytest.approx(_loss(direct, inputs), rel=1e-6)
    assert picked.get_layer("anchor_free_loss").get_config()["options"]["focal_gamma"] == 2.0


def test_class_weights_of_another_class_count_are_refused_before_building():
    spec = get_spec("tiny")
    body = build_spec_body(spec, NUM_CLASSES, 3, (SIZE, SIZE))
    with pytest.raises(ValueError, match=f"2 class weights for {NUM_CLASSES} classes"):
        training_model(body, spec.default_head(), NUM_CLASSES, MAX_BOXES,
                       LossOptions(class_weights=(1.0, 2.0)))
