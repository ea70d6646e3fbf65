"""yolo3.config.loss_options: the defaults are keras-yolo3's loss (YoloLoss's own defaults), every
value is checked by its setting's rule, and a run's recipe maps field by field."""
from __future__ import annotations

import dataclasses
import inspect

import numpy as np
import pytest

from yolo3.config.loss_options import LossOptions
from yolo3.config.train_config import RecipeSettings
from yolo3.core.errors import SettingError
from yolo3.modeling.loss import YoloLoss


def test_the_defaults_are_keras_yolo3s_loss():
    from yolo3.compat.keras_yolo3 import yolo_loss as keras_yolo3_loss
    options = LossOptions()
    assert options.ignore_iou == inspect.signature(keras_yolo3_loss).parameters[
        "ignore_thresh"].default
    assert (options.box_loss, options.label_smoothing, options.objectness, options.box_gain,
            options.class_gain, options.class_weights, options.focal_gamma) == (
        "mse", 0.0, "one", 1.0, 1.0, None, 0.0)
    assert YoloLoss([[10, 14]] * 6, 2).options == options


def test_the_config_round_trips_as_plain_values():
    import json
    options = LossOptions(ignore_iou=0.7, box_loss="giou", class_weights=[1, 2.5], focal_gamma=2)
    config = json.loads(json.dumps(options.to_config()))
    assert LossOptions.from_config(config) == options and LossOptions.from_config(None) == LossOptions()
    assert LossOptions.from_config({"ignore_thresh": 0.7}).ignore_iou == 0.7  # 0.x files' name
    kwargs = {"ignore_thresh": 0.7, "box_gain": 2.0, "name": "yolo_loss"}
    assert LossOptions.split_keywords(kwargs) == {"ignore_thresh": 0.7, "box_gain": 2.0}
    assert kwargs == {"name": "yolo_loss"}


@pytest.mark.parametrize("setting, value", [("box_loss", "l1"), ("objectness", "half"),
                                            ("ignore_iou", 0.0), ("box_gain", -1.0),
                                            ("focal_gamma", 9.0), ("label_smoothing", 1.0)])
def test_a_bad_value_is_refused_naming_its_setting(setting, value):
    with pytest.raises(SettingError, match=setting):
        LossOptions(**{setting: value})


def test_class_weights_become_a_tuple_and_are_checked_per_class():
    options = LossOptions(class_weights=np.array([1.0, 2.5]))
    assert options.class_weights == (1.0, 2.5)
    assert options.for_classes(2) is options
    with pytest.raises(ValueError, match="2 class weights for 3 classes"):
        options.for_classes(3)
    with pytest.raises(ValueError, match="non-negative"):
        LossOptions(class_weights=[1.0, float("nan")])
    with pytest.raises(dataclasses.FrozenInstanceError):
        options.box_gain = 2.0


def test_a_recipe_maps_field_by_field():
    recipe = RecipeSettings(box_loss="giou", objectness="iou", box_gain=2.0, class_gain=0.5,
                            focal_gamma=1.5, ignore_iou=0.7, label_smoothing=0.1)
    options = LossOptions.from_recipe(recipe, [1.0, 3.0])
    assert options == LossOptions(ignore_iou=0.7, box_loss="giou", label_smoothing=0.1,
                                  objectness="iou", box_gain=2.0, class_gain=0.5,
                                  class_weights=(1.0, 3.0), focal_gamma=1.5)
    assert LossOptions.from_recipe(RecipeSettings()).class_weights is None


def test_the_gains_check_names_the_gain():
    from yolo3.config.loss_options import check_gains
    check_gains(2.0, 0.5)
    with pytest.raises(SettingError, match="class_gain"):
        check_gains(1.0, 0.0)
    with pytest.raises(SettingError, match="box_gain"):
        check_gains(float("nan"), 1.0)
