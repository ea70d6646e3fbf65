"""A detection dataset that looks like real data: textured shapes on real photographs.

Each image is a random crop of a real photograph (flipped, colour-jittered) at one of several
sizes, square or not. Objects are shapes (the class is the shape, never the colour): each is filled
with a recoloured crop of another real photograph (channels permuted and mixed, gain, shading),
has soft edges, a side from 6% to 55% of the image's shorter side, and an aspect from square to a
thin bar (rectangles down to 1:6). Later objects partly hide earlier ones (each keeps at least 40%
of its pixels visible: ``min_visible``) and irregular photo-textured blobs stand in as distractors;
about 8% of the images hold no object. Boxes are pixel-edge ``x1, y1, x2, y2`` of each object's
*visible* pixels, exact (``boxes='full'``: of the whole object, hidden parts included). Images are
written as JPEG (quality 80 to 95). Everything is determined by the seed and the photographs.

The switches that take a property away (``distractors``, ``recolour``) draw from the random stream
as if it were there, so one seed gives the same objects, boxes and placements with and without it:
an ablation changes one thing. Backgrounds may come from photographs of their own
(``background_photos``), so that no object is textured with a crop of the picture it lies on, and
may be enlarged details of them (``background_zoom``): smoother backgrounds, an easier set drawn
from the same random stream.

Photographs: any folder of JPEG/PNG photographs (``photos``), or the permissively licensed
photographs that scikit-image's wheel ships (``pip install 'yolo3[bench]'``), found without
importing it. Nothing is downloaded.
"""
from __future__ import annotations

import importlib.util
import os
from typing import List, Optional, Sequence, Tuple

import numpy as np
from PIL import Image, ImageDraw, ImageFilter

from yolo3.config.choices import BOX_EXTENTS, SIZE_DISTRIBUTIONS
from yolo3.core.errors import SettingError
from yolo3.data.annotations import Record
from yolo3.data.synthetic import SHAPES, _draw_shape, image_name, write_generated_dataset

PHOTO_CLASSES = ("circle", "square", "triangle", "cross")
PHOTO_SIZES = ((240, 320), (320, 240), (288, 288))  # (h, w)
# scikit-image's bundled photographs of natural scenes (its data/ folder); drawings, charts and
# tiny images of that folder are left out
SKIMAGE_PHOTOS = ("astronaut.png", "rocket.jpg", "coffee.png", "chelsea.png", "motorcycle_left.png",
                  "motorcycle_right.png", "hubble_deep_field.jpg", "retina.jpg", "grass.png",
                  "gravel.png", "brick.png", "camera.png", "coins.png", "moon.png", "ihc.png",
                  "cell.png")
MIN_VISIBLE = 0.4  # an object keeps at least this share of its pixels visible
# the share of a photograph's extent that a background crop spans: 0.4-1 keeps the photograph's
# detail (sharp, busy backgrounds); small shares enlarge a detail into a smooth, easier background
BACKGROUND_ZOOM = (0.4, 1.0)
NEGATIVE_FRACTION = 0.08

__all__ = ["PHOTO_CLASSES", "PHOTO_SIZES", "bundled_photo_dir", "load_photos",
           "render_photo_image", "make_photo_dataset"]


def bundled_photo_dir() -> Optional[str]:
    """scikit-image's data folder when the package is installed (not imported), else None."""
    spec = importlib.util.find_spec("skimage")
    if spec is None or not spec.submodule_search_locations:
        return None
    folder = os.path.join(list(spec.submodule_search_locations)[0], "data")
    return folder if os.path.isdir(folder) else None


