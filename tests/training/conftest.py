"""Shared by the training tests: a small synthetic set and a run's settings on it."""
from __future__ import annotations

from pathlib import Path

import pytest

from yolo3.config.train_config import TrainConfig
from yolo3.data.synthetic import make_synthetic_dataset


@pytest.fixture(scope="module")
def dataset(tmp_path_factory):
    d = tmp_path_factory.mktemp("steps")
    ann, classes = make_synthetic_dataset(str(d), 10, (64, 64), val_fraction=0.2)
    return Path(ann), classes


@pytest.fixture
def step_config(dataset, tmp_path):
    """``step_config(**settings)``: tiny at 64 px on :func:`dataset`, batch 2, 5 epochs (2 frozen),
    seed 3, no pictures (tests/training/test_pictures.py and the CLI's training tests draw them),
    writing into the test's folder; ``settings`` change any of them."""
    def make(**settings) -> TrainConfig:
        ann, classes = dataset
        base = dict(annotations=str(ann), classes=classes, output=str(tmp_path / "out"),
                    model="tiny", input_size=64, batch_size=2, epochs=5, freeze_epochs=2, seed=3,
                    pictures=False)
        base.update(settings)
        return TrainConfig(**base)
    return make
