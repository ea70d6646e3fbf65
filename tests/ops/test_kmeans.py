"""k-means anchors (distance 1 - IoU): recovers known sizes, seeded, sorted by area."""
from __future__ import annotations

import numpy as np

from yolo3.ops.anchors import YOLO_ANCHORS, average_best_iou, kmeans_anchors


def _brute_best_iou(wh, anchors):
    total = 0.0
    for w, h in wh:
        best = 0.0
        for aw, ah in anchors:
            inter = min(w, aw) * min(h, ah)
            best = max(best, inter / (w * h + aw * ah - inter))
        total += best
    return total / len(wh)


def test_recovers_known_sizes():
    rng = np.random.default_rng(0)
    true = np.array([[12, 15], [30, 60], [64, 40], [120, 100], [200, 330], [350, 180]], np.float64)
    wh = np.concatenate([c * rng.uniform(0.93, 1.07, size=(150, 2)) for c in true])
    anchors, iou = kmeans_anchors(wh, 6, restarts=4, seed=1)
    order = np.argsort(true.prod(1))
    np.testing.assert_allclose(anchors, true[order], rtol=0.04)
    assert anchors.dtype == np.float32 and np.all(np.diff(anchors.prod(1)) > 0)
    assert abs(iou - _brute_best_iou(wh, anchors)) < 1e-4
    assert iou > 0.85 and iou > average_best_iou(wh, YOLO_ANCHORS[:6])


def test_seeded_and_restarts_never_worse():
    rng = np.random.default_rng(5)
    wh = rng.lognormal(3.5, 0.8, size=(400, 2))
    a1, i1 = kmeans_anchors(wh, 9, restarts=3, seed=2)
    a2, i2 = kmeans_anchors(wh, 9, restarts=3, seed=2)
    np.testing.assert_array_equal(a1, a2)
    _, single = kmeans_anchors(wh, 9, restarts=1, seed=2)  # the first of the three runs
    assert i1 >= single - 1e-12


def test_average_best_iou_matches_brute_force():
    rng = np.random.default_rng(3)
    wh = rng.uniform(1, 300, size=(50, 2))
    assert abs(average_best_iou(wh, YOLO_ANCHORS) - _brute_best_iou(wh, YOLO_ANCHORS)) < 1e-9


def test_command_shows_a_progress_bar_unless_quiet(tmp_path, capsys):
    """``yolo3 kmeans`` writes the anchors either way; its restarts' progress bar goes to stderr
    without ``--quiet`` and not with it (the flag's help promises no progress bars)."""
    from yolo3.cli import main as yolo3_main
    from yolo3.ops.anchors import read_anchors

    rng = np.random.default_rng(0)
    lines = []
    for i in range(12):
        x, y = rng.integers(0, 50, 2)
        w, h = rng.integers(5, 60, 2)
        lines.append(f"img{i}.jpg {x},{y},{x + w},{y + h},0")
    (tmp_path / "train.txt").write_text("\n".join(lines) + "\n")
    for quiet in (False, True):
        out = tmp_path / f"anchors_{quiet}.txt"
        assert yolo3_main(["kmeans", "--annotations", str(tmp_path / "train.txt"), "--clusters",
                           "3", "--out", str(out)] + (["--quiet"] if quiet else [])) == 0
        assert read_anchors(out).shape == (3, 2)
        assert ("k-means (k=3, 12 boxes)" in capsys.readouterr().err) is not quiet