def load_photos(folder: Optional[str] = None, max_side: int = 640) -> List[np.ndarray]:
    """The photographs of ``folder`` (default: scikit-image's bundled ones) as RGB uint8 arrays,
    scaled down to ``max_side``; images smaller than 96 px on a side are skipped.

    Raises ``FileNotFoundError`` naming the folder, or what to install, when fewer than two
    photographs are found."""
    names: Optional[Sequence[str]] = None
    if folder is None:
        folder = bundled_photo_dir()
        if folder is None:
            raise FileNotFoundError("no photographs: pass a folder of photographs, or install "
                                    "scikit-image, whose wheel ships some (pip install "
                                    "'yolo3[bench]')")
        names = SKIMAGE_PHOTOS
    if not os.path.isdir(folder):
        raise FileNotFoundError(f"{folder}: not a folder of photographs")
    if names is None:
        names = sorted(f for f in os.listdir(folder)
                       if f.lower().endswith((".jpg", ".jpeg", ".png")))
    photos = []
    for name in names:
        path = os.path.join(folder, name)
        if not os.path.isfile(path):
            continue
        with Image.open(path) as im:
            im = im.convert("RGB")
            if min(im.size) < 96:
                continue
            scale = max_side / max(im.size)
            if scale < 1:
                im = im.resize((max(1, round(im.width * scale)), max(1, round(im.height * scale))),
                               Image.BILINEAR)
            photos.append(np.asarray(im))
    if len(photos) < 2:
        raise FileNotFoundError(f"{folder}: fewer than two photographs (JPEG or PNG, at least "
                                f"96 px a side) found")
    return photos


def _crop(rng: np.random.Generator, photos: Sequence[np.ndarray], h: int, w: int,
          zoom: Tuple[float, float] = (0.4, 1.0)) -> np.ndarray:
    """A random crop of a random photograph with the aspect of ``h x w``, resized to it."""
    photo = photos[int(rng.integers(len(photos)))]
    ph, pw = photo.shape[:2]
    scale = rng.uniform(*zoom)
    ch = max(8, int(min(ph, pw * h / w) * scale))
    cw = max(8, int(ch * w / h))
    cw, ch = min(cw, pw), min(ch, ph)
    y, x = int(rng.integers(0, ph - ch + 1)), int(rng.integers(0, pw - cw + 1))
    crop = Image.fromarray(photo[y:y + ch, x:x + cw]).resize((w, h), Image.BILINEAR)
    out = np.asarray(crop)
    if rng.uniform() < 0.5:
        out = out[:, ::-1]
    return out


def _recolour(rng: np.random.Generator, texture: np.ndarray) -> np.ndarray:
    """Permute and mix the colour channels, apply a gain and a linear shading: the texture keeps
    the photograph's structure but takes any colour, so that colour says nothing of the class."""
    x = texture.astype(np.float32)[..., rng.permutation(3)]
    mix = np.eye(3) * rng.uniform(0.5, 1.0) + rng.uniform(0, 0.5, (3, 3))
    x = x @ (mix / mix.sum(axis=0, keepdims=True)).astype(np.float32)
    if rng.uniform() < 0.2:  # a grey, tinted version
        x = x.mean(axis=-1, keepdims=True) * rng.uniform(0.7, 1.3, 3).astype(np.float32)
    h, w = x.shape[:2]
    yy, xx = np.mgrid[0:h, 0:w].astype(np.float32)
    shade = 1 + rng.uniform(-0.3, 0.3) * (xx / max(w - 1, 1) - 0.5) \
        + rng.uniform(-0.3, 0.3) * (yy / max(h - 1, 1) - 0.5)
    x = (x - x.mean()) * rng.uniform(0.8, 1.6) + rng.uniform(40, 215)
    return np.clip(x * shade[..., None], 0, 255)


def _texture(rng: np.random.Generator, photos: Sequence[np.ndarray], h: int, w: int,
             recolour: bool) -> np.ndarray:
    """A ``(h, w, 3)`` float texture: a crop of ``photos``, recoloured, or with its own colours
    when ``recolour`` is off (the recolouring is drawn either way: the random stream stays)."""
    crop = _crop(rng, photos, h, w)
    recoloured = _recolour(rng, crop)
    return recoloured if recolour else crop.astype(np.float32)


def _shape_mask(rng: np.random.Generator, shape: str, bw: int, bh: int) -> np.ndarray:
    """A float ``(bh, bw)`` mask of ``shape`` filling its box, turned by a random multiple of 90
    degrees (triangles point any way), with soft edges."""
    turn = int(rng.integers(4)) if shape == "triangle" else 0
    w, h = (bh, bw) if turn % 2 else (bw, bh)
    mask = Image.new("L", (w, h), 0)
    _draw_shape(ImageDraw.Draw(mask), shape, [0, 0, w, h], 255)
    mask = mask.rotate(90 * turn, expand=True) if turn else mask
    mask = mask.filter(ImageFilter.GaussianBlur(0.6))
    return np.asarray(mask, np.float32) / 255.0


