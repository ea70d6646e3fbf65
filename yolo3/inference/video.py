"""Video files and webcams: reading RGB frames, writing annotated video, and keras-yolo3's
``detect_video``."""
from __future__ import annotations

import os
import time
from dataclasses import dataclass
from typing import Iterator, Optional, Union

import numpy as np

from yolo3.core.errors import ArgumentError, CommandFailed

__all__ = ["VideoSource", "open_video", "VideoWriter", "detect_video"]


@dataclass
class VideoSource:
    """An opened video or webcam: ``fps`` (25 when the container does not say), ``size`` ``(w, h)``,
    ``frame_count`` (0 when unknown, e.g. a webcam)."""

    capture: object
    fps: float
    size: tuple
    frame_count: int
    fourcc: int

    def frames(self, max_frames: int = 0) -> Iterator[np.ndarray]:
        """RGB uint8 frames ``(h, w, 3)`` until the end (or ``max_frames``)."""
        n = 0
        while not max_frames or n < max_frames:
            ok, bgr = self.capture.read()
            if not ok:
                return
            n += 1
            yield np.ascontiguousarray(bgr[:, :, ::-1])

    def release(self) -> None:
        self.capture.release()


def open_video(source: Union[str, int]) -> VideoSource:
    """Open a video file or a webcam index; CommandFailed when OpenCV cannot."""
    import cv2
    webcam = isinstance(source, int) or (isinstance(source, str) and source.isdigit()
                                          and not os.path.exists(source))
    cap = cv2.VideoCapture(int(source) if webcam else str(source))
    if not cap.isOpened():
        raise CommandFailed(f"{source}: cannot open {'webcam' if webcam else 'video'}")
    fps = cap.get(cv2.CAP_PROP_FPS)
    fps = fps if fps and fps > 0 and np.isfinite(fps) else 25.0
    size = (int(cap.get(cv2.CAP_PROP_FRAME_WIDTH)), int(cap.get(cv2.CAP_PROP_FRAME_HEIGHT)))
    count = 0 if webcam else max(0, int(cap.get(cv2.CAP_PROP_FRAME_COUNT)))
    return VideoSource(cap, fps, size, count, int(cap.get(cv2.CAP_PROP_FOURCC)))


class VideoWriter:
    """Writes RGB frames to ``path`` (``fourcc`` an OpenCV codec name or code) at ``fps``; opened on
    the first frame, with that frame's size. ``shown``: the file as the user knows it (``path``
    may be a temporary name), for the refusal of a codec OpenCV cannot write."""

    def __init__(self, path: str, fourcc: Union[str, int], fps: float,
                 shown: Optional[str] = None):
        self.path, self.fourcc, self.fps = path, fourcc, fps
        self.shown = shown or path
        self.writer = None

    def write(self, rgb: np.ndarray) -> None:
        import cv2
        if self.writer is None:
            code = cv2.VideoWriter_fourcc(*self.fourcc[:4]) if isinstance(self.fourcc, str) \
                else int(self.fourcc)
            h, w = rgb.shape[:2]
            self.writer = cv2.VideoWriter(self.path, code, self.fps, (w, h))
            if not self.writer.isOpened():
                folder = os.path.dirname(os.path.abspath(self.path))
                if not (os.path.isdir(folder) and os.access(folder, os.W_OK)):
                    raise CommandFailed(f"{self.shown}: cannot open a video writer (its folder "
                                        "cannot be written)")
                raise ArgumentError(f"--fourcc {self.fourcc}: OpenCV cannot write {self.shown} "
                                    "with this codec (mp4v writes .mp4, MJPG and XVID .avi)")
        self.writer.write(np.ascontiguousarray(rgb[:, :, ::-1]))

    def release(self) -> None:
        if self.writer is not None:
            self.writer.release()


def _display_available() -> bool:
    return os.name == "nt" or bool(os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY"))


def detect_video(yolo, video_path: Union[str, int], output_path: str = "",
                 show: Optional[bool] = None, max_frames: int = 0) -> int:
    """keras-yolo3's ``detect_video``: run ``yolo.detect_image`` on every frame of ``video_path`` (a
    file or a webcam index), draw the frames-per-second count, write the annotated video to
    ``output_path`` (when given: the source's codec and frame rate) and show it in a window (``show``:
    default when a display is available; ``q`` stops). Closes ``yolo``'s session at the end, as
    keras-yolo3 did. Returns the number of frames processed."""
    import cv2
    from PIL import Image
    source = open_video(video_path)
    show = _display_available() if show is None else show
    writer = VideoWriter(output_path, source.fourcc or "mp4v", source.fps) if output_path else None
    processed, shown_fps, count, window_start = 0, "FPS: ??", 0, time.perf_counter()
    try:
        for rgb in source.frames(max_frames):
            result = np.asarray(yolo.detect_image(Image.fromarray(rgb))).copy()
            count += 1
            if time.perf_counter() - window_start > 1:
                shown_fps, count, window_start = f"FPS: {count}", 0, time.perf_counter()
            cv2.putText(result, text=shown_fps, org=(3, 15), fontFace=cv2.FONT_HERSHEY_SIMPLEX,
                        fontScale=0.50, color=(255, 0, 0), thickness=2)
            if writer is not None:
                writer.write(result)
            processed += 1
            if show:
                cv2.namedWindow("result", cv2.WINDOW_NORMAL)
                cv2.imshow("result", np.ascontiguousarray(result[:, :, ::-1]))
                if cv2.waitKey(1) & 0xFF == ord("q"):
                    break
    finally:
        source.release()
        if writer is not None:
            writer.release()
        if show:
            cv2.destroyAllWindows()
    yolo.close_session()
    return processed
