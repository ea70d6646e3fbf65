"""yolo3.evaluation.diagnostics: the confusion matrix and precision / recall / F1 against
confidence, each checked against a plain-loop float64 reference written here, a hand-counted case,
and through ``yolo3 evaluate``."""
from __future__ import annotations

import json

import numpy as np
import pytest

from yolo3.evaluation.diagnostics import confidence_curves, confusion_matrix


def _iou(a, b) -> float:
    w = max(0.0, min(a[2], b[2]) - max(a[0], b[0]))
    h = max(0.0, min(a[3], b[3]) - max(a[1], b[1]))
    inter = w * h
    union = (a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter
    return inter / union if union > 0 else 0.0


def _random_case(seed: int, num_classes: int = 3, images: int = 12):
    rng = np.random.default_rng(seed)
    gt, dets = {}, {}
    for i in range(images):
        n = rng.integers(0, 5)
        xy = rng.uniform(0, 80, (n, 2))
        wh = rng.uniform(8, 40, (n, 2))
        cls = rng.integers(0, num_classes, n)
        gt[i] = np.concatenate([xy, xy + wh, cls[:, None]], 1)
        # detections: jittered copies (some with the wrong class), and strays
        keep = rng.random(n) < 0.8
        jitter = rng.normal(0, 3, (n, 4))
        boxes = np.concatenate([xy, xy + wh], 1)[keep] + jitter[keep]
        dcls = np.where(rng.random(n) < 0.8, cls, rng.integers(0, num_classes, n))[keep]
        m = rng.integers(0, 3)
        sxy = rng.uniform(0, 80, (m, 2))
        strays = np.concatenate([sxy, sxy + rng.uniform(8, 40, (m, 2))], 1)
        boxes = np.concatenate([boxes, strays])
        dcls = np.concatenate([dcls, rng.integers(0, num_classes, m)])
        dets[i] = (boxes, np.round(rng.uniform(0, 1, len(boxes)), 2), dcls)
    return gt, dets


def _reference_confusion(gt, dets, num_classes, score, iou):
    matrix = np.zeros((num_classes + 1, num_classes + 1), np.int64)
    for i in gt:
        g = gt[i]
        boxes, scores, classes = dets[i]
        d = [(b, c) for b, s, c in zip(boxes, scores, classes) if s > score]
        pairs = sorted(((_iou(g[a, :4], d[b][0]), a, b) for a in range(len(g)) for b in range(len(d))
                        if _iou(g[a, :4], d[b][0]) > iou), key=lambda t: -t[0])
        used_g, used_d = set(), set()
        for _, a, b in pairs:
            if a not in used_g and b not in used_d:
                used_g.add(a)
                used_d.add(b)
                matrix[int(d[b][1]), int(g[a, 4])] += 1
        for a in range(len(g)):
            if a not in used_g:
                matrix[num_classes, int(g[a, 4])] += 1
        for b in range(len(d)):
            if b not in used_d:
                matrix[int(d[b][1]), num_classes] += 1
    return matrix


def _reference_precision_recall(gt, dets, k, threshold):
    """VOC matching at IoU 0.5 of class k's detections scored >= threshold, in plain loops."""
    num_gt = sum(int(np.sum(g[:, 4] == k)) for g in gt.values())
    claimed = [(s, i, b) for i, (boxes, scores, classes) in dets.items()
               for b, s, c in zip(boxes, scores, classes) if c == k and s >= threshold]
    claimed.sort(key=lambda t: -t[0])
    taken = {i: set() for i in gt}
    tp = 0
    for _, i, b in claimed:
        g = [j for j in range(len(gt[i])) if gt[i][j, 4] == k]
        if not g:
            continue
        ious = [_iou(b, gt[i][j, :4]) for j in g]
        best = int(np.argmax(ious))
        if ious[best] > 0.5 and g[best] not in taken[i]:
            taken[i].add(g[best])
            tp += 1
    precision = tp / len(claimed) if claimed else 1.0
    return precision, (tp / num_gt if num_gt else 0.0)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_confusion_matrix_equals_the_loop_reference(seed):
    gt, dets = _random_case(seed)
    for score, iou in ((0.25, 0.45), (0.6, 0.3)):
        ours = confusion_matrix(gt, dets, 3, score=score, iou=iou)
        np.testing.assert_array_equal(ours, _reference_confusion(gt, dets, 3, score, iou))
    every = confusion_matrix(gt, dets, 3, score=-1)
    assert every[:, :3].sum() == sum(len(g) for g in gt.values())  # each object counted once
    assert every[:3, :].sum() == sum(len(d[0]) for d in dets.values())  # each detection once


@pytest.mark.parametrize("seed", [3, 4])
def test_confidence_curves_equal_the_loop_reference(seed):
    gt, dets = _random_case(seed)
    grid = np.linspace(0, 1, 21)
    curves = confidence_curves(gt, dets, 3, grid=grid)
    for k in range(3):
        for g, c in enumerate(grid):
            precision, recall = _reference_precision_recall(gt, dets, k, c)
            assert curves.precision[k, g] == pytest.approx(precision, abs=1e-12)
            assert curves.recall[k, g] == pytest.approx(recall, abs=1e-12)
            f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
            assert curves.f1[k, g] == pytest.approx(f1, abs=1e-12)
    best = curves.best()
    assert best["f1"] == pytest.approx(curves.mean_f1.max())
    assert best["confidence"] == grid[int(np.argmax(curves.mean_f1))]


def test_a_hand_counted_case():
    # image 0: a cat found (0.9), a second cat called a dog (0.8); image 1: a stray dog (0.3)
    gt = {0: np.array([[0, 0, 10, 10, 0], [20, 20, 30, 30, 0]], float),
          1: np.zeros((0, 5))}
    dets = {0: (np.array([[0, 0, 10, 10], [20, 20, 30, 30]], float), np.array([0.9, 0.8]),
                np.array([0, 1])),
            1: (np.array([[5, 5, 15, 15]], float), np.array([0.3]), np.array([1]))}
    np.testing.assert_array_equal(confusion_matrix(gt, dets, 2, score=0.25),
                                  [[1, 0, 0], [1, 0, 1], [0, 0, 0]])
    np.testing.assert_array_equal(confusion_matrix(gt, dets, 2, score=0.85),
                                  [[1, 0, 0], [0, 0, 0], [1, 0, 0]])
    curves = confidence_curves(gt, dets, 2, grid=np.array([0.0, 0.5, 0.95]))
    assert curves.classes == [0]  # dog has no ground truth: left out of the means
    np.testing.assert_allclose(curves.precision[0], [1, 1, 1])
    np.testing.assert_allclose(curves.recall[0], [0.5, 0.5, 0])
    np.testing.assert_allclose(curves.mean_f1, [2 / 3, 2 / 3, 0])
    assert curves.best()["confidence"] == 0.0
    assert list(curves.as_dict(["cat", "dog"], step=1)["per_class"]) == ["cat"]


def test_evaluate_writes_the_matrix_the_curves_and_their_plots(tmp_path, capsys):
    from yolo3.cli.evaluate import main
    (tmp_path / "classes.txt").write_text("cat\ndog\n")
    one, two = tmp_path / "one.jpg", tmp_path / "two.jpg"
    (tmp_path / "ann.txt").write_text(f"{one} 0,0,10,10,0 20,20,30,30,0\n{two}\n")
    entries = [{"image": str(one), "boxes": [[0, 0, 10, 10], [20, 20, 30, 30]],
                "scores": [0.9, 0.8], "classes": [0, 1], "names": ["cat", "dog"]},
               {"image": str(two), "boxes": [[5, 5, 15, 15]], "scores": [0.3], "classes": [1],
                "names": ["dog"]}]
    (tmp_path / "dets.json").write_text(json.dumps(entries))
    out = tmp_path / "res" / "eval.json"
    assert main(["--annotations", str(tmp_path / "ann.txt"), "--classes",
                 str(tmp_path / "classes.txt"), "--detections", str(tmp_path / "dets.json"),
                 "--out", str(out), "--confusion-score", "0.25"]) == 0
    printed = capsys.readouterr().out
    assert "best F1 0.6667 at confidence 0.000" in printed
    result = json.loads(out.read_text())
    assert result["confusion_matrix"]["counts"] == [[1, 0, 0], [1, 0, 1], [0, 0, 0]]
    assert result["confusion_matrix"]["labels"] == ["cat", "dog", "background"]
    assert result["confidence_curves"]["best"]["f1"] == pytest.approx(2 / 3)
    assert len(result["confidence_curves"]["mean"]["f1"]) == 101
    for suffix in ("_pr.png", "_confusion.png", "_confidence.png"):
        assert (tmp_path / "res" / f"eval{suffix}").stat().st_size > 5000
