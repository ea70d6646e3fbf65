"""yolo3.inference.tracking: the glue over Roboflow's trackers (the same IDs as the library
called directly), its settings checked, tracks that follow objects, and memory that stays flat
over a long stream."""
from __future__ import annotations

import warnings

import numpy as np
import pytest

from yolo3.core.errors import SettingError
from yolo3.data.mot import MotTracks
from yolo3.data.synthetic_video import render_sequence
from yolo3.evaluation.track_scores import track_metrics
from yolo3.inference.tracking import (
    TRACKERS,
    Tracker,
    Trails,
    Tracks,
    track_frames,
)


def _detections(rows, rng, jitter=0.02):
    """Every considered ground-truth box, jittered, scoring 0.9."""
    found = rows[rows[:, 7] > 0]
    boxes = found[:, 1:5] + rng.normal(0, jitter, (len(found), 4)) * np.tile(
        found[:, 3:5] - found[:, 1:3], 2)
    return boxes, np.full(len(found), 0.9), found[:, 5].astype(int)


def test_settings_are_checked_and_named():
    with pytest.raises(SettingError, match="tracker must be one of bytetrack, botsort, ocsort, "
                                           "sort, got 'deepsort'"):
        Tracker("deepsort")
    with pytest.raises(SettingError, match=r"unknown tracker settings \['patience'\]") as e:
        Tracker("bytetrack", patience=3)
    assert e.value.settings == ("patience",)
    with pytest.raises(SettingError, match="ocsort does not take activation"):
        Tracker("ocsort", activation=0.5)
    # None: the measured default where there is one, else the library's
    assert Tracker("sort", lost_frames=None).settings == {"min_frames": 1, "activation": 0.5,
                                                          "match_iou": 0.2}
    assert Tracker("bytetrack", min_frames=3).settings["min_frames"] == 3
    with pytest.raises(ValueError, match="3 boxes, 2 scores and 3 classes"):
        Tracker().update(np.zeros((3, 4)), np.zeros(2), np.zeros(3))


@pytest.mark.parametrize("method", list(TRACKERS))
def test_the_glue_gives_the_librarys_ids(method):
    """Our wrapper against the library called directly on the same detections: the same boxes
    under the same IDs, frame by frame (unconfirmed detections left out, sorted by ID); smoothed,
    each box is the library's track state after the frame."""
    import supervision as sv
    import trackers
    frames = list(render_sequence(40, (96, 128), 5, seed=4, style="shapes"))
    rng = np.random.default_rng(0)
    dets = [_detections(rows, rng) for _, rows in frames]
    ours = Tracker(method, smooth=False, lost_frames=20)
    smoothed = Tracker(method, lost_frames=20)
    settings = ours.arguments
    assert settings["lost_track_buffer"] == 20
    assert len(settings) == len(ours.settings)  # each setting, by the library's name for it
    theirs = getattr(trackers, TRACKERS[method])(**settings)
    matched = 0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for (frame, _), (boxes, scores, classes) in zip(frames, dets):
            got = ours.update(boxes, scores, classes, frame)
            smooth = smoothed.update(boxes, scores, classes, frame)
            ref = theirs.update(sv.Detections(xyxy=boxes.astype(np.float32),
                                              confidence=scores.astype(np.float32),
                                              class_id=classes),
                                frame if method == "botsort" else None)
            keep = ref.tracker_id >= 0
            order = np.argsort(ref.tracker_id[keep], kind="stable")
            np.testing.assert_array_equal(got.ids, ref.tracker_id[keep][order] + 1)  # from 1
            np.testing.assert_allclose(got.boxes, ref.xyxy[keep][order], atol=1e-4)
            np.testing.assert_array_equal(got.classes, ref.class_id[keep][order])
            state = {t.tracker_id + 1: t.get_state_bbox() for t in theirs.tracks}
            np.testing.assert_array_equal(smooth.ids, got.ids)
            if len(smooth):
                np.testing.assert_allclose(smooth.boxes, [state[i] for i in smooth.ids],
                                           atol=1e-3)
            matched += len(got)
    assert matched > 40


