"""yolo3 synth --video, yolo3 track and yolo3 evaluate-tracks end to end: a synthetic sequence,
tracked with a stand-in detector that sees the ground truth (so the tracks mean something), the
files it writes against the Python API fed the same detections, the scores against the library
call, and bad input refused with nothing of the user's touched."""
from __future__ import annotations

import json
import re

import cv2
import numpy as np
import pytest
from cli_harness import assert_refused, run_cli, snapshot

from yolo3.data.mot import read_mot
from yolo3.evaluation.track_scores import track_metrics
from yolo3.inference.tracking import Tracker

FRAMES = 40


@pytest.fixture(scope="module")
def sequences(tmp_path_factory):
    from yolo3.cli import main
    out = tmp_path_factory.mktemp("video")
    assert main(["synth", "--video", str(FRAMES), "--sequences", "2", "--size", "96", "128",
                 "--max-objects", "5", "--out", str(out / "data"), "--seed", "3"]) == 0
    (out / "m.keras").write_bytes(b"")  # what --model names: the stand-in detector loads
    return out / "data"


class Oracle:
    """A detector that finds each considered ground-truth box, jittered, with a seeded score."""

    class_names = ["circle", "square", "triangle", "cross"]

    class engine:  # noqa: N801 - what detect/track print
        @staticmethod
        def summary():
            return "engine: oracle"

    def __init__(self, gt_path):
        self.gt = read_mot(gt_path)
        self.t = 0
        self.rng = np.random.default_rng(0)
        self.info = None

    def detect(self, frame):
        self.t += 1
        f = self.gt.frame(self.t)
        keep = f.scores > 0
        boxes = f.boxes[keep] + self.rng.normal(0, 1.0, (int(keep.sum()), 4))
        return boxes, self.rng.uniform(0.5, 1.0, len(boxes)), f.classes[keep]


def _oracle(monkeypatch, gt_path):
    made = []

    def load(*a, **kw):
        made.append(Oracle(gt_path))
        return made[-1]
    monkeypatch.setattr("yolo3.inference.detector.load_detector", load)
    return made


def test_track_writes_what_the_api_gives(sequences, tmp_path, monkeypatch, capsys):
    seq = sequences / "seq01"
    _oracle(monkeypatch, seq / "gt" / "gt.txt")
    out = tmp_path / "out"
    code, err = run_cli(["track", "--model", sequences.parent / "m.keras", "--input", seq / "img1", "--output", out,
                         "--tracker", "bytetrack", "--min-frames", 2], capsys)
    assert code == 0, err
    assert f"{FRAMES} frames" in err and "tracker: bytetrack, min_frames 2" in err
    assert sorted(p.name for p in out.iterdir() if not p.name.startswith(".")) == \
        ["seq01.json", "seq01.mp4", "seq01.txt"]  # named after the sequence, not img1
    # the API fed the same detections
    oracle, tracker = Oracle(seq / "gt" / "gt.txt"), Tracker("bytetrack", min_frames=2)
    lines = []
    from yolo3.data.mot import mot_lines
    for t in range(1, FRAMES + 1):
        tracks = tracker.update(*oracle.detect(None))
        lines += mot_lines(t, tracks.ids, tracks.boxes, tracks.scores)
    assert (out / "seq01.txt").read_text().splitlines() == lines and len(lines) > 50
    entries = json.loads((out / "seq01.json").read_text())
    assert len(entries) == len(lines)
    assert set(entries[0]) == {"frame", "id", "box", "score", "class", "name"}
    video = cv2.VideoCapture(str(out / "seq01.mp4"))
    assert int(video.get(cv2.CAP_PROP_FRAME_COUNT)) == FRAMES
    assert (int(video.get(cv2.CAP_PROP_FRAME_WIDTH)), int(video.get(cv2.CAP_PROP_FRAME_HEIGHT))) \
        == (128, 96)
    # scored: the table and the JSON hold the library call's figures
    js = tmp_path / "scores.json"
    code, err = run_cli(["evaluate-tracks", "--gt", seq, "--tracks", out, "--json", js], capsys)
    assert code == 0, err
    want = track_metrics(read_mot(seq / "gt" / "gt.txt"), read_mot(out / "seq01.txt"), FRAMES)
    got = json.loads(js.read_text())["seq01"]
    assert got == pytest.approx(want)
    assert want["MOTA"] > 0.7 and want["HOTA"] > 0.5


