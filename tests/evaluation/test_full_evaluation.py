"""yolo3.evaluation.full_evaluation: one evaluation equals its parts computed alone, and draws
every picture (without matplotlib: the gallery only, and one warning, never a traceback)."""
from __future__ import annotations

import logging

import numpy as np
import pytest

from yolo3.core.output_folder import written_by_yolo3
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


def test_detections_on_ignore_regions_are_left_out_of_every_analysis():
    """A detection inside a crowd region is no false positive anywhere: not in the mAP, the
    confidence curves, the confusion matrix or the error analysis; one on a counted box is."""
    from yolo3.evaluation.metrics import TruthDetails, without_ignored
    gt = {0: np.array([[10, 10, 50, 50, 0]], float)}
    region = np.array([[100, 100, 200, 200, 0]], float)
    dets = {0: (np.array([[10, 10, 50, 50], [120, 120, 150, 150], [300, 300, 340, 340]], float),
                np.array([0.9, 0.95, 0.3]), np.array([0, 0, 0]))}
    details = TruthDetails({0: region})
    kept = without_ignored(gt, dets, details)
    np.testing.assert_array_equal(kept[0][1], [0.9, 0.3])  # the one in the region is gone
    assert without_ignored(gt, dets, None) is dets
    with_regions = evaluate_fully(gt, dets, ["a"], details=details, confusion_score=0.1)
    without = evaluate_fully(gt, dets, ["a"], confusion_score=0.1)
    assert with_regions.result["mAP50"] > without.result["mAP50"]
    background = lambda full: full.result["confusion_matrix"]["counts"][0][1]  # noqa: E731
    assert (background(with_regions), background(without)) == (1, 2)
    assert with_regions.errors.breakdown.counts["background"] < without.errors.breakdown.counts["background"]
