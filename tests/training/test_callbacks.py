"""Training callbacks (yolo3.training.callbacks) driven directly with the logs Keras would pass:
which checkpoint files each epoch writes, when training stops, what goes into the logs. Their use in
whole runs is covered by test_train_recipe, test_train_cli, test_parallel and test_bn_statistics."""
from __future__ import annotations

import logging
import math
import os
from types import SimpleNamespace

import numpy as np
import pytest

from yolo3.checkpoint.saving import load_keras_model
from yolo3.modeling.bodies import build_body
from yolo3.training.callbacks import (
    EarlyStopOnPlateau,
    EpochClock,
    StopOnNaN,
    TemplateCheckpoint,
)


@pytest.fixture(scope="module")
def body():
    return build_body("tiny", 2, input_shape=(64, 64))


def _set_first_kernel(body, value: float) -> None:
    layer = body.get_layer("backbone_conv0_conv")
    kernel = layer.get_weights()[0]
    layer.set_weights([np.full_like(kernel, value)])


def _listed(folder) -> list:
    """The files of ``folder``, its manifest and journal left out."""
    return sorted(n for n in os.listdir(folder) if not n.startswith(".yolo3-output"))


def _first_kernel_in(path) -> float:
    model, _ = load_keras_model(path)
    return float(model.get_layer("backbone_conv0_conv").get_weights()[0].flat[0])


def test_checkpoint_keeps_the_best_epoch_by_the_monitored_value(body, tmp_path):
    cb = TemplateCheckpoint(body, tmp_path, monitor="mAP50_95", mode="max", save_resume=False)
    for epoch, m in enumerate([0.1, 0.3, math.nan, 0.2]):  # NaN: not evaluated that epoch
        _set_first_kernel(body, epoch + 1.0)
        cb.on_epoch_end(epoch, {"loss": 1.0, "mAP50_95": m})
    assert cb.best == 0.3
    assert _first_kernel_in(tmp_path / "best.keras") == 2.0  # epoch 2 (0-based 1)
    assert _first_kernel_in(tmp_path / "last.keras") == 4.0
    assert (tmp_path / "best.weights.h5").read_bytes() != (tmp_path / "last.weights.h5").read_bytes()
    assert _listed(tmp_path) == ["best.keras", "best.weights.h5", "last.keras", "last.weights.h5"]
    from yolo3.core.output_folder import read_contents
    assert read_contents(tmp_path).ours == tuple(_listed(tmp_path))  # each recorded as yolo3's


def test_checkpoint_min_mode_falls_back_to_the_loss_and_skips_nan_epochs(body, tmp_path, caplog):
    cb = TemplateCheckpoint(body, tmp_path, monitor="val_loss", save_keras=False,
                            save_resume=False, best=5.0)
    _set_first_kernel(body, 1.0)
    cb.on_epoch_end(0, {"loss": 6.0})  # worse than the resumed best: last only
    assert _listed(tmp_path) == ["last.weights.h5"]
    with caplog.at_level(logging.INFO, logger="yolo3"):
        cb.on_epoch_end(1, {"loss": 4.0})  # no val_loss: the loss stands in
    assert cb.best == 4.0 and "val_loss improved from 5 to 4" in caplog.text
    last = (tmp_path / "last.weights.h5").read_bytes()
    _set_first_kernel(body, 9.0)
    cb.on_epoch_end(2, {"loss": math.nan, "val_loss": 1.0})  # a NaN model is never written
    assert (tmp_path / "last.weights.h5").read_bytes() == last and cb.best == 4.0
    with pytest.raises(ValueError, match="mode must be 'min' or 'max'"):
        TemplateCheckpoint(body, tmp_path, mode="best")


def test_epoch_messages_start_a_new_line_only_after_a_live_progress_bar(body, tmp_path, caplog):
    """Keras's live bar (verbose 1) leaves its line open at on_epoch_end: the first message of the
    epoch breaks it; without the bar (--quiet) or after the evaluation's line, no blank line."""
    cb = TemplateCheckpoint(body, tmp_path, monitor="val_loss", save_keras=False,
                            save_resume=False)
    messages = []
    for epoch, (verbose, logs) in enumerate([(1, {"loss": 3.0}), (0, {"loss": 2.0}),
                                             (1, {"loss": 1.0, "mAP50": 0.5})]):
        cb.set_params({"verbose": verbose, "epochs": 3})
        caplog.clear()
        with caplog.at_level(logging.INFO, logger="yolo3"):
            cb.on_epoch_end(epoch, logs)
        messages.append(caplog.records[-1].getMessage())
    assert messages[0].startswith("\nEpoch 1: val_loss improved")
    assert messages[1].startswith("Epoch 2: val_loss improved")
    assert messages[2].startswith("Epoch 3: val_loss improved")