def test_evaluate_tracks_scores_every_sequence_and_combines(sequences, tmp_path, monkeypatch,
                                                            capsys):
    from yolo3.cli import main
    from yolo3.evaluation.track_scores import combine_track_metrics
    out = tmp_path / "tracks"
    for name in ("seq01", "seq02"):
        _oracle(monkeypatch, sequences / name / "gt" / "gt.txt")
        code, err = run_cli(["track", "--model", sequences.parent / "m.keras", "--input", sequences / name / "img1",
                             "--output", out, "--no-draw", "--exist-ok"], capsys)
        assert code == 0, err
    assert main(["evaluate-tracks", "--gt", str(sequences), "--tracks", str(out)]) == 0
    table = capsys.readouterr().out.splitlines()
    assert table[0].startswith("| sequence | HOTA | DetA | AssA |")
    assert [row.split(" | ")[0] for row in table[2:]] == ["| seq01", "| seq02", "| combined"]
    pairs = [(read_mot(sequences / n / "gt" / "gt.txt"), read_mot(out / f"{n}.txt"), FRAMES)
             for n in ("seq01", "seq02")]
    combined = combine_track_metrics(pairs)
    assert table[4].split(" | ")[1] == f"{combined['HOTA']:.3f}"
    # a folder of sequences with one sequence's tracks missing: named
    (out / "seq02.txt").unlink()
    code, err = run_cli(["evaluate-tracks", "--gt", sequences, "--tracks", out], capsys)
    assert_refused(code, err, "no seq02.txt for the sequence")


@pytest.mark.parametrize("case", ["empty video", "frames of two sizes", "output of the user's",
                                  "setting the tracker lacks", "bad MOT file"])
def test_bad_input_is_refused_and_nothing_is_touched(sequences, tmp_path, monkeypatch, capsys,
                                                      case):
    seq = sequences / "seq01"
    _oracle(monkeypatch, seq / "gt" / "gt.txt")
    out = tmp_path / "out"
    argv = ["track", "--model", sequences.parent / "m.keras", "--input", seq / "img1", "--output", out]
    if case == "empty video":
        (tmp_path / "empty.mp4").write_bytes(b"")
        argv[4] = tmp_path / "empty.mp4"
        named = "cannot be read as a video"
    elif case == "frames of two sizes":
        frames = tmp_path / "frames"
        frames.mkdir()
        cv2.imwrite(str(frames / "1.jpg"), np.zeros((40, 60, 3), np.uint8))
        cv2.imwrite(str(frames / "2.jpg"), np.zeros((50, 60, 3), np.uint8))
        argv[4] = frames
        named = "2.jpg: frame of 60x50 px, but"
    elif case == "output of the user's":
        out.mkdir()
        (out / "seq01.txt").write_text("my notes")
        named = "yolo3 did not write"
    elif case == "setting the tracker lacks":
        argv += ["--tracker", "ocsort", "--activation", "0.5"]
        named = "ocsort does not take --activation"
    else:
        bad = tmp_path / "bad"
        (bad / "gt").mkdir(parents=True)
        (bad / "gt" / "gt.txt").write_text("1,1,0,0,5,5\n1,1,3,3,5,5\n")
        (tmp_path / "t.txt").write_text("1,1,0,0,5,5\n")
        argv = ["evaluate-tracks", "--gt", bad / "gt" / "gt.txt", "--tracks", tmp_path / "t.txt"]
        named = "gt.txt:2: id 1 appears twice in frame 1"
    before = snapshot(tmp_path, seq)
    code, err = run_cli(argv, capsys)
    assert_refused(code, err, named)
    assert snapshot(tmp_path, seq) == before


def _video(path, frames, fourcc):
    writer = cv2.VideoWriter(str(path), cv2.VideoWriter_fourcc(*fourcc), 30, (128, 96))
    rng = np.random.default_rng(0)
    for _ in range(frames):  # noise: every frame a sizeable JPEG
        writer.write(rng.integers(0, 255, (96, 128, 3), dtype=np.uint8))
    writer.release()
    data = path.read_bytes()
    return data


def test_a_truncated_video_is_tracked_as_far_as_it_reads_or_refused(sequences, tmp_path,
                                                                     monkeypatch, capsys):
    """An AVI cut in half still opens (its header says 40 frames): the frames it holds are
    tracked, with a warning; an MP4 cut in half has lost its index: refused, nothing written."""
    _oracle(monkeypatch, sequences / "seq01" / "gt" / "gt.txt")
    avi = tmp_path / "cut.avi"
    data = _video(avi, FRAMES, "MJPG")
    avi.write_bytes(data[:len(data) // 2])
    code, err = run_cli(["track", "--model", sequences.parent / "m.keras", "--input", avi,
                         "--output", tmp_path / "avi", "--fourcc", "MJPG"], capsys)
    assert code == 0, err
    read = int(re.search(r"(\d+) frames, \d+ tracks", err).group(1))
    assert 0 < read < FRAMES and f"the video says {FRAMES} frames, {read} could be read" in err
    assert len({int(line.split(",")[0]) for line in
                (tmp_path / "avi" / "cut.txt").read_text().splitlines()}) <= read
    mp4 = tmp_path / "cut.mp4"
    data = _video(mp4, FRAMES, "mp4v")
    mp4.write_bytes(data[:len(data) // 2])
    code, err = run_cli(["track", "--model", sequences.parent / "m.keras", "--input", mp4,
                         "--output", tmp_path / "mp4"], capsys)
    assert_refused(code, err, "cut.mp4: cannot be read as a video")
    assert not (tmp_path / "mp4").exists()
