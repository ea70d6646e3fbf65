"""yolo3.evaluation.full_evaluation: one evaluation equals its parts computed alone, and draws
every picture (without matplotlib: the gallery only, and one warning, never a traceback)."""
from __future__ import annotations

import logging

import numpy as np
import pytest

from yolo3.core.ownership import written_by_yolo3
from yolo3.evaluation.diagnostics import diagnose
from yolo3.evaluation.error_analysis import analyse_errors
from yolo3.evaluation.full_evaluation import PICTURES, evaluate_fully
from yolo3.evaluation.metrics import evaluate_detections


def _case(seed: int = 0, images: int = 8):
    rng = np.random.default_rng(seed)
    gt, dets = {}, {}
    for i in range(images):
        xy = rng.uniform(0, 60, (3, 2))
        g = np.concatenate([xy, xy + rng.uniform(10, 30, (3, 2)), rng.integers(0, 2, (3, 1))], 1)
        gt[i] = g
        boxes = g[:, :4] + rng.normal(0, 3, (3, 4))
        dets[i] = (np.concatenate([boxes, [[70, 70, 90, 90]]]), rng.uniform(0, 1, 4),
                   np.r_[g[:, 4].astype(int), 1])
    return gt, dets


def test_the_whole_equals_its_parts():
    gt, dets = _case()
    full = evaluate_fully(gt, dets, ["a", "b"])
    alone = evaluate_detections(gt, dets, 2, ["a", "b"], with_curves=True)
    curves = alone.pop("pr_curves")
    for key, value in alone.items():
        assert full.result[key] == value, key
    diagnostics = diagnose(gt, dets, 2)
    assert full.diagnostics.score == diagnostics.score
    np.testing.assert_array_equal(full.diagnostics.matrix, diagnostics.matrix)
    errors = analyse_errors(gt, dets, 2, diagnostics.score)
    assert full.result["errors"] == errors.as_dict(["a", "b"])["errors"]
    assert full.result["worst_images"] == errors.as_dict(["a", "b"])["worst_images"]
    assert [c is None for c in full.pr_curves] == [c is None for c in curves]
    assert evaluate_fully(gt, dets, ["a", "b"], confusion_score=0.5).errors.per_class.score == 0.5


def test_draws_every_picture_and_without_matplotlib_the_gallery_alone(tmp_path, monkeypatch,
                                                                      caplog):
    gt, dets = _case()
    full = evaluate_fully(gt, dets, ["a", "b"])
    image = np.full((100, 100, 3), 80, np.uint8)
    paths = {kind: str(tmp_path / f"{kind}.png") for kind in PICTURES}
    written = full.draw(paths, gt, dets, lambda _: image)
    assert sorted(written) == sorted(paths.values())
    assert all(written_by_yolo3(p) for p in written)
    monkeypatch.setattr("yolo3.evaluation.full_evaluation.installed", lambda name: False)
    alone = {kind: str(tmp_path / "no_plot" / f"{kind}.png") for kind in PICTURES}
    (tmp_path / "no_plot").mkdir()
    with caplog.at_level(logging.WARNING):
        assert full.draw(alone, gt, dets, lambda _: image) == [alone["worst"]]
    assert [r.message for r in caplog.records if "matplotlib" in r.message] == [
        "matplotlib is not installed (pip install 'yolo3[plot]' (or matplotlib)): no plots"]
    assert full.draw({"worst": alone["worst"]}, gt, dets, lambda _: None) == []  # no image: no row


@pytest.mark.parametrize("kind", ["pr", "errors"])
def test_draws_only_what_is_asked(tmp_path, kind):
    gt, dets = _case(1)
    path = str(tmp_path / f"{kind}.png")
    assert evaluate_fully(gt, dets, ["a", "b"]).draw({kind: path}, gt, dets, lambda _: None) == [path]
    assert [p.name for p in tmp_path.iterdir()] == [f"{kind}.png"]