def _blob_mask(rng: np.random.Generator, bw: int, bh: int) -> np.ndarray:
    """An irregular polygon (a distractor that is none of the classes), float ``(bh, bw)``."""
    angles = np.sort(rng.uniform(0, 2 * np.pi, int(rng.integers(7, 12))))
    radii = rng.uniform(0.45, 1.0, len(angles))
    points = [((1 + r * np.cos(a)) * (bw - 1) / 2, (1 + r * np.sin(a)) * (bh - 1) / 2)
              for a, r in zip(angles, radii)]
    mask = Image.new("L", (bw, bh), 0)
    ImageDraw.Draw(mask).polygon(points, fill=255)
    return np.asarray(mask.filter(ImageFilter.GaussianBlur(0.8)), np.float32) / 255.0


def _object_size(rng: np.random.Generator, shape: str, short: int, min_frac: float,
                 max_frac: float, distribution: str = "log") -> Tuple[int, int]:
    """``(width, height)``: the long side in ``[min_frac, max_frac]`` of ``short``, log-uniform
    (as many objects from 6% to 12% as from 25% to 50%) or uniform (``distribution``);
    rectangles may be thin bars (down to 1:6), other shapes stay within 1:2."""
    _check_size_distribution(distribution)
    if distribution == "uniform":
        side = float(rng.uniform(min_frac, max_frac)) * short
    else:
        side = float(np.exp(rng.uniform(np.log(min_frac), np.log(max_frac)))) * short
    if shape == "square" and rng.uniform() < 0.35:
        aspect = rng.uniform(1 / 6, 1 / 2.5)  # a thin bar
    else:
        aspect = rng.uniform(0.5, 1.0)
    long_, narrow = max(6, int(round(side))), max(4, int(round(side * aspect)))
    return (long_, narrow) if rng.uniform() < 0.5 else (narrow, long_)


