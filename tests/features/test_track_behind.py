"""``yolo3 benchmark track`` behind real detectors: the training stills, ``yolo3 track`` end to
end equal to the benchmark's default row (the same detector at the same threshold, a sequence
whose bfloat16 scores tie near it), and the flags refused together."""
from __future__ import annotations

import json
import os

import numpy as np
import pytest
from cli_harness import assert_refused

from yolo3.benchmarks.track_behind import HeldOut, end_to_end_difference
from yolo3.benchmarks.track_detectors import detect_frames, write_stills
from yolo3.benchmarks.track_runs import tracked
from yolo3.data.mot import read_mot
from yolo3.data.synthetic_video import make_video_sequence
from yolo3.inference.tracking import DETECTION_SCORE


@pytest.fixture(scope="module")
def random_tiny_af(tmp_path_factory):
    """tiny-af-96 with seeded random weights, the class outputs spread so that the scores run
    from 0.01 to about 0.5: many boxes near the trackers' thresholds, ties among them."""
    import keras

    from yolo3.checkpoint.metadata import ModelInfo
    from yolo3.checkpoint.saving import atomic_save_model
    from yolo3.config.specs import get_spec
    from yolo3.modeling.bodies import build_body
    keras.utils.set_random_seed(3)
    spec = get_spec("tiny-af")
    path = str(tmp_path_factory.mktemp("model") / "tiny-af.keras")
    body = build_body("tiny-af", 4)
    for layer in body.layers:
        if layer.name.endswith("cls_pred"):
            kernel, bias = layer.get_weights()
            layer.set_weights([kernel * 100.0, np.full_like(bias, -4.0)])
    atomic_save_model(body, path,
                      ModelInfo.of_head(spec.head, 4, variant="tiny-af", input_size=(96, 96)))
    return path


@pytest.fixture(scope="module")
def sequence(tmp_path_factory):
    folder = str(tmp_path_factory.mktemp("held") / "seq")
    make_video_sequence(folder, 12, (96, 128), 3, 0, "shapes", pan=True)
    return HeldOut("seq", "moving", read_mot(os.path.join(folder, "gt", "gt.txt")),
                   [os.path.join(folder, "img1", f"{t:06d}.jpg") for t in range(1, 13)])


def test_the_stills_are_every_third_frame_with_the_boxes_a_detector_can_find(tmp_path):
    stills = write_stills(str(tmp_path), [7, 8], [9], 7, (96, 128), 4, "shapes", None, every=3)
    rows = (tmp_path / "train.txt").read_text().splitlines()
    assert len(rows) == stills.images == 6  # frames 1, 4 and 7 of two sequences
    assert (tmp_path / "classes.txt").read_text().split() == ["circle", "square", "triangle",
                                                              "cross"]
    assert len((tmp_path / "val.txt").read_text().splitlines()) == 3
    boxes = 0
    for row in rows:
        path, *fields = row.split()
        frame = int(os.path.basename(path)[:6])
        assert frame in (1, 4, 7) and os.path.isfile(path)
        gt = read_mot(os.path.join(os.path.dirname(os.path.dirname(path)), "gt", "gt.txt"))
        truth = gt.frame(frame)
        considered = truth.boxes[truth.scores > 0]
        got = np.array([[float(v) for v in f.split(",")] for f in fields]).reshape(-1, 5)
        assert len(got) == len(considered)  # the hidden ones (under a quarter seen) left out
        np.testing.assert_allclose(got[:, :4], np.round(considered), atol=0.5)
        np.testing.assert_array_equal(got[:, 4], truth.classes[truth.scores > 0])
        boxes += len(got)
    assert boxes == stills.boxes
    # one still camera among the sequences: its frames' backgrounds do not move
    assert os.path.isdir(tmp_path / "train_8" / "img1")


def test_yolo3_track_end_to_end_equals_the_benchmarks_default_row(random_tiny_af, sequence,
                                                                  tmp_path):
    detections, ms = detect_frames(random_tiny_af, sequence.frames, DETECTION_SCORE)
    assert ms > 0
    tracks, _ = tracked("bytetrack", detections, sequence.frames)
    assert len(tracks) > 0
    count, differ, largest = end_to_end_difference(random_tiny_af, sequence, tracks,
                                                   str(tmp_path))
    assert (count, differ) == (len(tracks), 0) and largest < 0.01  # MOT's two decimals
    # and the comparison sees a difference: one box moved, one ID changed
    moved = read_mot(os.path.join(tmp_path, "end_to_end", "seq.txt"))
    moved.boxes[0] += 3.0
    moved.ids[-1] += 100
    (tmp_path / "again").mkdir()
    count, differ, largest = end_to_end_difference(random_tiny_af, sequence, moved,
                                                   str(tmp_path / "again"))
    assert differ == 2 and largest == pytest.approx(3.0, abs=0.01)


