"""yolo3.data.synthetic_video: sequences with ground-truth tracks that test a tracker (objects
cross and hide each other, leave and come back, the camera pans), checked against the pixels
they claim; written in the MOT17 layout under the ownership rule."""
from __future__ import annotations

import configparser

import numpy as np
import pytest

from yolo3.core.errors import SettingError
from yolo3.data.mot import read_mot
from yolo3.data.synthetic_video import MIN_VISIBLE, make_video_sequence, render_sequence


def _rows(frames):
    return [rows for _, rows in frames]


def test_a_sequence_has_what_tracking_is_judged_on():
    frames = list(render_sequence(240, (120, 160), num_objects=8, seed=3, style="shapes"))
    rows = _rows(frames)
    assert all(f.shape == (120, 160, 3) and f.dtype == np.uint8 for f, _ in frames)
    considered = {}
    partly_hidden = 0
    for t, r in enumerate(rows):
        assert len(set(r[:, 0].tolist())) == len(r)  # an ID once per frame
        assert (r[:, 1] >= 0).all() and (r[:, 3] <= 160).all() and (r[:, 4] <= 120).all()
        assert ((r[:, 7] == 1) == (r[:, 6] >= MIN_VISIBLE)).all()
        partly_hidden += int(((r[:, 6] > 0) & (r[:, 6] < 0.7)).sum())
        for ident in r[r[:, 7] == 1, 0].astype(int):
            considered.setdefault(ident, []).append(t)
    # objects come back after leaving (or being hidden): gaps in their considered frames
    returns = sum(int((np.diff(ts) > 1).sum()) for ts in considered.values())
    assert returns >= 3, returns
    assert partly_hidden >= 20, partly_hidden
    assert len(considered) >= 6


def test_the_boxes_are_the_objects_pixels():
    """Against the empty world (the same seed, no objects, a still camera): the pixels an object
    changes lie inside its box and reach the box's edges; outside every box nothing changed."""
    kw = dict(frame_hw=(96, 128), seed=5, style="shapes", pan=False)
    world = [f for f, _ in render_sequence(40, num_objects=0, **kw)]
    checked = 0
    for (frame, rows), empty in zip(render_sequence(40, num_objects=1, **kw), world):
        changed = np.abs(frame.astype(int) - empty.astype(int)).max(axis=2) > 0
        if not len(rows):
            assert not changed.any()
            continue
        [(ident, x1, y1, x2, y2, cls, vis, _)] = rows
        ys, xs = np.nonzero(changed)
        assert ys.min() >= y1 and ys.max() < y2 and xs.min() >= x1 and xs.max() < x2
        if vis == 1.0 and x1 > 0 and y1 > 0 and x2 < 128 and y2 < 96:  # whole, inside the frame
            assert ys.min() - y1 <= 1 and y2 - 1 - ys.max() <= 1
            assert xs.min() - x1 <= 1 and x2 - 1 - xs.max() <= 1
            checked += 1
    assert checked >= 10


def test_the_camera_pans_and_the_seed_decides():
    a = [f for f, _ in render_sequence(30, (64, 96), 4, seed=1, style="shapes")]
    b = [f for f, _ in render_sequence(30, (64, 96), 4, seed=1, style="shapes")]
    still = [f for f, _ in render_sequence(30, (64, 96), 4, seed=1, style="shapes", pan=False)]
    assert all(np.array_equal(x, y) for x, y in zip(a, b))
    assert not np.array_equal(a[0][:, :, :], a[29])  # the view moved
    assert not all(np.array_equal(x, y) for x, y in zip(a, still))
    with pytest.raises(SettingError, match="style must be photo or shapes"):
        next(render_sequence(2, style="oil"))


def test_written_in_the_mot17_layout(tmp_path):
    gt_path = make_video_sequence(str(tmp_path / "seq01"), 12, (64, 96), 4, seed=2,
                                  style="shapes")
    gt = read_mot(gt_path)
    assert gt.num_frames <= 12 and len(gt) > 0
    assert sorted(p.name for p in (tmp_path / "seq01" / "img1").iterdir())[0] == "000001.jpg"
    assert len(list((tmp_path / "seq01" / "img1").iterdir())) == 12
    info = configparser.ConfigParser()
    info.read(tmp_path / "seq01" / "seqinfo.ini")
    assert dict(info["Sequence"]) == {"name": "seq01", "imdir": "img1", "framerate": "30",
                                      "seqlength": "12", "imwidth": "96", "imheight": "64",
                                      "imext": ".jpg"}
    assert (tmp_path / "seq01" / "classes.txt").read_text().split() == \
        ["circle", "square", "triangle", "cross"]


def test_a_folder_of_the_users_is_refused_and_kept(tmp_path):
    folder = tmp_path / "mine"
    folder.mkdir()
    (folder / "notes.txt").write_text("keep me")
    with pytest.raises(SettingError, match="yolo3 did not write"):
        make_video_sequence(str(folder), 3, (32, 48), 2, style="shapes")
    assert sorted(p.name for p in folder.iterdir()) == ["notes.txt"]
    with pytest.raises(SettingError, match="num_frames must be at least 1"):
        make_video_sequence(str(tmp_path / "none"), 0, style="shapes")
    assert not (tmp_path / "none").exists()
