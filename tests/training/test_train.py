"""yolo3.training.train: the loop's settings check (the steps each in their own test module; end-to-end
runs in tests/features/test_train_cli and test_train_recipe)."""
from __future__ import annotations

import pytest

from yolo3.config.train_config import ConfigError
from yolo3.training.train import validate_config


def test_validate_config_names_the_argument(dataset, tmp_path, step_config):
    with pytest.raises(ConfigError, match="variant: unknown variant 'yolo9'") as caught:
        validate_config(step_config(model="yolo9"))
    assert caught.value.settings == ("variant",)
    with pytest.raises(ConfigError, match="input_size: .*multiple of 32"):
        validate_config(step_config(input_size=70))
    with pytest.raises(ConfigError, match=r"need freeze_epochs \(9\) <= epochs \(5\)") as caught:
        validate_config(step_config(freeze_epochs=9))
    assert caught.value.settings == ("freeze_epochs", "epochs")
    flags = {"freeze_epochs": "--freeze-epochs", "epochs": "--epochs"}
    assert caught.value.worded(flags.get).startswith("need --freeze-epochs (9) <= --epochs (5)")
