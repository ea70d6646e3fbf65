"""yolo3.training.event_log: TensorBoard logs written without TensorFlow, read back by
TensorBoard's own reader (EventAccumulator): Keras's layout (train/, validation/, epoch_*)."""
from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("tensorboard", reason="tensorboard is a core dependency: pip install -e .")

from tensorboard.backend.event_processing.event_accumulator import (  # noqa: E402
    IMAGES,
    SCALARS,
    EventAccumulator,
)

from yolo3.training.event_log import EventWriter, ScalarLog  # noqa: E402


def _read(folder):
    accumulator = EventAccumulator(str(folder), size_guidance={SCALARS: 0, IMAGES: 0})
    accumulator.Reload()
    return accumulator


def test_epoch_logs_become_scalars_in_kerass_layout(tmp_path):
    log = ScalarLog(str(tmp_path))
    log.on_epoch_end(0, {"loss": 3.5, "val_loss": 4.0, "mAP50_95": 0.1, "note": "text"})
    log.on_epoch_end(1, {"loss": 2.5, "val_loss": 3.0, "mAP50_95": 0.2})
    log.on_train_end()
    train, validation = _read(tmp_path / "train"), _read(tmp_path / "validation")
    assert sorted(train.Tags()["scalars"]) == ["epoch_loss", "epoch_mAP50_95"]
    assert [(e.step, e.value) for e in train.Scalars("epoch_loss")] == [(0, 3.5), (1, 2.5)]
    assert [e.value for e in validation.Scalars("epoch_loss")] == [4.0, 3.0]
    assert validation.Tags()["scalars"] == ["epoch_loss"]


def test_images_are_written_as_png(tmp_path):
    writer = EventWriter(str(tmp_path))
    image = np.zeros((12, 20, 3), np.uint8)
    image[:, :10] = (255, 0, 0)
    writer.image("detections/image/0", image, 3)
    writer.close()
    (event,) = _read(tmp_path).Images("detections/image/0")
    assert (event.step, event.height, event.width) == (3, 12, 20)
    import io

    from PIL import Image
    decoded = np.asarray(Image.open(io.BytesIO(event.encoded_image_string)))
    np.testing.assert_array_equal(decoded, image)
