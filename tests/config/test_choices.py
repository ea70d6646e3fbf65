"""yolo3.config.choices: every listed value is one that the code acting on it accepts, and nothing
else is (so the command line's choices, the settings' rules and the code agree)."""
from __future__ import annotations

import pytest

from yolo3.config import choices


def test_every_box_loss_is_computed_and_others_refused():
    import numpy as np

    from yolo3.modeling.loss import iou_variant
    a = np.array([[[10., 10., 40., 40.]]], np.float32)
    for name in choices.BOX_LOSSES:
        if name != "mse":  # mse is keras-yolo3's coordinate loss, not an IoU
            assert np.isfinite(np.asarray(iou_variant(a, a, name))).all()
    from yolo3.modeling.loss import YoloLoss
    with pytest.raises(ValueError, match="box_loss must be one of"):
        YoloLoss(np.ones((6, 2)), 2, box_loss="l1")


def test_every_optimizer_jit_and_precision_is_accepted():
    from yolo3.config.precision import resolve_training_precision
    from yolo3.training.recipe import make_optimizer, use_jit
    for name in choices.OPTIMIZERS:
        assert make_optimizer(name, 0.01).__class__.__name__.lower() == name
    for jit in choices.JIT_CHOICES:
        use_jit(jit, on_gpu=False)
    for precision in choices.TRAINING_PRECISIONS:
        assert resolve_training_precision(precision, gpu=False) in choices.TRAINING_PRECISIONS
    with pytest.raises(ValueError):
        make_optimizer("rmsprop", 0.01)
    with pytest.raises(ValueError):
        resolve_training_precision("float64", gpu=False)


def test_every_augment_preset_and_strategy_is_known():
    from yolo3.data.augment import AugmentConfig
    from yolo3.training.distribute import make_strategy
    for name in choices.AUGMENT_PRESETS:
        AugmentConfig.preset(name)
    with pytest.raises(ValueError):
        AugmentConfig.preset("heavy")
    assert make_strategy("wrapper") is None and set(choices.STRATEGIES) == {
        "wrapper", "mirrored", "multiworker"}
    with pytest.raises(ValueError, match="unknown strategy"):
        make_strategy("ring")