@pytest.mark.parametrize("argv, named", [
    (["--train-epochs", "2", "--detectors", "MODEL"], "--detectors"),
    (["--train-output", "OUT"], "--train-output"),
])
def test_the_detector_sources_are_refused_together(tmp_path, capsys, argv, named):
    from yolo3.cli import main
    model = tmp_path / "m.keras"
    model.write_bytes(b"x")
    argv = [str(model) if a == "MODEL" else str(tmp_path / "out") if a == "OUT" else a
            for a in argv]
    code = main(["benchmark", "track", *argv])
    assert_refused(code, capsys.readouterr().err, named)
    assert not (tmp_path / "out").exists()


@pytest.mark.slow  # CI runs it; each piece keeps its default test above
def test_the_benchmark_tracks_behind_a_detector_and_checks_yolo3_track(random_tiny_af,
                                                                       tmp_path, capsys):
    from yolo3.cli import main
    js = tmp_path / "track.json"
    assert main(["benchmark", "track", "--detectors", random_tiny_af, "--sequences", "2",
                 "--seeds", "0", "--frames", "12", "--size", "96", "128", "--objects", "3",
                 "--style", "shapes", "--trackers", "bytetrack", "sort", "--json",
                 str(js)]) == 0
    out = capsys.readouterr().out
    assert "| tracker | HOTA | DetA | AssA | IDF1 | MOTA | ID switches | HOTA moving" in out
    assert "0 differing in frame or ID" in out
    figures = json.loads(js.read_text())
    entry = figures["detectors"][random_tiny_af]
    assert set(entry["trackers"]) == {"bytetrack", "sort"} and entry["detect_ms"] > 0
    for row in entry["trackers"].values():  # one moving and one still camera, each scored
        assert 0 <= row["HOTA_moving"] <= 1 and 0 <= row["HOTA_still"] <= 1
    assert 0 <= entry["quality"]["mAP50"] <= 1
    assert figures["end_to_end"]["differing"] == 0


@pytest.mark.slow  # CI runs it: one real training run through the benchmark's own path
def test_the_benchmark_trains_its_detectors_and_keeps_them_where_asked(tmp_path, capsys):
    from yolo3.cli import main
    kept = tmp_path / "detectors"
    kept.mkdir()
    (kept / "mine.txt").write_text("the user's")
    deep = kept / "tiny-af-e1" / "notes" / "mine.txt"  # inside the run folder it trains into
    deep.parent.mkdir(parents=True)
    deep.write_text("the user's too")
    assert main(["benchmark", "track", "--train-epochs", "1", "--train-sequences", "1",
                 "--train-frames", "24", "--train-size", "64", "--sequences", "1", "--seeds",
                 "0", "--frames", "8", "--size", "96", "128", "--objects", "2", "--style",
                 "shapes", "--trackers", "bytetrack", "--train-output", str(kept),
                 "--exist-ok"]) == 0
    out = capsys.readouterr().out
    assert "training stills: 8 images" in out and "tiny-af, 1 epochs at 64 px: trained" in out
    assert (kept / "tiny-af-e1" / "final.keras").is_file()
    assert (kept / "mine.txt").read_text() == "the user's"
    assert deep.read_text() == "the user's too"
    assert "tiny-af 1 epochs: mAP@0.5" in out


def test_a_train_output_holding_the_users_files_is_refused_before_any_work(tmp_path, capsys):
    from yolo3.cli import main
    kept = tmp_path / "detectors"
    kept.mkdir()
    (kept / "mine.txt").write_text("the user's")
    code = main(["benchmark", "track", "--train-epochs", "1", "--train-output", str(kept)])
    assert_refused(code, capsys.readouterr().err, "--train-output", "mine.txt", "--exist-ok")
    assert sorted(p.name for p in kept.iterdir()) == ["mine.txt"]
