"""yolo3.checkpoint.loading.load_body: the one entrance for model files - .keras with its facts,
.weights.h5 with facts from arguments or side files (variant inferred from the anchor count),
keras-yolo3 .h5 (test_keras_yolo3.py); explicit arguments win; bad files named."""
from __future__ import annotations

import h5py
import numpy as np
import pytest

from yolo3.checkpoint.loading import load_body
from yolo3.checkpoint.metadata import ModelInfo
from yolo3.checkpoint.saving import atomic_save_model, atomic_save_weights
from yolo3.config.specs import get_spec
from yolo3.core.errors import FileFormatError
from yolo3.data.class_names import write_classes
from yolo3.modeling.bodies import build_body
from yolo3.ops.anchors import write_anchors

TINY = get_spec("tiny")


@pytest.fixture(scope="module")
def tiny_body():
    body = build_body("tiny", 2, input_shape=(64, 64))
    rng = np.random.default_rng(0)
    for w in body.weights:
        w.assign(rng.normal(0, 0.1, w.shape).astype(np.float32) + (1 if "variance" in w.path else 0))
    return body


def _same_weights(a, b):
    assert len(a.weights) == len(b.weights)
    for x, y in zip(a.weights, b.weights):
        np.testing.assert_array_equal(x.numpy(), y.numpy())


def test_a_keras_file_gives_its_body_and_facts_and_arguments_win(tiny_body, tmp_path):
    info = ModelInfo(TINY.default_anchors(), TINY.default_masks(), 2, ["cat", "dog"], "tiny", (64, 64))
    atomic_save_model(tiny_body, tmp_path / "m.keras", info)
    body, got = load_body(tmp_path / "m.keras")
    _same_weights(body, tiny_body)
    assert got.variant == "tiny" and got.class_names == ["cat", "dog"] and got.input_size == (64, 64)
    np.testing.assert_allclose(got.anchors, TINY.default_anchors())
    write_classes(tmp_path / "other.txt", ["a", "b"])
    _, overridden = load_body(tmp_path / "m.keras", classes_path=tmp_path / "other.txt")
    assert overridden.class_names == ["a", "b"]


def test_weights_files_take_facts_from_side_files_or_arguments(tiny_body, tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    atomic_save_weights(tiny_body, run / "final.weights.h5")
    with pytest.raises(FileFormatError, match="needs a classes file"):
        load_body(run / "final.weights.h5")
    write_classes(run / "classes.txt", ["cat", "dog"])
    with pytest.raises(FileFormatError, match="no anchors file given"):
        load_body(run / "final.weights.h5")
    write_anchors(run / "anchors.txt", TINY.default_anchors())  # what a training run writes
    body, info = load_body(run / "final.weights.h5")  # 6 anchors: the variant is tiny
    _same_weights(body, tiny_body)
    assert info.variant == "tiny" and info.class_names == ["cat", "dog"] and info.num_classes == 2
    write_anchors(tmp_path / "seven.txt", np.arange(1, 15, dtype=np.float32).reshape(7, 2))
    with pytest.raises(FileFormatError, match=r"7 anchors: cannot infer the variant .*6 -> tiny"):
        load_body(run / "final.weights.h5", anchors_path=tmp_path / "seven.txt")


def test_missing_and_foreign_files_are_named(tmp_path):
    with pytest.raises(FileFormatError, match=r"gone\.keras.*model file not found"):
        load_body(tmp_path / "gone.keras")
    with h5py.File(tmp_path / "other.h5", "w") as f:
        f.create_dataset("dense/kernel", data=np.zeros((2, 2)))
    with pytest.raises(FileFormatError, match=r"other\.h5: .*not a yolo3 body weights file"):
        load_body(tmp_path / "other.h5")
    (tmp_path / "text.h5").write_text("not HDF5")
    with pytest.raises(FileFormatError, match="cannot read HDF5 weights"):
        load_body(tmp_path / "text.h5")
