"""Video sequences with ground-truth tracks, in the MOT Challenge layout, for tracking tests and
benchmarks: the objects of ``yolo3 synth`` (shapes, photo-textured in the photo style), moving.

A sequence is a camera window panning over a wider world (a photograph's crop in the photo style,
a busy synthetic background otherwise). Each object keeps its shape, size and texture; it moves
at its own speed (``speed`` pixels per frame, drawn per object), turns smoothly and now and then
sharply, bounces off the world's edges, which lie beyond the camera's view (so objects leave the
frame and come back), and passes in front of or behind the others by a fixed depth (so they
cross and hide each other for several frames).

Ground truth (``gt/gt.txt``): ``frame,id,x,y,w,h,considered,class,visibility`` per object and
frame where any of it is in view: the whole object's box clipped to the frame, ``visibility``
the share of its pixels seen (what the frame's edge and nearer objects leave), ``considered`` 0
below :data:`MIN_VISIBLE` (a box no detector could find: not scored), ``class`` the index in
``classes.txt``. IDs count from 1. Frames: ``img1/000001.jpg`` ..., with ``seqinfo.ini``
(MOT17's). Everything is determined by the seed (and the photographs). No TensorFlow here.
"""
from __future__ import annotations

import configparser
import io
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, List, Optional, Sequence, Tuple

import numpy as np
from PIL import Image

from yolo3.core.errors import SettingError
from yolo3.core.output_folder import write_output_folder
from yolo3.data.class_names import write_classes
from yolo3.data.photo_synthetic import PHOTO_CLASSES, _crop, _shape_mask, _texture, load_photos
from yolo3.data.synthetic import _busy_background

__all__ = ["MIN_VISIBLE", "VideoObject", "render_sequence", "make_video_sequence",
           "sequence_entries"]

MIN_VISIBLE = 0.25  # ground truth below this visible share is not considered (not scored)
PAN = 0.5  # the world is this much wider than the frame: the camera pans over it
MARGIN = 0.15  # objects roam this share of the frame's height beyond the world's edges


@dataclass
class VideoObject:
    """One moving object: class index, ``mask (h, w)`` float in [0, 1], ``texture (h, w, 3)``
    float, world position of its top-left corner ``(x, y)``, heading (radians), speed (pixels per
    frame), turn rate (radians per frame), depth (larger: nearer, drawn later)."""

    cls: int
    mask: np.ndarray
    texture: np.ndarray
    x: float
    y: float
    heading: float
    speed: float
    turn: float
    depth: float

    def step(self, rng: np.random.Generator, bounds: Tuple[float, float, float, float]) -> None:
        """Move one frame; bounce off ``bounds`` ``(x1, y1, x2, y2)`` (the top-left corner's)."""
        if rng.uniform() < 0.02:  # now and then, a sharp turn
            self.turn = float(rng.uniform(-0.12, 0.12))
        elif rng.uniform() < 0.05:
            self.turn = float(rng.uniform(-0.03, 0.03))
        self.heading += self.turn
        dx, dy = np.cos(self.heading) * self.speed, np.sin(self.heading) * self.speed
        x1, y1, x2, y2 = bounds
        if not x1 <= self.x + dx <= x2:
            dx, self.heading = -dx, float(np.pi - self.heading)
        if not y1 <= self.y + dy <= y2:
            dy, self.heading = -dy, float(-self.heading)
        self.x += dx
        self.y += dy


def _objects(rng: np.random.Generator, photos: Optional[Sequence[np.ndarray]], count: int,
             world_hw: Tuple[int, int], frame_h: int, size: Tuple[float, float],
             speed: Tuple[float, float]) -> List[VideoObject]:
    out = []
    for _ in range(count):
        cls = int(rng.integers(len(PHOTO_CLASSES)))
        side = float(np.exp(rng.uniform(np.log(size[0]), np.log(size[1])))) * frame_h
        aspect = rng.uniform(0.6, 1.0)
        w, h = (int(side), max(6, int(side * aspect)))
        if rng.uniform() < 0.5:
            w, h = h, w
        mask = _shape_mask(rng, PHOTO_CLASSES[cls], w, h)
        h, w = mask.shape
        if photos is not None:
            texture = _texture(rng, photos, h, w, recolour=True)
        else:
            texture = np.broadcast_to(rng.uniform(30, 225, 3), (h, w, 3)).astype(np.float32)
        out.append(VideoObject(cls, mask, texture.astype(np.float32),
                               float(rng.uniform(0, world_hw[1] - w)),
                               float(rng.uniform(0, world_hw[0] - h)),
                               float(rng.uniform(0, 2 * np.pi)), float(rng.uniform(*speed)),
                               float(rng.uniform(-0.03, 0.03)), float(rng.uniform())))
    return sorted(out, key=lambda o: o.depth)


