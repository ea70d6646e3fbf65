"""yolo3.evaluation.track_scores (TrackEval underneath) against py-motmetrics' own example numbers
(its TUD-Campus and TUD-Stadtmitte files and the results its tests expect), against
py-motmetrics on random tracks, and against the metrics' definitions on hand-built cases."""
from __future__ import annotations

import os

import numpy as np
import pytest

from yolo3.data.mot import MotTracks, mot_lines, read_mot
from yolo3.evaluation.track_scores import (
    TRACK_METRICS,
    combine_track_metrics,
    score_sequences,
    track_metrics,
)

mm = pytest.importorskip("motmetrics", reason="py-motmetrics is the independent check "
                                              "(the test extra installs it)")
MM_DATA = os.path.join(os.path.dirname(mm.__file__), "data")

# py-motmetrics' tests/test_metrics.py::test_motchallenge_files, its expected summary: IDF1, IDP,
# IDR, MT, ML, IDSW, Frag, MOTA, MOTP (its MOTP is a distance, 1 - IoU)
EXPECTED = {
    "TUD-Campus": (0.557659, 0.729730, 0.451253, 1, 1, 7, 7, 0.526462, 0.277201),
    "TUD-Stadtmitte": (0.644619, 0.819760, 0.531142, 5, 1, 7, 6, 0.564014, 0.345904),
    "OVERALL": (0.624296, 0.799176, 0.512211, 6, 2, 14, 13, 0.555116, 0.330177),
}


def _check(scores, expected):
    idf1, idp, idr, mt, ml, idsw, frag, mota, motp_distance = expected
    assert scores["IDF1"] == pytest.approx(idf1, abs=1e-5)
    assert scores["IDP"] == pytest.approx(idp, abs=1e-5)
    assert scores["IDR"] == pytest.approx(idr, abs=1e-5)
    assert (scores["MT"], scores["ML"], scores["IDSW"], scores["Frag"]) == (mt, ml, idsw, frag)
    assert scores["MOTA"] == pytest.approx(mota, abs=1e-5)
    assert scores["MOTP"] == pytest.approx(1 - motp_distance, abs=1e-5)


def test_py_motmetrics_example_numbers():
    pairs = []
    for name in ("TUD-Campus", "TUD-Stadtmitte"):
        gt = read_mot(os.path.join(MM_DATA, name, "gt.txt"))
        tracks = read_mot(os.path.join(MM_DATA, name, "test.txt"))
        scores = track_metrics(gt, tracks)
        assert list(scores) == list(TRACK_METRICS)
        _check(scores, EXPECTED[name])
        assert 0 < scores["HOTA"] < 1
        pairs.append((gt, tracks))
    _check(combine_track_metrics(pairs), EXPECTED["OVERALL"])
    each, combined = score_sequences(pairs)  # each sequence evaluated once, both answers
    for name, scores in zip(("TUD-Campus", "TUD-Stadtmitte"), each):
        _check(scores, EXPECTED[name])
    _check(combined, EXPECTED["OVERALL"])


def _tracks(frames, ids, boxes, scores=None):
    n = len(frames)
    return MotTracks(np.asarray(frames), np.asarray(ids), np.asarray(boxes, float),
                     np.ones(n) if scores is None else np.asarray(scores), np.zeros(n))


def _two_objects(frames=10):
    t = np.repeat(np.arange(1, frames + 1), 2)
    ids = np.tile([1, 2], frames)
    boxes = [[10 + f, 10, 40 + f, 40] if i == 1 else [100, 100 - f, 130, 130 - f]
             for f, i in zip(t, ids)]
    return t, ids, np.asarray(boxes, float)


