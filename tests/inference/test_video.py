"""yolo3.inference.video: reading RGB frames, writing annotated video, and the errors a user meets
(a file OpenCV cannot open, a writer that cannot start). ``detect_video`` itself is tested with
keras-yolo3's scripts in test_keras_yolo3.py."""
from __future__ import annotations

import numpy as np
import pytest

from yolo3.core.errors import CommandFailed
from yolo3.inference.video import VideoWriter, open_video

SIZE_HW = (48, 80)


def _frames(n: int) -> list:
    """``n`` RGB frames of flat colours (lossy codecs keep flat colours nearly exact)."""
    colours = [(200, 30, 30), (30, 200, 30), (30, 30, 200), (220, 220, 40), (40, 220, 220)]
    return [np.full((*SIZE_HW, 3), colours[i % len(colours)], np.uint8) for i in range(n)]


def test_written_frames_read_back_as_rgb_at_the_frame_rate(tmp_path):
    path = str(tmp_path / "clip.avi")
    writer = VideoWriter(path, "MJPG", 12.0)
    frames = _frames(5)
    for frame in frames:
        writer.write(frame)
    writer.release()
    video = open_video(path)
    try:
        assert video.fps == pytest.approx(12.0)
        assert video.size == (SIZE_HW[1], SIZE_HW[0])  # (w, h)
        assert video.frame_count == 5
        read = list(video.frames())
    finally:
        video.release()
    assert len(read) == 5
    for got, want in zip(read, frames):
        assert got.shape == (*SIZE_HW, 3) and got.dtype == np.uint8
        # RGB order kept through OpenCV's BGR (swapped channels would differ by about 110 here)
        assert np.abs(got.astype(int) - want.astype(int)).mean() < 8


def test_max_frames_stops_early(tmp_path):
    path = str(tmp_path / "clip.avi")
    writer = VideoWriter(path, "MJPG", 10.0)
    for frame in _frames(6):
        writer.write(frame)
    writer.release()
    video = open_video(path)
    try:
        assert len(list(video.frames(max_frames=2))) == 2
    finally:
        video.release()


def test_unreadable_sources_are_named(tmp_path):
    missing = tmp_path / "missing.mp4"
    with pytest.raises(CommandFailed, match="missing.mp4: cannot open video"):
        open_video(str(missing))
    not_video = tmp_path / "notes.mp4"
    not_video.write_text("not a video")
    with pytest.raises(CommandFailed, match="notes.mp4"):
        open_video(str(not_video))


def test_a_writer_that_cannot_open_names_its_file(tmp_path):
    path = str(tmp_path / "no_such_folder" / "out.avi")
    writer = VideoWriter(path, "MJPG", 10.0)
    with pytest.raises(CommandFailed, match="out.avi: cannot open a video writer \\(its folder "
                                            "cannot be written\\)"):
        writer.write(_frames(1)[0])
    writer.release()


def test_a_codec_opencv_cannot_write_names_the_flag_and_the_file_the_user_knows(tmp_path):
    from yolo3.core.errors import ArgumentError
    writer = VideoWriter(str(tmp_path / ".tmp-123-out.mp4"), "zzzz", 10.0, shown="out/clip.mp4")
    with pytest.raises(ArgumentError, match="^--fourcc zzzz: OpenCV cannot write out/clip.mp4 "
                                            "with this codec"):
        writer.write(_frames(1)[0])
    writer.release()
