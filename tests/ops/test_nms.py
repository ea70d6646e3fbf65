"""yolo3.ops.nms.batched_nms (keras.ops) against a float64 NumPy plain-loop greedy NMS and
TensorFlow's combined_non_max_suppression (the TensorFlow detector's); every check again on
PyTorch, where installed (its eager path: the greedy rule on the deciding prefix of the
candidates), in a process of its own."""
from __future__ import annotations

import importlib.util
import os
import subprocess
import sys

import numpy as np
import pytest
from keras import ops
from locations import REPO

from yolo3.ops.nms import batched_nms


def greedy_nms_reference(boxes, scores, max_boxes, iou_threshold, score_threshold):
    """Per image: every (box, class) pair above the threshold, by descending score; kept unless a
    kept pair of its class overlaps it by IoU > threshold; the first max_boxes kept. float64."""
    out = []
    for image_boxes, image_scores in zip(boxes.astype(np.float64), scores.astype(np.float64)):
        pairs = [(s, i, c) for i, row in enumerate(image_scores) for c, s in enumerate(row)
                 if s > score_threshold]
        pairs.sort(key=lambda p: -p[0])
        kept = []
        for s, i, c in pairs:
            if len(kept) == max_boxes:
                break
            if all(k[2] != c or _iou(image_boxes[k[1]], image_boxes[i]) <= iou_threshold
                   for k in kept):
                kept.append((s, i, c))
        out.append(kept)
    return out