def render_photo_image(rng: np.random.Generator, photos: Sequence[np.ndarray],
                       image_size: Tuple[int, int], classes: Sequence[str] = PHOTO_CLASSES,
                       max_objects: int = 6, min_frac: float = 0.06, max_frac: float = 0.55,
                       negative_fraction: float = NEGATIVE_FRACTION,
                       size_distribution: str = "log", distractors: bool = True,
                       boxes: str = "visible", min_visible: float = MIN_VISIBLE,
                       recolour: bool = True,
                       backgrounds: Optional[Sequence[np.ndarray]] = None,
                       background_zoom: Tuple[float, float] = BACKGROUND_ZOOM,
                       class_shares: Optional[Sequence[float]] = None
                       ) -> Tuple[np.ndarray, np.ndarray]:
    """One image ``(h, w, 3)`` uint8 and its boxes ``(N, 5)`` float32 ``x1, y1, x2, y2, class``
    (``boxes``: the visible pixels' extent, or the whole object's with ``'full'``; ``N`` may be 0),
    on a crop of ``backgrounds`` (default: ``photos``), objects textured with ``photos``
    (recoloured unless ``recolour`` is off), each keeping ``min_visible`` of its pixels in view
    (1: no occlusion); ``background_zoom``: the ``(low, high)`` share of a photograph's extent that
    the background crop spans; ``class_shares``: the chance of each class (normalised; default:
    uniform, drawn as before). See the module docstring."""
    _check_box_extent(boxes)
    _check_background_zoom(background_zoom)
    h, w = image_size
    canvas = _crop(rng, photos if backgrounds is None else backgrounds, h, w,
                   tuple(background_zoom)).astype(np.float32)
    canvas *= rng.uniform(0.8, 1.2, 3).astype(np.float32)
    for _ in range(int(rng.integers(0, 3)) if rng.uniform() < 0.5 else 0):  # distractors
        bw, bh = _object_size(rng, "circle", min(h, w), min_frac, max_frac * 0.6)
        bw, bh = min(bw, w), min(bh, h)
        x, y = int(rng.integers(0, w - bw + 1)), int(rng.integers(0, h - bh + 1))
        alpha = _blob_mask(rng, bw, bh)[..., None]
        patch = _texture(rng, photos, bh, bw, recolour)
        if distractors:  # drawn either way: the random stream, so the objects, stay the same
            canvas[y:y + bh, x:x + bw] = canvas[y:y + bh, x:x + bw] * (1 - alpha) + patch * alpha
    count = 0 if rng.uniform() < negative_fraction else int(rng.integers(1, max_objects + 1))
    owner = np.full((h, w), -1, np.int32)  # which object each pixel shows (hard mask at 0.5)
    areas: List[int] = []
    labels: List[int] = []
    whole: List[List[int]] = []  # each object's full extent, hidden parts included
    for _ in range(count):
        for _attempt in range(20):
            cls = (int(rng.integers(len(classes))) if class_shares is None
                   else int(rng.choice(len(classes), p=class_shares)))
            bw, bh = _object_size(rng, classes[cls], min(h, w), min_frac, max_frac,
                                  size_distribution)
            bw, bh = min(bw, w), min(bh, h)
            x, y = int(rng.integers(0, w - bw + 1)), int(rng.integers(0, h - bh + 1))
            alpha = _shape_mask(rng, classes[cls], bw, bh)
            alpha = alpha[:bh, :bw] if alpha.shape != (bh, bw) else alpha
            hard = alpha >= 0.5
            if hard.sum() < 12:
                continue
            trial = owner.copy()
            trial[y:y + bh, x:x + bw][hard] = len(areas)
            visible = np.bincount(trial[trial >= 0].ravel(), minlength=len(areas) + 1)
            if any(visible[k] < min_visible * areas[k] for k in range(len(areas))):
                continue  # would hide too much of an earlier object
            owner = trial
            areas.append(int(hard.sum()))
            labels.append(cls)
            ys, xs = np.nonzero(hard)
            whole.append([x + xs.min(), y + ys.min(), x + xs.max() + 1, y + ys.max() + 1])
            patch = _texture(rng, photos, bh, bw, recolour)
            a = alpha[..., None]
            canvas[y:y + bh, x:x + bw] = canvas[y:y + bh, x:x + bw] * (1 - a) + patch * a
            break
    canvas += rng.normal(0, rng.uniform(1, 5), canvas.shape).astype(np.float32)
    image = np.clip(np.round(canvas), 0, 255).astype(np.uint8)
    found = []
    for k, cls in enumerate(labels):
        if boxes == "full":
            found.append([*whole[k], cls])
            continue
        ys, xs = np.nonzero(owner == k)
        found.append([xs.min(), ys.min(), xs.max() + 1, ys.max() + 1, cls])
    return image, np.asarray(found, np.float32).reshape(-1, 5)


