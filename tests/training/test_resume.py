"""yolo3.training.resume: the state --resume continues from (written atomically, read back, refused
when it is damaged)."""
from __future__ import annotations

import json

import keras
import numpy as np
import pytest

from yolo3.training.resume import (
    load_resume_state,
    restore_resume_state,
    save_resume_state,
)


def test_resume_state_restores_weights_and_optimizer(tmp_path):
    model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(2)])
    opt = keras.optimizers.Adam(0.1)
    model.compile(opt, "mse")
    model.fit(np.ones((4, 3)), np.zeros((4, 2)), epochs=2, verbose=0)
    save_resume_state(tmp_path, 2, model, opt, best=1.5)
    save_resume_state(tmp_path, 3, model, opt, best=1.0)
    state = load_resume_state(tmp_path)
    assert state["epoch"] == 3 and state["best"] == 1.0
    assert sorted(p.name for p in tmp_path.iterdir()) == [".yolo3-output.json", "resume-00003",
                                                          "resume.json"]
    fresh = keras.Sequential([keras.Input((3,)), keras.layers.Dense(2)])
    opt2 = keras.optimizers.Adam(0.1)
    restore_resume_state(state, fresh, opt2)
    assert int(opt2.iterations.numpy()) == int(opt.iterations.numpy()) == 2
    for a, b in zip(model.weights, fresh.weights):
        np.testing.assert_array_equal(a.numpy(), b.numpy())
    for a, b in zip(opt.variables, opt2.variables):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    assert load_resume_state(tmp_path / "nothing") is None


def test_a_damaged_pointer_is_refused_with_the_reason(tmp_path):
    (tmp_path / "resume.json").write_text("{not json")
    with pytest.raises(ValueError, match="not valid JSON"):
        load_resume_state(tmp_path)
    (tmp_path / "resume.json").write_text(json.dumps({"epoch": 2, "dir": "../elsewhere"}))
    with pytest.raises(ValueError, match="folder name 'dir'"):
        load_resume_state(tmp_path)
    (tmp_path / "resume.json").write_text(json.dumps({"epoch": 2, "dir": "resume-00002"}))
    with pytest.raises(FileNotFoundError, match="incomplete or missing"):
        load_resume_state(tmp_path)
