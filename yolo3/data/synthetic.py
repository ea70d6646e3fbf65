"""A synthetic detection dataset: shapes on textured backgrounds, with exact boxes.

Two styles. ``solid`` (the demo's): 1-4 solid, saturated shapes (classes ``circle``, ``square``,
``triangle`` by default) of side 1/8 to 1/2 of the image, placed with limited overlap on a
low-contrast textured background. ``textured`` (harder): up to 6 shapes filled with stripes,
checks or noise in colours of any saturation and brightness, of side 1/14 to 1/3 of the image,
on a busy background with coloured blotches and shape-like distractors. Boxes are pixel-edge
``x1, y1, x2, y2`` of the shape's drawn pixels (exact). Everything is determined by the seed.
"""
from __future__ import annotations

import os
import warnings
from pathlib import Path
from typing import Callable, List, Optional, Sequence, Tuple

import numpy as np
from PIL import Image, ImageDraw

from yolo3.core.output_folder import check_output_folder, claim, write_output_folder
from yolo3.data.annotations import Record, write_annotations
from yolo3.data.class_names import write_classes

SHAPES = ("circle", "square", "triangle", "diamond", "cross")


def _background(rng: np.random.Generator, h: int, w: int) -> np.ndarray:
    """Low-saturation texture: blurred noise + stripes + a gradient, uint8 ``(h, w, 3)``."""
    base = rng.uniform(60, 190, size=1)
    yy, xx = np.mgrid[0:h, 0:w].astype(np.float32)
    angle = rng.uniform(0, np.pi)
    period = rng.uniform(6, 24)
    stripes = np.sin((xx * np.cos(angle) + yy * np.sin(angle)) * 2 * np.pi / period)
    coarse = rng.normal(0, 1, size=(h // 16 + 2, w // 16 + 2)).astype(np.float32)
    coarse = np.asarray(Image.fromarray(coarse, mode="F").resize((w, h), Image.BILINEAR))
    fine = rng.normal(0, 1, size=(h, w)).astype(np.float32)
    grad = (xx / max(w, 1) - 0.5) * rng.uniform(-40, 40) + (yy / max(h, 1) - 0.5) * rng.uniform(-40, 40)
    lum = stripes * rng.uniform(5, 20) + coarse * rng.uniform(5, 15) + fine * 6 + grad
    gray = np.clip(base.mean() + lum, 40, 200)
    tint = rng.uniform(0.9, 1.1, size=3)  # HSV saturation stays below 0.2: shapes (s = 1) stand out
    img = gray[..., None] * tint[None, None, :]
    return np.clip(np.round(img), 0, 255).astype(np.uint8)


def _shape_colour(rng: np.random.Generator) -> Tuple[int, int, int]:
    """A saturated, bright-or-dark colour that stands out from the grey-ish background."""
    hue = rng.uniform(0, 1)
    rgb = np.clip(np.abs(((hue * 6 + np.array([0, 4, 2])) % 6) - 3) - 1, 0, 1)  # HSV -> RGB, s=v=1
    value = rng.choice([rng.uniform(0.85, 1.0), rng.uniform(0.15, 0.3)]) if rng.uniform() < 0.2 \
        else rng.uniform(0.85, 1.0)
    return tuple(int(round(255 * value * c)) for c in rgb)


def _draw_shape(draw: ImageDraw.ImageDraw, shape: str, box: Sequence[int], fill) -> None:
    """Draw ``shape`` whose drawn pixels span exactly columns x1..x2-1 and rows y1..y2-1."""
    x1, y1, x2, y2 = box
    r, b = x2 - 1, y2 - 1
    cx = (x1 + r) / 2
    cy = (y1 + b) / 2
    if shape == "circle":
        draw.ellipse([x1, y1, r, b], fill=fill)
    elif shape == "square":
        draw.rectangle([x1, y1, r, b], fill=fill)
    elif shape == "triangle":
        draw.polygon([(x1, b), (r, b), (round(cx), y1)], fill=fill)
    elif shape == "diamond":
        draw.polygon([(round(cx), y1), (r, round(cy)), (round(cx), b), (x1, round(cy))], fill=fill)
    elif shape == "cross":
        tw, th = max(1, (x2 - x1) // 3), max(1, (y2 - y1) // 3)
        draw.rectangle([x1, y1 + th, r, b - th], fill=fill)
        draw.rectangle([x1 + tw, y1, r - tw, b], fill=fill)
    else:
        raise ValueError(f"unknown shape {shape!r}: choose from {SHAPES}")


def _overlap_ok(box: np.ndarray, placed: List[np.ndarray], max_cover: float) -> bool:
    for other in placed:
        iw = min(box[2], other[2]) - max(box[0], other[0])
        ih = min(box[3], other[3]) - max(box[1], other[1])
        if iw > 0 and ih > 0:
            inter = iw * ih
            a = (box[2] - box[0]) * (box[3] - box[1])
            b = (other[2] - other[0]) * (other[3] - other[1])
            if inter > max_cover * min(a, b):
                return False
    return True


STYLES = ("solid", "textured")


def _busy_background(rng: np.random.Generator, h: int, w: int) -> np.ndarray:
    """The textured style's background: the plain texture, coloured blotches and faint distractor
    strokes (lines and arcs that are not the classes' shapes)."""
    img = Image.fromarray(_background(rng, h, w))
    draw = ImageDraw.Draw(img)
    for _ in range(int(rng.integers(3, 8))):
        x, y = rng.uniform(0, w), rng.uniform(0, h)
        r = rng.uniform(0.05, 0.25) * min(h, w)
        colour = tuple(int(v) for v in rng.uniform(40, 220, 3))
        draw.ellipse([x - r, y - r * rng.uniform(0.5, 1.5), x + r, y + r], fill=colour)
    blurred = np.asarray(img.resize((max(1, w // 6), max(1, h // 6)), Image.BILINEAR)
                         .resize((w, h), Image.BILINEAR)).astype(np.float32)
    noise = rng.normal(0, 10, (h, w, 3))
    img = Image.fromarray(np.clip(blurred + noise, 0, 255).astype(np.uint8))
    draw = ImageDraw.Draw(img)
    for _ in range(int(rng.integers(2, 6))):
        points = [(rng.uniform(0, w), rng.uniform(0, h)) for _ in range(2)]
        colour = tuple(int(v) for v in rng.uniform(30, 230, 3))
        if rng.uniform() < 0.5:
            draw.line(points, fill=colour, width=int(rng.integers(1, 4)))
        else:
            x0, x1 = sorted([points[0][0], points[1][0]])
            y0, y1 = sorted([points[0][1], points[1][1]])
            draw.arc([x0, y0, x1 + 1, y1 + 1], rng.uniform(0, 180), rng.uniform(180, 360),
                     fill=colour, width=int(rng.integers(1, 3)))
    return np.asarray(img)


def _texture(rng: np.random.Generator, h: int, w: int) -> np.ndarray:
    """An ``(h, w, 3)`` uint8 fill: two colours of any saturation and brightness in stripes,
    checks or noise."""
    a = rng.uniform(0, 255, 3)
    b = np.clip(a + rng.choice([-1, 1], 3) * rng.uniform(60, 160, 3), 0, 255)
    yy, xx = np.mgrid[0:h, 0:w].astype(np.float32)
    kind = rng.integers(3)
    if kind == 0:  # stripes
        angle, period = rng.uniform(0, np.pi), rng.uniform(3, 9)
        t = (np.sin((xx * np.cos(angle) + yy * np.sin(angle)) * 2 * np.pi / period) > 0)
    elif kind == 1:  # checks
        cell = rng.uniform(2, 7)
        t = ((xx // cell + yy // cell) % 2).astype(bool)
    else:  # noise
        t = rng.uniform(size=(h, w)) < 0.5
    return np.where(t[..., None], a, b).astype(np.uint8)


def render_image(rng: np.random.Generator, image_size: Tuple[int, int], classes: Sequence[str],
                 max_objects: int = 4, min_frac: float = 0.125, max_frac: float = 0.5,
                 max_cover: float = 0.15, style: str = "solid") -> Tuple[np.ndarray, np.ndarray]:
    """One image ``(h, w, 3)`` uint8 and its boxes ``(N, 5)`` float32 ``x1, y1, x2, y2, class``.

    Shapes cover at most ``max_cover`` of the smaller of two overlapping boxes. ``style``: see the
    module docstring.
    """
    if style not in STYLES:
        raise ValueError(f"unknown style {style!r}: choose from {STYLES}")
    h, w = image_size
    textured = style == "textured"
    img = Image.fromarray(_busy_background(rng, h, w) if textured else _background(rng, h, w))
    draw = ImageDraw.Draw(img)
    n = int(rng.integers(1, max_objects + 1))
    side_lo = max(4, int(round(min_frac * min(h, w))))
    side_hi = max(side_lo + 1, int(round(max_frac * min(h, w))))
    placed: List[np.ndarray] = []
    labels: List[int] = []
    for _ in range(n):
        for _attempt in range(30):
            cls = int(rng.integers(len(classes)))
            bw = int(rng.integers(side_lo, side_hi + 1))
            aspect = rng.uniform(0.75, 1.33)
            bh = int(np.clip(round(bw * aspect), side_lo, min(h, side_hi)))
            bw = min(bw, w)
            x1 = int(rng.integers(0, w - bw + 1))
            y1 = int(rng.integers(0, h - bh + 1))
            box = np.array([x1, y1, x1 + bw, y1 + bh], np.float32)
            if _overlap_ok(box, placed, max_cover):
                if textured:
                    mask = Image.new("L", (w, h), 0)
                    _draw_shape(ImageDraw.Draw(mask), classes[cls], [x1, y1, x1 + bw, y1 + bh], 255)
                    img.paste(Image.fromarray(_texture(rng, h, w)), (0, 0), mask)
                else:
                    _draw_shape(draw, classes[cls], [x1, y1, x1 + bw, y1 + bh], _shape_colour(rng))
                placed.append(box)
                labels.append(cls)
                break
    boxes = np.concatenate([np.stack(placed), np.asarray(labels, np.float32)[:, None]], axis=1)
    return np.asarray(img), boxes.astype(np.float32)


def make_synthetic_dataset(out_dir: str, num_images: int, image_size: Tuple[int, int] = (256, 256),
                           seed: int = 0, classes: Sequence[str] = ("circle", "square", "triangle"),
                           *, image_format: str = "png", max_objects: Optional[int] = None,
                           val_fraction: float = 0.0, annotation_name: str = "annotations.txt",
                           style: str = "solid", min_frac: Optional[float] = None,
                           max_frac: Optional[float] = None, exist_ok: bool = False
                           ) -> Tuple[str, str]:
    """Write ``num_images`` images to ``out_dir/images`` plus a text annotation and a classes file.
    ``out_dir`` must be new, empty or yolo3's; ``exist_ok``: it may hold other files, which are
    kept, but none at the paths written here (:func:`write_generated_dataset`).

    Returns ``(annotation_path, classes_path)``. With ``val_fraction > 0`` the last
    ``round(num_images * val_fraction)`` images also go to ``val.txt`` and the rest to ``train.txt``
    (``annotations.txt`` always lists them all). Paths are written relative to ``out_dir``.
    ``style`` ``solid`` or ``textured``; object count and sizes default to the style's (solid: 4,
    1/8..1/2 of the image; textured: 6, 1/14..1/3).
    """
    defaults = {"solid": (4, 0.125, 0.5), "textured": (6, 1 / 14, 1 / 3)}
    if style not in defaults:
        raise ValueError(f"unknown style {style!r}: choose from {STYLES}")
    d_objects, d_min, d_max = defaults[style]
    max_objects = d_objects if max_objects is None else max_objects
    min_frac = d_min if min_frac is None else min_frac
    max_frac = d_max if max_frac is None else max_frac
    for c in classes:
        if c not in SHAPES:
            raise ValueError(f"unknown shape class {c!r}: choose from {SHAPES}")
    if image_format not in ("png", "jpg"):
        raise ValueError("image_format must be 'png' or 'jpg'")
    def render(images: str) -> List[Record]:
        rng = np.random.default_rng(seed)
        records: List[Record] = []
        for i in range(num_images):
            img, boxes = render_image(rng, tuple(image_size), classes, max_objects=max_objects,
                                      min_frac=min_frac, max_frac=max_frac, style=style)
            path = os.path.join(images, image_name(i, image_format))
            if image_format == "jpg":
                Image.fromarray(img).save(path, quality=95)
            else:
                Image.fromarray(img).save(path, compress_level=1)
            records.append(Record(path, boxes, tuple(image_size), 1))
        return records
    return write_generated_dataset(out_dir, render, classes, val_fraction, annotation_name,
                                   exist_ok)


def image_name(index: int, image_format: str) -> str:
    """The name of a generated dataset's image ``index``: ``000000.png`` ..."""
    return f"{index:06d}.{image_format}"


def image_names(count: int, image_format: str) -> List[str]:
    """The names of a generated dataset's ``count`` images (:func:`image_name`)."""
    return [image_name(i, image_format) for i in range(count)]


def dataset_entries(annotation_name: str = "annotations.txt",
                    images: Sequence[str] = ()) -> List[str]:
    """The paths a generated dataset's folder holds: its text files and, where given, its
    ``images`` (:func:`image_names`) in ``images/``."""
    return [annotation_name, "train.txt", "val.txt", "classes.txt",
            *(f"images/{name}" for name in images)]


def write_generated_dataset(out_dir: str, render: Callable[[str], List[Record]],
                            classes: Sequence[str], val_fraction: float = 0.0,
                            annotation_name: str = "annotations.txt", exist_ok: bool = False,
                            flag: str = "out_dir") -> Tuple[str, str]:
    """Write a generated dataset into ``out_dir`` under the ownership rule
    (:func:`yolo3.core.output_folder.write_output_folder`: filled beside it, then moved in; refused
    when it holds what yolo3 did not write, unless ``exist_ok``, and never over one of those
    files). ``render(images_folder)`` writes the images and returns their records; the text
    files follow (:func:`write_dataset_files`). Returns ``(annotation_path, classes_path)``."""
    def fill(folder: Path) -> None:
        images = folder / "images"
        images.mkdir()
        write_dataset_files(str(folder), render(str(images)), classes, val_fraction,
                            annotation_name)
    write_output_folder(out_dir, fill, flag, exist_ok, dataset_entries(annotation_name))
    return os.path.join(out_dir, annotation_name), os.path.join(out_dir, "classes.txt")


def claim_dataset_folder(out_dir: str, annotation_name: str = "annotations.txt",
                         exist_ok: bool = False, flag: str = "out_dir") -> None:
    """Deprecated (yolo3 0.4): check ``out_dir`` and claim a dataset's entries in it. Write the
    dataset through :func:`write_generated_dataset`, which records each file it writes."""
    warnings.warn("yolo3.data.synthetic.claim_dataset_folder is deprecated: use "
                  "write_generated_dataset (it will go in a later release)", DeprecationWarning,
                  stacklevel=2)
    check_output_folder(out_dir, flag, exist_ok, dataset_entries(annotation_name))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        claim(out_dir, ["images", *dataset_entries(annotation_name)])


def write_dataset_files(out_dir: str, records: Sequence[Record], classes: Sequence[str],
                        val_fraction: float = 0.0, annotation_name: str = "annotations.txt"
                        ) -> Tuple[str, str]:
    """The text files of a generated dataset: ``annotation_name`` (every record), ``train.txt`` and
    ``val.txt`` (the last ``round(len * val_fraction)`` records) when ``val_fraction > 0``, and
    ``classes.txt``; paths relative to ``out_dir``. Returns ``(annotation_path, classes_path)``."""
    ann = os.path.join(out_dir, annotation_name)
    write_annotations(ann, records, relative=True)
    if val_fraction > 0:
        n_val = int(round(len(records) * val_fraction))
        write_annotations(os.path.join(out_dir, "train.txt"), records[:len(records) - n_val],
                          relative=True)
        write_annotations(os.path.join(out_dir, "val.txt"), records[len(records) - n_val:],
                          relative=True)
    classes_path = os.path.join(out_dir, "classes.txt")
    write_classes(classes_path, classes)
    return ann, classes_path


def split_paths(annotation_path: str) -> Tuple[str, str]:
    """``(train.txt, val.txt)`` beside a dataset written with ``val_fraction > 0``."""
    d = os.path.dirname(annotation_path)
    return os.path.join(d, "train.txt"), os.path.join(d, "val.txt")