def test_clean_detections_are_tracked_under_steady_ids():
    """Near-perfect detections of a panning sequence: nearly every box tracked (MOTA), and
    association well above chance (objects that leave and come back get new IDs from a motion
    tracker: measured HOTA 0.65, AssA 0.46 here)."""
    frames = list(render_sequence(150, (120, 160), 6, seed=2, style="shapes"))
    rng = np.random.default_rng(1)
    tracker = Tracker("bytetrack")
    rows_gt, rows_pred = [], []
    for t, (frame, rows) in enumerate(frames, 1):
        tracks = tracker.update(*_detections(rows, rng), frame)
        rows_gt += [(t, *r[[0, 1, 2, 3, 4, 7, 5]]) for r in rows]
        rows_pred += [(t, i, *b, s, c) for i, b, s, c in zip(tracks.ids, tracks.boxes,
                                                            tracks.scores, tracks.classes)]
    gt, pred = (np.asarray(r, float) for r in (rows_gt, rows_pred))
    scores = track_metrics(MotTracks(gt[:, 0], gt[:, 1], gt[:, 2:6], gt[:, 6], gt[:, 7]),
                           MotTracks(pred[:, 0], pred[:, 1], pred[:, 2:6], pred[:, 6],
                                     pred[:, 7]), 150)
    assert scores["MOTA"] > 0.85 and scores["DetA"] > 0.85, scores
    assert scores["HOTA"] > 0.55 and scores["AssA"] > 0.4, scores


def test_memory_stays_flat_over_a_long_stream():
    """10,000 frames of objects that come and go: the tracker keeps only live tracks and the
    trails only recent ones."""
    rng = np.random.default_rng(3)
    tracker, trails = Tracker("bytetrack", lost_frames=15), Trails(20)
    live = {}
    sizes = []
    for frame in range(10_000):
        if rng.uniform() < 0.05 or not live:  # a new object now and then
            live[frame] = [rng.uniform(0, 500), rng.uniform(0, 300), rng.uniform(-2, 2),
                           rng.uniform(-2, 2), frame + int(rng.integers(20, 120))]
        live = {k: v for k, v in live.items() if v[4] > frame}
        boxes = []
        for obj in live.values():
            obj[0] += obj[2]
            obj[1] += obj[3]
            boxes.append([obj[0], obj[1], obj[0] + 30, obj[1] + 30])
        boxes = np.asarray(boxes, float).reshape(-1, 4)
        tracks = tracker.update(boxes, np.full(len(boxes), 0.9), np.zeros(len(boxes)))
        trails.update(tracks)
        if frame % 1000 == 999:
            sizes.append((len(tracker._tracker.tracks), len(trails)))
    assert max(s[0] for s in sizes) <= 40 and max(s[1] for s in sizes) <= 40, sizes


def test_trails_hold_the_recent_centres():
    trails = Trails(3)
    for x in range(5):
        out = trails.update(Tracks(np.array([[x, 0, x + 2, 2]], float), np.ones(1),
                                   np.zeros(1, int), np.array([7])))
    np.testing.assert_array_equal(out[0], [[3, 1], [4, 1], [5, 1]])
    for _ in range(3):
        trails.update(Tracks(np.zeros((0, 4)), np.zeros(0), np.zeros(0, int),
                             np.zeros(0, int)))
    assert len(trails) == 0  # unseen for 3 frames: forgotten


def test_track_frames_streams_a_detector_through_a_tracker():
    class Oracle:
        def __init__(self):
            self.calls = 0

        def detect(self, frame):
            self.calls += 1
            return np.array([[10.0 + self.calls, 10, 40 + self.calls, 40]]), np.array([0.9]), \
                np.array([1])

    oracle = Oracle()
    frames = (np.zeros((64, 64, 3), np.uint8) for _ in range(6))
    stream = track_frames(oracle, Tracker("bytetrack"), frames)
    assert oracle.calls == 0  # lazy
    out = [tracks for _, tracks in stream]
    assert oracle.calls == 6 and set(np.concatenate([t.ids for t in out]).tolist()) == {1}
