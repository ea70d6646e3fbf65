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


def _first_epochs(step_config, tmp_path, augment: str, mosaic: float, caches, epochs: int = 1):
    from yolo3.training.train import train
    out = {}
    for cache in caches:
        result = train(step_config(augment=augment, mosaic=mosaic, cache=cache, augment_on="device",
                                   epochs=epochs, freeze_epochs=1, pipeline="numpy", val_split=0.2,
                                   eval_every=0, bn_stats_images=0, ema=False,
                                   output=str(tmp_path / f"{augment}-{cache}")))
        out[cache] = result
    return out


def test_a_run_with_its_images_on_the_device_trains_as_the_host_places_them(step_config,
                                                                              tmp_path):
    """``cache device``: the letterboxed images read on the device give the losses of the host's
    OpenCV letterbox (``cache ram``, colours on the device) to 1e-3; the model files hold the
    template only (no buffer of images)."""
    import keras
    runs = _first_epochs(step_config, tmp_path, "none", 0.0, ("ram", "device"))
    ram, device = (runs[k].history for k in ("ram", "device"))
    for key in ("loss", "val_loss"):
        assert abs(device[key][0] / ram[key][0] - 1) < 1e-3, (key, device[key], ram[key])
    model = keras.saving.load_model(runs["device"].final_model, compile=False)
    assert not any(v.dtype == "uint8" for v in model.variables)
    assert not any("device_images" in layer.name for layer in model.layers)


@pytest.mark.slow  # two short trainings with mosaics; the test above trains letterboxed
def test_augmented_mosaics_read_on_the_device_train_as_the_hosts(step_config, tmp_path):
    """With the augmentation and mosaics, the canvases on the device are the host's within a
    level on average (tests/data/test_batch_maker.py): the first epoch's mean loss within 1%."""
    runs = _first_epochs(step_config, tmp_path, "light", 0.5, ("ram", "device"))
    ram, device = (runs[k].history["loss"][0] for k in ("ram", "device"))
    assert abs(device / ram - 1) < 0.01, (device, ram)
