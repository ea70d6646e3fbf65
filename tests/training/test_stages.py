"""yolo3.training.stages: which stages run (the frozen backbone, then all layers), after a resume too."""
from __future__ import annotations

from yolo3.training.stages import Stage, stages


def test_stages_after_a_resume(dataset, tmp_path, step_config):
    config = step_config()
    assert stages(config, 0) == [Stage(0, 2, True), Stage(2, 5, False)]
    assert stages(config, 3) == [Stage(2, 5, False)]
    assert stages(config, 5) == []
    assert stages(step_config(freeze_epochs=0), 0) == [Stage(0, 5, False)]
