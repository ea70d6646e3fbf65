"""yolo3.training.models: the body and its training model, weights by name (heads transferred or
skipped), output priors, the recipe handed to the loss."""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from yolo3.config.loss_options import LossOptions
from yolo3.config.train_config import ConfigError
from yolo3.training.data_step import prepare_data
from yolo3.training.models import build_models
from yolo3.training.placement import pick_strategy


def test_pick_strategy_and_build_models(dataset, tmp_path, step_config):
    config = step_config()
    data = prepare_data(config)
    placement = pick_strategy(config, len(data.records))
    assert (placement.replicas, placement.global_batch, placement.steps) == (1, 2, 4)
    assert placement.strategy is None and not placement.uses_wrapper
    assert placement.describe("wrapper") == "one device"  # the stage line: nothing is split
    two = dataclasses.replace(placement, devices=["/cpu:0", "/cpu:1"], replicas=2)
    assert two.uses_wrapper and two.describe("wrapper") == "wrapper"
    with pytest.raises(ConfigError, match="fewer than one global batch"):
        pick_strategy(step_config(batch_size=16), len(data.records))
    body, template, skipped = build_models(config, data, placement)
    assert body.input_shape == (None, 64, 64, 3) and skipped == []
    assert [t.name for t in template.inputs] == ["image", "y_true_s32", "y_true_s16", "true_boxes"]


@pytest.mark.parametrize("transfer", [True, False])
def test_build_models_transfers_or_skips_heads_of_another_class_count(dataset, tmp_path, step_config, transfer):
    from yolo3.modeling.bodies import build_body
    coco = build_body("tiny", 80, input_shape=(64, 64))
    rng = np.random.default_rng(0)
    coco.set_weights([rng.normal(size=w.shape).astype("float32") for w in coco.get_weights()])
    coco.save_weights(tmp_path / "coco.weights.h5")
    config = step_config(weights=str(tmp_path / "coco.weights.h5"),
                     head_transfer=transfer)
    data = prepare_data(config)
    body, _, skipped = build_models(config, data, pick_strategy(config, len(data.records)))
    kernel = body.get_layer("output_s32").get_weights()[0].reshape(1, 1, 512, 3, 8)
    theirs = coco.get_layer("output_s32").get_weights()[0].reshape(1, 1, 512, 3, 85)
    if transfer:  # box and objectness from the file; the class channels are the model's own
        assert skipped == []
        np.testing.assert_array_equal(kernel[..., :5], theirs[..., :5])
    else:
        assert sorted(name for name, _ in skipped) == ["output_s16", "output_s32"]
        assert not np.array_equal(kernel[..., :5], theirs[..., :5])
    assert not np.array_equal(kernel[..., 5:], theirs[..., 5:8])


def test_an_anchor_free_variant_trains_on_boxes_from_its_priors(dataset, tmp_path, step_config):
    config = step_config(model="tiny-af", box_gain=2.0, class_gain=0.5)
    data = prepare_data(config)
    assert data.masks == [] and data.anchors.shape == (0, 2) and data.info().head == data.spec.head
    body, template, _ = build_models(config, data, pick_strategy(config, len(data.records)))
    assert [t.name for t in template.inputs] == ["image", "true_boxes"]
    loss = template.get_layer("anchor_free_loss")
    assert (loss.options.box_gain, loss.options.class_gain, loss.head) == (2.0, 0.5,
                                                                            data.spec.head)
    per_image = np.mean([len(r.boxes) for r in data.records])
    for stride in (32, 16):
        cells = (64 // stride) ** 2
        _, box_bias = body.get_layer(f"head_s{stride}_box_pred").get_weights()
        _, class_bias = body.get_layer(f"head_s{stride}_cls_pred").get_weights()
        np.testing.assert_allclose(box_bias, data.spec.head.bias_priors(3, cells,
                                                                        per_image)[0])
        p = per_image / (cells * 3)
        np.testing.assert_allclose(class_bias, np.full(3, np.log(p / (1 - p))), rtol=1e-5)


def test_an_anchor_free_variant_trains_at_several_sizes(dataset, tmp_path, step_config):
    """Multi-scale training: the body takes any size, and the loss finds the cells of each."""
    import keras

    from yolo3.modeling.loss import identity_loss
    config = step_config(model="tiny-af", multi_scale=(64, 96))
    data = prepare_data(config)
    body, template, _ = build_models(config, data, pick_strategy(config, len(data.records)))
    assert body.input_shape == (None, None, None, 3)
    template.compile(optimizer=keras.optimizers.SGD(1e-3), loss=identity_loss)
    boxes = np.zeros((2, config.data.max_boxes, 5), np.float32)
    boxes[:, 0] = [4, 4, 40, 40, 1]
    for side in (64, 96):
        images = np.random.default_rng(side).uniform(0, 1, (2, side, side, 3)).astype(np.float32)
        assert np.isfinite(template.train_on_batch((images, boxes), np.zeros(2)))


@pytest.mark.parametrize("objectness", ["one", "iou"])
def test_build_models_hands_the_recipe_to_the_loss(dataset, tmp_path, step_config, objectness):
    config = step_config(objectness=objectness, box_loss="giou", label_smoothing=0.1,
                     box_gain=2.0, class_gain=0.5, ignore_iou=0.7)
    data = prepare_data(config)
    _, template, _ = build_models(config, data, pick_strategy(config, len(data.records)))
    loss = template.get_layer("yolo_loss")
    assert loss.options == LossOptions(ignore_iou=0.7, box_loss="giou", label_smoothing=0.1,
                                       objectness=objectness, box_gain=2.0, class_gain=0.5)
