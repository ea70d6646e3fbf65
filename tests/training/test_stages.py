"""yolo3.training.stages: which stages run (the frozen backbone, then all layers), after a resume too."""
from __future__ import annotations

import pytest

from yolo3.training.stages import Stage, stages


def test_stages_after_a_resume(dataset, tmp_path, step_config):
    config = step_config()
    assert stages(config, 0) == [Stage(0, 2, True), Stage(2, 5, False)]
    assert stages(config, 3) == [Stage(2, 5, False)]
    assert stages(config, 5) == []
    assert stages(step_config(freeze_epochs=0), 0) == [Stage(0, 5, False)]


@pytest.mark.slow  # four short trainings, six stages; tests/modeling/test_pixel_input.py steps once
def test_a_stage_fed_uint8_with_the_colours_on_the_device_trains_as_the_host_path(step_config,
                                                                                    tmp_path):
    """The model ``fit`` runs takes the uint8 batches and their colour plans: without colours
    the losses are the host path's to the bit; with them, to the float rounding of the HSV
    formula (the first epoch's mean loss within 1e-4)."""
    from yolo3.training.train import train
    runs = {}
    for augment, epochs in (("none", 2), ("light", 1)):  # light: its first epoch is compared
        for site in ("host", "device"):
            result = train(step_config(augment=augment, mosaic=0.0, augment_on=site,
                                       epochs=epochs, freeze_epochs=1, pipeline="numpy",
                                       eval_every=0, bn_stats_images=0, ema=False,
                                       output=str(tmp_path / f"{augment}-{site}")))
            runs[augment, site] = result.history["loss"]
    assert runs["none", "device"] == runs["none", "host"]
    assert abs(runs["light", "device"][0] / runs["light", "host"][0] - 1) < 1e-4
