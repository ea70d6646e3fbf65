"""Atomic checkpoint writes, NaN stop, name-based weight loading."""
from __future__ import annotations

import logging

import numpy as np
import pytest

from yolo3.bodies import build_body
from yolo3.history import truncate_history
from yolo3.saving import atomic_save_weights
from yolo3.weights import WeightsError, load_weights_by_name


def test_atomic_save_weights_roundtrip(tmp_path):
    body = build_body("tiny", 2, input_shape=(64, 64))
    path = atomic_save_weights(body, tmp_path / "b.weights.h5")
    other = build_body("tiny", 2, input_shape=(64, 64))
    other.load_weights(path)
    for a, b in zip(body.weights, other.weights):
        np.testing.assert_array_equal(a.numpy(), b.numpy())
    with pytest.raises(ValueError, match=".weights.h5"):
        atomic_save_weights(body, tmp_path / "b.h5")


def test_load_weights_by_name_skips_mismatched_heads(tmp_path, caplog):
    src = build_body("tiny", 80, input_shape=(64, 64))
    src.save_weights(tmp_path / "coco.weights.h5")
    src.save(tmp_path / "coco.keras")
    for path in (tmp_path / "coco.weights.h5", tmp_path / "coco.keras"):
        caplog.clear()
        dst = build_body("tiny", 3, input_shape=(64, 64))
        with caplog.at_level(logging.INFO, logger="yolo3"):
            report = load_weights_by_name(dst, path, variant="tiny")
        assert sorted(n for n, _ in report.skipped) == ["output_s16", "output_s32"]
        assert "shape" in report.skipped[0][1]
        np.testing.assert_array_equal(dst.get_layer("backbone_conv0_conv").get_weights()[0],
                                      src.get_layer("backbone_conv0_conv").get_weights()[0])
    assert "skipped output_s32" in caplog.text
    with pytest.raises(WeightsError, match="not found"):
        load_weights_by_name(dst, tmp_path / "missing.weights.h5")


def test_truncate_history_keeps_earlier_epochs_and_drops_cut_rows(tmp_path):
    path = tmp_path / "history.csv"
    path.write_text("epoch,loss,val_loss\n0,3.0,3.5\n1,2.0,2.5\n2,1.0,1.5\n3,0.9\n")
    truncate_history(path, 10)  # only the row a crash cut short goes
    assert path.read_text().splitlines()[-1] == "2,1.0,1.5"
    truncate_history(path, 2)
    assert path.read_text().splitlines() == ["epoch,loss,val_loss", "0,3.0,3.5", "1,2.0,2.5"]
    truncate_history(tmp_path / "missing.csv", 1)  # no file: nothing to do
    assert not (tmp_path / "missing.csv").exists()