def _iou(a, b):
    iw = max(min(a[2], b[2]) - max(a[0], b[0]), 0.0)
    ih = max(min(a[3], b[3]) - max(a[1], b[1]), 0.0)
    inter = iw * ih
    union = (a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter
    return inter / union if union > 0 else 0.0


def _random(seed, batch=3, n=150, classes=4):
    rng = np.random.default_rng(seed)
    xy = rng.uniform(0, 200, (batch, n, 2))
    wh = rng.uniform(5, 60, (batch, n, 2))
    boxes = np.concatenate([xy, xy + wh], -1).astype(np.float32)
    # distinct scores (a tie's order is either library's choice)
    scores = rng.permutation(batch * n * classes).reshape(batch, n, classes) / (batch * n * classes)
    return boxes, (scores ** 3).astype(np.float32)


def _numpy(result):
    return [np.asarray(ops.convert_to_numpy(t)) for t in result]


@pytest.mark.parametrize("seed, max_boxes, iou, score", [(0, 20, 0.45, 0.3), (1, 60, 0.5, 0.05),
                                                         (2, 5, 0.3, 0.6), (3, 100, 0.7, 0.01),
                                                         (4, 3, 0.2, 0.0)])
def test_equals_the_plain_loop_reference(seed, max_boxes, iou, score):
    boxes, scores = _random(seed)
    got_boxes, got_scores, got_classes, valid = _numpy(
        batched_nms(boxes, scores, max_boxes, iou, score, candidates=600))
    for b, kept in enumerate(greedy_nms_reference(boxes, scores, max_boxes, iou, score)):
        assert valid[b] == len(kept)
        np.testing.assert_allclose(got_scores[b, :len(kept)], [k[0] for k in kept], rtol=1e-6)
        np.testing.assert_array_equal(got_classes[b, :len(kept)], [k[2] for k in kept])
        np.testing.assert_array_equal(got_boxes[b, :len(kept)], boxes[b, [k[1] for k in kept]])
        assert not got_boxes[b, len(kept):].any() and not got_scores[b, len(kept):].any()


def test_equals_tensorflows_combined_nms():
    import tensorflow as tf
    boxes, scores = _random(4, batch=2, n=400, classes=6)
    got = _numpy(batched_nms(boxes, scores, 50, 0.45, 0.2))
    ref = tf.image.combined_non_max_suppression(boxes[:, :, None, :], scores, 50, 50, 0.45, 0.2,
                                                clip_boxes=False)
    for mine, theirs in zip(got, ref):
        np.testing.assert_array_equal(mine, theirs.numpy().astype(mine.dtype))


def test_only_the_best_candidates_enter_and_few_pairs_are_padded():
    boxes, scores = _random(5, batch=1, n=50, classes=2)
    # 100 pairs above 0: with 10 candidates only the 10 best can be kept
    _, got_scores, _, valid = _numpy(batched_nms(boxes, scores, 100, 0.5, 0.0, candidates=10))
    assert valid[0] <= 10 and got_scores[0, 0] == scores.max()
    assert np.all(got_scores[0, :valid[0]] >= np.sort(scores.ravel())[-10])
    # fewer pairs than max_boxes: zeros after them, shapes as asked
    got = _numpy(batched_nms(boxes[:, :3], scores[:, :3], 20, 0.5, 0.0))
    assert got[0].shape == (1, 20, 4) and got[1].shape == (1, 20) and got[3][0] <= 6
    assert not got[1][0, got[3][0]:].any()


def test_nothing_above_the_threshold_gives_no_detection():
    boxes, scores = _random(6, batch=2, n=30, classes=3)
    got_boxes, got_scores, got_classes, valid = _numpy(batched_nms(boxes, scores, 10, 0.5, 1.0))
    assert valid.tolist() == [0, 0] and not got_boxes.any() and not got_scores.any()
    assert got_classes.dtype == np.int32


def test_a_long_chain_of_suppressions_is_followed_to_its_end():
    """Boxes in a row, each overlapping the next by IoU 0.6, scores falling along the row: the
    greedy rule keeps every other one (the first drops the second, so the third survives ...),
    a chain as long as the row, which the fixed-point rounds must walk to its end."""
    n = 40
    x = np.arange(n, dtype=np.float32) * 4.0
    boxes = np.stack([x, np.zeros(n), x + 16.0, np.full(n, 10.0)], -1)[None].astype(np.float32)
    scores = np.linspace(0.99, 0.5, n, dtype=np.float32)[None, :, None]
    got_boxes, got_scores, _, valid = _numpy(batched_nms(boxes, scores, n, 0.5, 0.1))
    kept = greedy_nms_reference(boxes, scores, n, 0.5, 0.1)[0]
    assert int(valid[0]) == len(kept) == n // 2
    np.testing.assert_allclose(got_scores[0, :len(kept)], [k[0] for k in kept], rtol=1e-6)
    np.testing.assert_allclose(got_boxes[0, :len(kept)], boxes[0, [k[1] for k in kept]])


def test_crowded_candidates_where_few_are_kept():
    """600 candidates in six tight clusters of one class: a few kept, so the first candidates
    do not decide the output and PyTorch's prefix must grow to all of them."""
    rng = np.random.default_rng(7)
    centres = rng.uniform(50, 400, (6, 2))
    xy = centres[rng.integers(0, 6, 600)] + rng.normal(0, 2, (600, 2))
    boxes = np.concatenate([xy, xy + 40.0], -1)[None].astype(np.float32)
    scores = rng.permutation(600).astype(np.float32)[None, :, None] / 600.0
    got_boxes, got_scores, _, valid = _numpy(batched_nms(boxes, scores, 100, 0.5, 0.0))
    kept = greedy_nms_reference(boxes, scores, 100, 0.5, 0.0)[0]
    assert 6 <= int(valid[0]) == len(kept) < 100
    np.testing.assert_allclose(got_scores[0, :len(kept)], [k[0] for k in kept], rtol=1e-6)
    np.testing.assert_array_equal(got_boxes[0, :len(kept)], boxes[0, [k[1] for k in kept]])


@pytest.mark.skipif(importlib.util.find_spec("torch") is None,
                    reason="PyTorch is not installed here (not in the test extra: 5 more minutes of "
                           "suite on CI's 2 cores); install torch to run this")
def test_every_check_holds_on_pytorchs_eager_path():
    env = dict(os.environ, KERAS_BACKEND="torch", TF_CPP_MIN_LOG_LEVEL="3")
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                           "-k", "not eager_path", __file__], capture_output=True, text=True,
                          cwd=REPO, env=env, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    assert " passed" in proc.stdout and "skipped" not in proc.stdout, proc.stdout[-1000:]