def render_sequence(num_frames: int, frame_hw: Tuple[int, int] = (240, 320),
                    num_objects: int = 10, seed: int = 0, style: str = "photo",
                    photos: Optional[str] = None, size: Tuple[float, float] = (0.12, 0.3),
                    speed: Tuple[float, float] = (1.0, 6.0), pan: bool = True
                    ) -> Iterator[Tuple[np.ndarray, np.ndarray]]:
    """Frames one by one: ``(frame uint8 (h, w, 3) RGB, rows (N, 8))``, each row ``id, x1, y1,
    x2, y2, class, visibility, considered`` (module docstring). ``size``: object sides as shares
    of the frame's height (log-uniform); ``speed``: pixels per frame; ``pan``: the camera pans
    over a world half again as wide (else it stands still). ``style``: ``photo`` (photographs:
    ``photos``, a folder, or scikit-image's) or ``shapes`` (flat colours). Memory does not grow
    with ``num_frames``."""
    if style not in ("photo", "shapes"):
        raise SettingError(f"style must be photo or shapes, got {style!r}", "style")
    rng = np.random.default_rng(seed)
    h, w = int(frame_hw[0]), int(frame_hw[1])
    world_w = int(round(w * (1 + PAN))) if pan else w
    library = load_photos(photos) if style == "photo" else None
    if library is not None:
        world = _crop(rng, library, h, world_w, zoom=(0.6, 1.0)).astype(np.float32)
    else:
        world = _busy_background(rng, h, world_w).astype(np.float32)
    objects = _objects(rng, library, num_objects, (h, world_w), h, size, speed)
    margin = MARGIN * h
    period = max(60, num_frames)
    for t in range(num_frames):
        cam = int(round((world_w - w) * 0.5 * (1 - np.cos(2 * np.pi * t / period))))
        frame = world[:, cam:cam + w].copy()
        owner = np.full((h, w), -1, np.int32)  # the nearest object at each pixel
        placed = []
        for k, obj in enumerate(objects):
            oh, ow = obj.mask.shape
            x0, y0 = int(round(obj.x)) - cam, int(round(obj.y))
            fx1, fy1, fx2, fy2 = max(x0, 0), max(y0, 0), min(x0 + ow, w), min(y0 + oh, h)
            placed.append((x0, y0, fx1, fy1, fx2, fy2))
            if fx2 <= fx1 or fy2 <= fy1:
                continue
            m = obj.mask[fy1 - y0:fy2 - y0, fx1 - x0:fx2 - x0, None]
            tex = obj.texture[fy1 - y0:fy2 - y0, fx1 - x0:fx2 - x0]
            region = frame[fy1:fy2, fx1:fx2]
            frame[fy1:fy2, fx1:fx2] = region * (1 - m) + tex * m
            owner[fy1:fy2, fx1:fx2][m[..., 0] >= 0.5] = k
        seen = np.bincount(owner[owner >= 0].ravel(), minlength=len(objects))
        rows = []
        for k, (obj, (x0, y0, fx1, fy1, fx2, fy2)) in enumerate(zip(objects, placed)):
            if fx2 <= fx1 or fy2 <= fy1:
                continue
            total = max(int((obj.mask >= 0.5).sum()), 1)
            visibility = min(seen[k] / total, 1.0)
            rows.append((k + 1, fx1, fy1, fx2, fy2, obj.cls, visibility,
                         1.0 if visibility >= MIN_VISIBLE else 0.0))
        yield (np.clip(frame, 0, 255).astype(np.uint8),
               np.asarray(rows, np.float64).reshape(-1, 8))
        bounds = (-margin, -margin, world_w + margin - 1, h + margin - 1)
        for obj in objects:
            oh, ow = obj.mask.shape
            obj.step(rng, (bounds[0] - ow / 2, bounds[1] - oh / 2, bounds[2] - ow / 2,
                           bounds[3] - oh / 2))


def sequence_entries(num_frames: int) -> List[str]:
    """The paths a sequence folder holds (what :func:`make_video_sequence` writes)."""
    return ["seqinfo.ini", "gt/gt.txt", "classes.txt",
            *(f"img1/{t:06d}.jpg" for t in range(1, num_frames + 1))]


def make_video_sequence(out_dir: str, num_frames: int, frame_hw: Tuple[int, int] = (240, 320),
                        num_objects: int = 10, seed: int = 0, style: str = "photo",
                        photos: Optional[str] = None, exist_ok: bool = False,
                        flag: str = "out_dir", **kw) -> str:
    """Write one sequence (:func:`render_sequence`; ``kw``: its ``size``, ``speed``, ``pan``) to
    ``out_dir`` in the MOT17 layout, under the ownership rule (filled beside it, then moved in;
    a folder holding what yolo3 did not write is refused unless ``exist_ok``). Returns the
    ground-truth path."""
    if num_frames < 1:
        raise SettingError(f"num_frames must be at least 1, got {num_frames}", "num_frames")
    name = os.path.basename(os.path.normpath(out_dir)) or "sequence"

    def fill(folder: Path) -> None:
        (folder / "img1").mkdir()
        (folder / "gt").mkdir()
        lines = []
        frames = render_sequence(num_frames, frame_hw, num_objects, seed, style, photos, **kw)
        for t, (frame, rows) in enumerate(frames, 1):
            Image.fromarray(frame).save(folder / "img1" / f"{t:06d}.jpg", quality=90)
            for ident, x1, y1, x2, y2, cls, vis, considered in rows:
                lines.append(f"{t},{int(ident)},{x1:g},{y1:g},{x2 - x1:g},{y2 - y1:g},"
                             f"{int(considered)},{int(cls)},{vis:.3f}")
        (folder / "gt" / "gt.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
        info = configparser.ConfigParser()
        info.optionxform = str
        info["Sequence"] = {"name": name, "imDir": "img1", "frameRate": "30",
                            "seqLength": str(num_frames), "imWidth": str(frame_hw[1]),
                            "imHeight": str(frame_hw[0]), "imExt": ".jpg"}
        text = io.StringIO()
        info.write(text, space_around_delimiters=False)
        (folder / "seqinfo.ini").write_text(text.getvalue(), encoding="utf-8")
        write_classes(str(folder / "classes.txt"), PHOTO_CLASSES)

    write_output_folder(out_dir, fill, flag, exist_ok, sequence_entries(num_frames))
    return os.path.join(out_dir, "gt", "gt.txt")
