"""yolo3.modeling.anchor_free_loss: the anchor-free training model (its output is the loss of
:mod:`yolo3.ops.anchor_free`, tested against a NumPy reference in tests/ops/test_anchor_free.py), its
inputs, and the bodies it refuses. Build, save, reload and fit: tests/modeling/test_layers.py's harness."""
from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

from yolo3.config.anchor_free_head import AnchorFreeHead
from yolo3.config.loss_options import LossOptions
from yolo3.config.specs import get_spec
from yolo3.modeling.anchor_free_loss import AnchorFreeLoss, anchor_free_training_model
from yolo3.modeling.bodies import build_spec_body
from yolo3.ops import anchor_free

HW = (64, 96)


def test_the_training_model_outputs_the_loss_of_its_body():
    spec = get_spec("tiny-af")
    body = build_spec_body(spec, 3, input_shape=HW)
    model = anchor_free_training_model(body, spec.head, 3, max_boxes=4,
                                       options=LossOptions(box_gain=2.0))
    assert [i.name for i in model.inputs] == ["image", "true_boxes"]
    assert tuple(model.inputs[1].shape) == (None, 4, 5)
    images = np.random.default_rng(0).uniform(0, 1, (2, *HW, 3)).astype(np.float32)
    boxes = np.zeros((2, 4, 5), np.float32)
    boxes[0, 0] = [8, 8, 60, 50, 2]
    boxes[1, :2] = [[0, 0, 40, 63, 0], [50, 20, 90, 60, 1]]
    loss = np.asarray(model((images, boxes)))
    terms = anchor_free.loss_terms(body(images), tf.constant(boxes), spec.head, 3,
                                   LossOptions(box_gain=2.0))
    assert loss.shape == (1,) and loss.dtype == np.float32
    assert loss[0] == pytest.approx(float(terms["box"] + terms["dfl"] + terms["class"]), rel=1e-5)
    layer = model.get_layer("anchor_free_loss")
    assert layer.supports_jit and layer.head == spec.head and layer.options.box_gain == 2.0


def test_bodies_that_do_not_fit_the_head_are_refused():
    spec = get_spec("tiny-af")
    body = build_spec_body(spec, 3, input_shape=HW)
    with pytest.raises(ValueError, match="expected 4 x 8 distance logits \\+ 5 classes = 37"):
        anchor_free_training_model(body, spec.head, 5, max_boxes=4)
    with pytest.raises(ValueError, match="3 outputs, the head 2 strides"):
        anchor_free_training_model(body, AnchorFreeHead((32, 16), 8), 3, max_boxes=4)
    anchor_body = build_spec_body(get_spec("tiny"), 3, input_shape=HW)
    with pytest.raises(ValueError, match="has 24 channels"):
        anchor_free_training_model(anchor_body, AnchorFreeHead((32, 16), 8), 3, max_boxes=4)
    with pytest.raises(ValueError, match="box_gain must be a positive number"):
        AnchorFreeLoss((32, 16), 8, 3, box_gain=0.0)


def test_the_loss_layer_carries_class_weights_and_focal_gamma_through_its_config():
    from yolo3.config.specs import get_spec
    from yolo3.modeling.anchor_free_loss import AnchorFreeLoss
    head = get_spec("tiny-af").head
    layer = AnchorFreeLoss(head.strides, head.reg_max, 3, class_weights=[0.5, 2, 1],
                           focal_gamma=1.5)
    clone = AnchorFreeLoss.from_config(layer.get_config())
    assert clone.options.class_weights == (0.5, 2.0, 1.0) and clone.options.focal_gamma == 1.5
    assert clone.get_config()["options"] == layer.options.to_config()
    with pytest.raises(ValueError, match="2 class weights for 3 classes"):
        AnchorFreeLoss(head.strides, head.reg_max, 3, class_weights=[1, 2])
    with pytest.raises(ValueError, match="focal_gamma must be in"):
        AnchorFreeLoss(head.strides, head.reg_max, 3, focal_gamma=9)