def test_the_definitions_on_hand_built_tracks():
    t, ids, boxes = _two_objects()
    gt = _tracks(t, ids, boxes)
    perfect = track_metrics(gt, _tracks(t, ids + 5, boxes))  # any IDs: a bijection
    assert all(perfect[k] == 1.0 for k in ("HOTA", "DetA", "AssA", "LocA", "IDF1", "MOTA"))
    assert (perfect["IDSW"], perfect["MT"], perfect["GT_IDs"], perfect["IDs"]) == (0, 2, 2, 2)
    # the two IDs swapped half way: each ground-truth object is matched to each track for 5 of
    # its 10 frames. AssA = TPA / (TPA + FNA + FPA) = 5 / 15; HOTA = sqrt(DetA * AssA);
    # IDF1: the best one-to-one pairing covers 10 of the 20 boxes; MOTA = 1 - 2 switches / 20
    swapped = ids.copy()
    swapped[t >= 6] = 3 - swapped[t >= 6]
    s = track_metrics(gt, _tracks(t, swapped, boxes))
    assert s["DetA"] == pytest.approx(1.0) and s["AssA"] == pytest.approx(1 / 3)
    assert s["HOTA"] == pytest.approx(np.sqrt(1 / 3))
    assert s["IDF1"] == pytest.approx(0.5) and s["MOTA"] == pytest.approx(0.9)
    assert s["IDSW"] == 2
    # one object missed for 4 frames, then found under a new ID: a fragmentation, no switch
    keep = ~((ids == 2) & (t >= 4) & (t <= 7))
    later = np.where((ids == 2) & (t > 7), 9, ids)
    s = track_metrics(gt, _tracks(t[keep], later[keep], boxes[keep]))
    assert s["Frag"] == 1 and s["IDSW"] == 1  # CLEAR counts the new ID on return as a switch
    assert s["MOTA"] == pytest.approx(1 - (4 + 1) / 20)
    # nothing tracked: no detection, all missed
    empty = track_metrics(gt, _tracks([], [], np.zeros((0, 4))), num_frames=10)
    assert empty["HOTA"] == 0 and empty["MOTA"] == 0 and empty["ML"] == 2


def test_boxes_not_considered_are_not_scored_either_way():
    """A ground-truth box marked not considered (hidden) is no miss, and a track on it no
    false positive (the MOT Challenge's rule); elsewhere a stray box is a false positive."""
    t, ids, boxes = _two_objects(4)
    considered = np.where((ids == 2) & (t == 3), 0.0, 1.0)
    gt = _tracks(t, ids, boxes, considered)
    on_hidden = track_metrics(gt, _tracks(t, ids, boxes))
    assert on_hidden["MOTA"] == 1.0 and on_hidden["IDF1"] == 1.0
    stray = np.concatenate([boxes, [[300, 300, 320, 320]]])
    s = track_metrics(gt, _tracks(np.append(t, 3), np.append(ids, 5), stray))
    assert s["MOTA"] == pytest.approx(1 - 1 / 7)


def test_random_tracks_agree_with_py_motmetrics(tmp_path, monkeypatch):
    """Random ground truth and a tracker that errs (drops, jitters, swaps, strays), scored by us
    (TrackEval) and by py-motmetrics' own code from the same files."""
    # py-motmetrics 1.4's IoU matrix still calls np.asfarray, which NumPy 2 removed
    monkeypatch.setattr(np, "asfarray", lambda a, dtype=float: np.asarray(a, dtype),
                        raising=False)
    rng = np.random.default_rng(0)
    gt_lines, pred_lines = [], []
    for frame in range(1, 61):
        n = 6
        xy = np.arange(n)[:, None] * 70.0 + frame + np.zeros((n, 2))
        boxes = np.concatenate([xy, xy + 40], axis=1)
        gt_lines += [f"{frame},{i + 1},{b[0]},{b[1]},40,40,1,1,1" for i, b in enumerate(boxes)]
        keep = rng.uniform(size=n) > 0.15
        noisy = boxes + rng.normal(0, 3, boxes.shape)
        ids = np.arange(1, n + 1) + (100 if frame > 30 else 0) * (np.arange(n) % 2)
        pred_lines += mot_lines(frame, ids[keep], noisy[keep])
        if rng.uniform() < 0.3:
            pred_lines += mot_lines(frame, [999], [[500, 5, 530, 35]])
    (tmp_path / "gt.txt").write_text("\n".join(gt_lines) + "\n")
    (tmp_path / "pred.txt").write_text("\n".join(pred_lines) + "\n")
    ours = track_metrics(read_mot(tmp_path / "gt.txt"), read_mot(tmp_path / "pred.txt"))
    acc = mm.utils.compare_to_groundtruth(mm.io.loadtxt(str(tmp_path / "gt.txt")),
                                          mm.io.loadtxt(str(tmp_path / "pred.txt")), "iou",
                                          distth=0.5)
    theirs = mm.metrics.create().compute(acc, metrics=["idf1", "mota", "num_switches"],
                                         return_dataframe=False)
    assert ours["IDF1"] == pytest.approx(theirs["idf1"], abs=1e-6)
    assert ours["MOTA"] == pytest.approx(theirs["mota"], abs=1e-6)
    assert ours["IDSW"] == theirs["num_switches"]  # (MT: the TUD numbers above check it)
    assert 0.3 < ours["IDF1"] < 0.95 and ours["IDSW"] > 0  # the case has errors to find