def make_photo_dataset(out_dir: str, num_images: int, photos: Optional[str] = None,
                       seed: int = 0, classes: Sequence[str] = PHOTO_CLASSES,
                       sizes: Sequence[Tuple[int, int]] = PHOTO_SIZES, *,
                       max_objects: int = 6, min_frac: float = 0.06, max_frac: float = 0.55,
                       val_fraction: float = 0.0, annotation_name: str = "annotations.txt",
                       size_distribution: str = "log", distractors: bool = True,
                       boxes: str = "visible", min_visible: float = MIN_VISIBLE,
                       recolour: bool = True, background_photos: Optional[str] = None,
                       background_zoom: Tuple[float, float] = BACKGROUND_ZOOM,
                       class_shares: Optional[Sequence[float]] = None,
                       exist_ok: bool = False) -> Tuple[str, str]:
    """Write ``num_images`` JPEG images to ``out_dir/images`` with a text annotation and a classes
    file (see :func:`yolo3.data.synthetic.write_dataset_files` for the split); ``sizes``: the
    ``(h, w)`` image sizes, one drawn per image; ``size_distribution``: how object sides spread
    over ``[min_frac, max_frac]`` (``log``: many small objects; ``uniform``: most are large);
    ``distractors``: whether to paint the distractor blobs (the objects are the same either way);
    ``boxes``, ``min_visible``, ``recolour``: see :func:`render_photo_image`;
    ``background_photos``: a folder of photographs for the backgrounds alone (default: ``photos``);
    ``background_zoom``: the share of a photograph's extent a background crop spans;
    ``class_shares``: one positive weight per class, how often each is drawn (a rare class).
    Returns ``(annotation_path, classes_path)``. A folder without photographs is a
    :class:`~yolo3.core.errors.SettingError` naming its setting (``photos``, ``background_photos``).
    ``out_dir`` and ``exist_ok``: as :func:`yolo3.data.synthetic.make_synthetic_dataset` takes
    them."""
    _check_size_distribution(size_distribution)
    for c in classes:
        if c not in SHAPES:
            raise ValueError(f"unknown shape class {c!r}: choose from {SHAPES}")
    if not 0 < min_frac < max_frac <= 1:
        raise ValueError(f"object sizes must satisfy 0 < min ({min_frac}) < max ({max_frac}) <= 1")
    _check_box_extent(boxes)  # here too: before anything is written
    shares = None
    if class_shares is not None:
        shares = np.asarray(class_shares, np.float64)
        if len(shares) != len(classes) or not np.all(np.isfinite(shares)) or \
                np.any(shares <= 0) or not np.isfinite(shares.sum()):
            raise SettingError(f"class_shares: {len(classes)} positive weights needed (one per "
                               f"class: {', '.join(classes)}), got {list(class_shares)}",
                               "class_shares")
        shares = shares / shares.sum()
    _check_background_zoom(background_zoom)
    if not 0 < min_visible <= 1:
        raise SettingError(f"min_visible must be in (0, 1], got {min_visible}", "min_visible")
    pictures = _photos_of(photos, "photos")
    backgrounds = (_photos_of(background_photos, "background_photos")
                   if background_photos is not None else None)
    def render(images: str) -> List[Record]:
        rng = np.random.default_rng(seed)
        records: List[Record] = []
        for i in range(num_images):
            size = tuple(int(v) for v in sizes[int(rng.integers(len(sizes)))])
            image, found = render_photo_image(rng, pictures, size, classes, max_objects, min_frac,
                                              max_frac, size_distribution=size_distribution,
                                              distractors=distractors, boxes=boxes,
                                              min_visible=min_visible, recolour=recolour,
                                              backgrounds=backgrounds,
                                              background_zoom=background_zoom,
                                              class_shares=shares)
            path = os.path.join(images, image_name(i, PHOTO_FORMAT))
            Image.fromarray(image).save(path, quality=int(rng.integers(80, 96)))
            records.append(Record(path, found, size, 1))
        return records
    return write_generated_dataset(out_dir, render, classes, val_fraction, annotation_name,
                                   exist_ok)


PHOTO_FORMAT = "jpg"  # the photo style's images are JPEGs


def _photos_of(folder: Optional[str], setting: str) -> List[np.ndarray]:
    """:func:`load_photos`, its refusal a :class:`~yolo3.core.errors.SettingError` naming ``setting``."""
    try:
        return load_photos(folder)
    except FileNotFoundError as e:
        raise SettingError(f"{setting}: {e}", setting) from None


def _check_size_distribution(distribution: str) -> None:
    """Refuse an object-size distribution not in :data:`SIZE_DISTRIBUTIONS` (a ``ValueError``)."""
    if distribution not in SIZE_DISTRIBUTIONS:
        raise ValueError(f"unknown size distribution {distribution!r}: choose from "
                         f"{SIZE_DISTRIBUTIONS}")


def _check_box_extent(boxes: str) -> None:
    """Refuse a box extent not in :data:`yolo3.config.choices.BOX_EXTENTS` (a ``SettingError``,
    which is a ``ValueError``, naming ``boxes``)."""
    if boxes not in BOX_EXTENTS:
        raise SettingError(f"boxes must be one of {', '.join(BOX_EXTENTS)}, got {boxes!r}", "boxes")


def _check_background_zoom(zoom: Sequence[float]) -> None:
    """Refuse a background zoom that is not ``(low, high)`` with ``0 < low <= high <= 1`` (a
    ``SettingError`` naming ``background_zoom``)."""
    if len(zoom) != 2 or not 0 < zoom[0] <= zoom[1] <= 1:
        raise SettingError("background_zoom must be two shares LOW HIGH with 0 < LOW <= HIGH "
                           f"<= 1, got {' '.join(str(v) for v in zoom)}", "background_zoom")
