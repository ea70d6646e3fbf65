"""Atomic checkpoint writes, resume state, NaN stop, name-based weight loading."""
from __future__ import annotations

import os

import keras
import numpy as np
import pytest

from yolo3.callbacks import (atomic_save_weights, atomic_write, load_resume_state,
                             remove_stale_temporaries, restore_resume_state, save_resume_state,
                             truncate_history)
from yolo3.model import build_body
from yolo3.weights import WeightsError, load_weights_by_name


def test_atomic_write_keeps_old_file_when_writer_fails(tmp_path):
    target = tmp_path / "f.txt"
    target.write_text("old")

    def bad(tmp):
        with open(tmp, "w") as f:
            f.write("half")
        raise RuntimeError("crash")

    with pytest.raises(RuntimeError):
        atomic_write(target, bad)
    assert target.read_text() == "old"
    assert os.listdir(tmp_path) == ["f.txt"]


def test_atomic_save_weights_roundtrip(tmp_path):
    body = build_body("tiny", 2, input_shape=(64, 64))
    path = atomic_save_weights(body, tmp_path / "b.weights.h5")
    other = build_body("tiny", 2, input_shape=(64, 64))
    other.load_weights(path)
    for a, b in zip(body.weights, other.weights):
        np.testing.assert_array_equal(a.numpy(), b.numpy())
    with pytest.raises(ValueError, match=".weights.h5"):
        atomic_save_weights(body, tmp_path / "b.h5")


def test_resume_state_restores_weights_and_optimizer(tmp_path):
    model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(2)])
    opt = keras.optimizers.Adam(0.1)
    model.compile(opt, "mse")
    model.fit(np.ones((4, 3)), np.zeros((4, 2)), epochs=2, verbose=0)
    save_resume_state(tmp_path, 2, model, opt, best=1.5)
    save_resume_state(tmp_path, 3, model, opt, best=1.0)
    state = load_resume_state(tmp_path)
    assert state["epoch"] == 3 and state["best"] == 1.0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["resume-00003", "resume.json"]
    fresh = keras.Sequential([keras.Input((3,)), keras.layers.Dense(2)])
    opt2 = keras.optimizers.Adam(0.1)
    restore_resume_state(state, fresh, opt2)
    assert int(opt2.iterations.numpy()) == int(opt.iterations.numpy()) == 2
    for a, b in zip(model.weights, fresh.weights):
        np.testing.assert_array_equal(a.numpy(), b.numpy())
    for a, b in zip(opt.variables, opt2.variables):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    assert load_resume_state(tmp_path / "nothing") is None


def test_load_weights_by_name_skips_mismatched_heads(tmp_path, capsys):
    src = build_body("tiny", 80, input_shape=(64, 64))
    src.save_weights(tmp_path / "coco.weights.h5")
    src.save(tmp_path / "coco.keras")
    for path in (tmp_path / "coco.weights.h5", tmp_path / "coco.keras"):
        dst = build_body("tiny", 3, input_shape=(64, 64))
        report = load_weights_by_name(dst, path, model_type="tiny")
        assert sorted(n for n, _ in report.skipped) == ["output_s16", "output_s32"]
        assert "shape" in report.skipped[0][1]
        np.testing.assert_array_equal(dst.get_layer("backbone_conv0_conv").get_weights()[0],
                                      src.get_layer("backbone_conv0_conv").get_weights()[0])
    assert "skipped output_s32" in capsys.readouterr().out
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


def test_remove_stale_temporaries_leaves_checkpoints(tmp_path):
    (tmp_path / ".tmp-last.keras-abc.keras").write_text("half")
    (tmp_path / ".tmp-resume-00002-xyz").mkdir()
    (tmp_path / "last.keras").write_text("whole")
    (tmp_path / "resume-00001").mkdir()
    assert remove_stale_temporaries(tmp_path) == 2
    assert sorted(p.name for p in tmp_path.iterdir()) == ["last.keras", "resume-00001"]
