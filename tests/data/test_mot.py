"""yolo3.data.mot: MOT-layout tracks read and written, round trip, and each bad line refused with
the file, the line and the reason."""
from __future__ import annotations

import numpy as np
import pytest

from yolo3.core.errors import AnnotationError
from yolo3.data.mot import MotTracks, mot_lines, read_mot


def test_lines_read_back_as_written(tmp_path):
    boxes = np.array([[10.5, 20.25, 40.5, 80.0], [100.0, 50.0, 130.0, 70.0]])
    lines = mot_lines(3, [7, 2], boxes, [0.9, 0.45])
    assert lines[0] == "3,7,10.50,20.25,30.00,59.75,0.9000,-1,-1,-1"
    path = tmp_path / "t.txt"
    path.write_text("\n".join(lines + mot_lines(1, [2], boxes[1:])) + "\n")
    tracks = read_mot(path)
    # sorted by frame, then ID
    np.testing.assert_array_equal(tracks.frames, [1, 3, 3])
    np.testing.assert_array_equal(tracks.ids, [2, 2, 7])
    np.testing.assert_allclose(tracks.boxes, boxes[[1, 1, 0]], atol=0.005)
    np.testing.assert_allclose(tracks.scores, [1.0, 0.45, 0.9])
    np.testing.assert_array_equal(tracks.classes, [-1, -1, -1])
    assert tracks.num_frames == 3 and len(tracks.frame(2)) == 0 and len(tracks.frame(3)) == 2
    per_frame = tracks.by_frame()
    assert [len(f["ids"]) for f in per_frame] == [1, 0, 2]


def test_ground_truth_keeps_its_considered_flag_and_class(tmp_path):
    path = tmp_path / "gt.txt"
    path.write_text("1,1,10,10,20,20,1,2,0.9\n1,2,50,50,10,10,0,0,0.1\n# a comment\n\n"
                    "2 1 12 10 20 20 1 2 0.8\n")  # spaces separate too
    gt = read_mot(path)
    np.testing.assert_array_equal(gt.scores, [1, 0, 1])
    np.testing.assert_array_equal(gt.classes, [2, 0, 2])
    np.testing.assert_array_equal(gt.frames, [1, 1, 2])


@pytest.mark.parametrize("line, reason", [
    ("1,1,10,10,20", "5 fields; the MOT layout has at least 6"),
    ("x,1,10,10,20,20", "frame 'x' is not a number"),
    ("1.5,1,10,10,20,20", "frame '1.5' is not a whole number"),
    ("0,1,10,10,20,20", "frame 0: frames count from 1"),
    ("1,-3,10,10,20,20", "id -3: IDs are 0 or more"),
    ("1,1,10,10,0,20", "width and height must be above 0"),
    ("1,1,10,nan,20,20", "y 'nan' is not finite"),
    ("1,1,10,10,20,20,high", "score 'high' is not a number"),
])
def test_a_bad_line_is_refused_with_its_number(tmp_path, line, reason):
    path = tmp_path / "bad.txt"
    path.write_text("1,4,0,0,5,5,1,0,1\n" + line + "\n")
    with pytest.raises(AnnotationError, match=reason) as e:
        read_mot(path)
    assert str(e.value).startswith(f"{path}:2: ")


def test_an_id_twice_in_one_frame_is_refused(tmp_path):
    path = tmp_path / "twice.txt"
    path.write_text("1,4,0,0,5,5\n2,4,0,0,5,5\n2,4,9,9,5,5\n")
    with pytest.raises(AnnotationError, match=r"twice.txt:3: id 4 appears twice in frame 2 "
                                              r"\(first on line 2\)"):
        read_mot(path)


def test_missing_and_binary_files_are_named(tmp_path):
    with pytest.raises(AnnotationError, match="cannot read"):
        read_mot(tmp_path / "none.txt")
    (tmp_path / "bin.txt").write_bytes(b"\xff\xfe\x00\x81" * 10)
    with pytest.raises(AnnotationError, match="not a text file"):
        read_mot(tmp_path / "bin.txt")


def test_an_empty_file_is_no_tracks(tmp_path):
    (tmp_path / "empty.txt").write_text("")
    tracks = read_mot(tmp_path / "empty.txt")
    assert len(tracks) == 0 and tracks.num_frames == 0 and tracks.by_frame(2)[1]["boxes"].shape \
        == (0, 4)
    assert isinstance(MotTracks([], [], [], [], []), MotTracks)