def test_early_stop_counts_evaluations_without_improvement(caplog):
    cb = EarlyStopOnPlateau(patience=2, best=0.5)
    cb.set_model(SimpleNamespace(stop_training=False))
    cb.on_epoch_end(0, {"mAP50_95": 0.4})
    cb.on_epoch_end(1, {"mAP50_95": math.nan})  # not evaluated: does not count
    cb.on_epoch_end(2, {})
    assert not cb.model.stop_training and cb.wait == 1
    cb.on_epoch_end(3, {"mAP50_95": 0.6})  # improvement resets the count
    assert cb.wait == 0 and cb.best == 0.6
    with caplog.at_level(logging.INFO, logger="yolo3"):
        cb.on_epoch_end(4, {"mAP50_95": 0.6})
        cb.on_epoch_end(5, {"mAP50_95": 0.55})
    assert cb.model.stop_training and cb.stopped_epoch == 5
    assert "has not improved on 0.6000 for 2 evaluations" in caplog.text


def test_stop_on_nan_stops_at_the_first_non_finite_batch(caplog):
    cb = StopOnNaN()
    cb.set_model(SimpleNamespace(stop_training=False))
    cb.on_train_batch_end(0, {"loss": 3.0})
    assert not cb.stopped and not cb.model.stop_training
    with caplog.at_level(logging.WARNING, logger="yolo3"):
        cb.on_train_batch_end(7, {"loss": math.inf})
    assert cb.stopped and cb.model.stop_training
    assert "non-finite loss (inf) at batch 7" in cb.message and cb.message in caplog.text


def test_epoch_clock_puts_the_epochs_seconds_into_the_logs():
    cb = EpochClock()
    cb.on_epoch_begin(0)
    logs = {"loss": 1.0}
    cb.on_epoch_end(0, logs)
    assert 0.0 <= logs["seconds"] < 5.0
    fresh = EpochClock()
    untouched = {"loss": 1.0}
    fresh.on_epoch_end(0, untouched)  # no epoch began (a resumed callback): nothing to report
    assert untouched == {"loss": 1.0}


def test_map_evaluation_with_a_tile_scores_sliced_detections(body, tmp_path):
    from PIL import Image

    from yolo3.checkpoint.metadata import ModelInfo
    from yolo3.data.annotations import Record
    from yolo3.data.images import load_image
    from yolo3.evaluation.metrics import evaluate_detections
    from yolo3.inference.detector import YOLO
    from yolo3.inference.tiled import TiledDetector
    from yolo3.ops.anchors import TINY_YOLO_ANCHORS
    from yolo3.ops.tiles import Slicing
    from yolo3.training.callbacks import MapEvaluation

    rng = np.random.default_rng(0)
    records = []
    for i in range(3):
        path = tmp_path / f"{i}.png"
        Image.fromarray(rng.integers(0, 255, (150, 200, 3), dtype=np.uint8)).save(path)
        records.append(Record(str(path), np.array([[10, 20, 40, 60, i % 2]], np.float32)))
    info = ModelInfo(anchors=TINY_YOLO_ANCHORS, masks=[[3, 4, 5], [1, 2, 3]], num_classes=2,
                     variant="tiny", input_size=(64, 64))
    slicing = Slicing(96, 0.25, "wbf", whole_from=8)  # every setting reaches the detector
    figures = MapEvaluation(body, info, records, verbose=0, slicing=slicing).evaluate()
    detector = TiledDetector(YOLO.from_body(body, info, score=0.001, iou=0.45,
                                            precision="float32"), 96, 0.25, "wbf", whole_from=8)
    images = [load_image(r.path) for r in records]
    dets = dict(enumerate(detector.detect_batch(images)))
    gt = {k: r.boxes.astype(np.float64) for k, r in enumerate(records)}
    want = evaluate_detections(gt, dets, 2)
    assert figures["mAP50_95"] == pytest.approx(want["mAP50_95"], abs=1e-9)
    for k in dets:
        np.testing.assert_allclose(figures["detections"][k][1], dets[k][1], atol=1e-6)
    # not sliced, the images give other detections
    whole = MapEvaluation(body, info, records, verbose=0).evaluate()
    assert any(len(whole["detections"][k][1]) != len(dets[k][1]) for k in dets)
