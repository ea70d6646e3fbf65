"""Annotation files -> :class:`Record` lists: keras-yolo3 text rows, Pascal VOC XML, COCO JSON and
the YOLO layout (an image folder or image-list file with a label file per image; see
:mod:`yolo3.data.yolo_layout`, which also reads the data files naming a dataset's sources).

Text format (keras-yolo3): one image per line, ``path x1,y1,x2,y2,class x1,y1,x2,y2,class ...``.
A path containing spaces is either quoted (``"my dir/a.jpg" 1,2,3,4,0``) or followed by a tab
(``my dir/a.jpg<TAB>1,2,3,4,0 ...``). Relative paths resolve against the annotation file's folder.
Blank lines and lines starting with ``#`` are skipped.

Boxes are float32 pixels ``x1, y1, x2, y2, class`` in the displayed (EXIF-transposed) image, with
pixel-edge coordinates: a box covering pixel columns 3..7 is ``x1 = 3, x2 = 8``.

Every malformed input raises :class:`~yolo3.core.errors.AnnotationError` naming the file, the line
(or the XML file / JSON object) and the reason. :func:`scan_annotations` collects all problems
instead, and with ``drop_invalid_boxes`` drops boxes without area or outside their image (each
reported as an
:class:`~yolo3.core.errors.InvalidBoxError` in ``dropped_boxes``; negative coordinates are clipped),
as keras-yolo3's generator effectively did, instead of refusing their lines.
"""
from __future__ import annotations

import contextlib
import gc
import json
import logging
import math
import os
import re
import warnings
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from typing import Dict, Iterator, List, Optional, Sequence, Tuple, Union

import numpy as np

from yolo3.core.errors import AnnotationError, InvalidBoxError, PathLike
from yolo3.core.fileio import write_text_atomic
from yolo3.data import yolo_layout
from yolo3.data.images import is_image_file, probe_images

logger = logging.getLogger(__name__)

WARNINGS_SHOWN = 20  # FILE:LINE warnings of one kind logged one by one (per source), then counted


def _first_shown(count: int) -> str:
    return f" (the first {WARNINGS_SHOWN} named above)" if count > WARNINGS_SHOWN else ""


Sources = Union[PathLike, Sequence[PathLike]]  # one annotation source, or several read in turn


def source_name(path: Sources) -> str:
    """A source's path, or several joined by ``+`` (for messages)."""
    if isinstance(path, (str, os.PathLike)):
        return os.fspath(path)
    return " + ".join(os.fspath(p) for p in path)


VOC_CLASSES = ("aeroplane", "bicycle", "bird", "boat", "bottle", "bus", "car", "cat", "chair", "cow",
               "diningtable", "dog", "horse", "motorbike", "person", "pottedplant", "sheep", "sofa",
               "train", "tvmonitor")
COCO_CLASSES = ("person", "bicycle", "car", "motorbike", "aeroplane", "bus", "train", "truck",
                "boat", "traffic light", "fire hydrant", "stop sign", "parking meter", "bench",
                "bird", "cat", "dog", "horse", "sheep", "cow", "elephant", "bear", "zebra",
                "giraffe", "backpack", "umbrella", "handbag", "tie", "suitcase", "frisbee",
                "skis", "snowboard", "sports ball", "kite", "baseball bat", "baseball glove",
                "skateboard", "surfboard", "tennis racket", "bottle", "wine glass", "cup", "fork",
                "knife", "spoon", "bowl", "banana", "apple", "sandwich", "orange", "broccoli",
                "carrot", "hot dog", "pizza", "donut", "cake", "chair", "sofa", "pottedplant",
                "bed", "diningtable", "toilet", "tvmonitor", "laptop", "mouse", "remote",
                "keyboard", "cell phone", "microwave", "oven", "toaster", "sink", "refrigerator",
                "book", "clock", "vase", "scissors", "teddy bear", "hair drier", "toothbrush")


def well_known_classes(num_classes: int) -> Optional[Tuple[str, Tuple[str, ...]]]:
    """``("COCO", its 80 names)`` for 80 classes, ``("VOC", its 20 names)`` for 20, else None: the
    names Darknet's and keras-yolo3's pretrained models of that class count were trained on."""
    return {80: ("COCO", COCO_CLASSES), 20: ("VOC", VOC_CLASSES)}.get(int(num_classes))


def _no_boxes() -> np.ndarray:
    return np.zeros((0, 5), np.float32)


@dataclass(frozen=True, eq=False)
class Record:
    """One image: absolute ``path`` and ``boxes`` ``(N, 5)`` float32 ``x1, y1, x2, y2, class`` pixels.

    ``image_hw`` (displayed height, width) and ``orientation`` (EXIF, 1-8) are filled in when the
    image header was read (``check_images=True``), else ``None``.

    What real annotation files add, for the evaluation (training reads ``boxes`` only):

    - ``ignored`` ``(M, 5)``: the ignore regions, COCO's ``iscrowd: 1`` annotations and VOC's
      ``difficult`` objects (unless they were read as boxes: ``include_crowd``,
      ``include_difficult``). A detection on one is neither a true nor a false positive.
    - ``areas`` ``(N,)`` float64: COCO's ``area`` of each box (the segment's area), NaN where the
      file gives none; None for formats without it. COCO's sizes (small, medium, large) use it.
    - ``pixel_indices``: the corners are VOC's inclusive pixel indices (a box ``1..10`` is 10
      pixels wide): the VOC figures use the devkit's ``+1``.
    """

    path: str
    boxes: np.ndarray
    image_hw: Optional[Tuple[int, int]] = None
    orientation: Optional[int] = None
    ignored: np.ndarray = field(default_factory=_no_boxes)
    areas: Optional[np.ndarray] = None
    pixel_indices: bool = False


@dataclass
class ScanResult:
    """What :func:`scan_annotations` found: good records, every problem, and clipped-box count."""

    records: List[Record] = field(default_factory=list)
    problems: List[AnnotationError] = field(default_factory=list)
    dropped_boxes: List[InvalidBoxError] = field(default_factory=list)
    # read by yolo3, but not by other tools on this system (an image list's Windows separators)
    portability: List[AnnotationError] = field(default_factory=list)
    clipped_boxes: int = 0
    skipped_difficult: int = 0  # VOC difficult objects held as ignore regions (Record.ignored)
    skipped_crowd: int = 0      # COCO crowd annotations held as ignore regions


class _Sink:
    """Raises the first problem (strict) or collects them all; drops invalid boxes when asked."""

    def __init__(self, strict: bool, drop_invalid_boxes: bool = False):
        self.strict = strict
        self.drop_invalid_boxes = drop_invalid_boxes
        self.problems: List[AnnotationError] = []
        self.dropped: List[InvalidBoxError] = []

    def report(self, err: AnnotationError) -> None:
        if self.strict:
            raise err
        self.problems.append(err)

    def keep(self, make_box):
        """``make_box()`` (a parsed box), or None when it is invalid and dropped."""
        try:
            return make_box()
        except InvalidBoxError as e:
            if not self.drop_invalid_boxes:
                raise
            self.dropped.append(e)
            return None


# ----------------------------------------------------------------------------------------- text


_BOX_FIELD = re.compile(r"^[-+.\deE]+(,[-+.\deE]+){4}$")


def _split_line(line: str, path: PathLike, line_no: int) -> Tuple[str, List[str]]:
    """Split a text row into ``(image path, box fields)``."""
    if line.startswith('"'):
        end = line.find('"', 1)
        if end < 0:
            raise AnnotationError(path, "unterminated quote in image path", line=line_no)
        image = line[1:end]
        rest = line[end + 1:]
        if rest and not rest[0].isspace():
            raise AnnotationError(path, "expected whitespace after the quoted image path", line=line_no)
        fields = rest.split()
    elif "\t" in line and not _BOX_FIELD.match(line.split("\t", 1)[0].split()[-1]):
        # a tab separates a path with spaces from its boxes: only before the first box
        image, rest = line.split("\t", 1)
        image = image.strip()
        fields = rest.split()
    else:
        parts = line.split()
        image, fields = parts[0], parts[1:]
    if not image:
        raise AnnotationError(path, "empty image path", line=line_no)
    return image, fields


def _parse_box(text: str, num_classes: Optional[int], path: PathLike, line_no: int,
               negative_ok: bool = False) -> np.ndarray:
    parts = text.split(",")
    if len(parts) != 5:
        raise AnnotationError(path, f"box {text!r} has {len(parts)} fields, expected 5 "
                                    "(x1,y1,x2,y2,class)", line=line_no)
    values = []
    for name, part in zip(("x1", "y1", "x2", "y2", "class"), parts):
        try:
            v = float(part)
        except ValueError:
            raise AnnotationError(path, f"box {text!r}: {name} {part!r} is not a number", line=line_no)
        if not math.isfinite(v):
            raise AnnotationError(path, f"box {text!r}: {name} {part!r} is not finite", line=line_no)
        values.append(v)
    _check_box(*values, num_classes, lambda r, kind=AnnotationError: kind(
        path, f"box {text!r}: {r}", line=line_no), negative_ok)
    return np.asarray(values, dtype=np.float32)


def _check_box(x1, y1, x2, y2, cls, num_classes, make_error, negative_ok: bool = False) -> None:
    """Refuse a box: ``make_error(reason)`` for a bad class or coordinate, ``make_error(reason,
    InvalidBoxError)`` for a box without area. ``negative_ok``: negative coordinates are left for
    clipping (lenient reading)."""
    if cls != int(cls):
        raise make_error(f"class id {cls:g} is not an integer")
    if cls < 0 or (num_classes is not None and cls >= num_classes):
        limit = f"0..{num_classes - 1}" if num_classes is not None else ">= 0"
        raise make_error(f"class id {int(cls)} is outside the class list ({limit})")
    if min(x1, y1, x2, y2) < 0 and not negative_ok:
        raise make_error("negative coordinate")
    if x2 <= x1:
        raise make_error(f"x2 <= x1 ({x2:g} <= {x1:g})", InvalidBoxError)
    if y2 <= y1:
        raise make_error(f"y2 <= y1 ({y2:g} <= {y1:g})", InvalidBoxError)


def _read_text(path: PathLike) -> str:
    try:
        with open(path, encoding="utf-8-sig") as f:
            return f.read()
    except FileNotFoundError:
        raise AnnotationError(path, "annotation file not found")
    except UnicodeDecodeError as e:
        raise AnnotationError(path, f"not UTF-8 text ({e.reason} at byte {e.start})")
    except OSError as e:
        raise AnnotationError(path, f"cannot read annotation file: {e.strerror or e}")


def parse_text_annotations(text: str, path: PathLike, num_classes: Optional[int] = None,
                           sink: Optional[_Sink] = None) -> List[Tuple[str, np.ndarray, int]]:
    """Parse keras-yolo3 text rows into ``(absolute image path, boxes (N, 5), line number)``.

    Raises :class:`AnnotationError` (or reports it to ``sink``) for every malformed line, and for a
    file without any image line.
    """
    sink = sink or _Sink(strict=True)
    base = os.path.dirname(os.path.abspath(os.fspath(path)))
    rows = []
    for line_no, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()  # trailing tabs too: a tab there must not make the line a path
        if not line or line.startswith("#"):
            continue
        try:
            if "\x00" in line:
                raise AnnotationError(path, "NUL character in line", line=line_no)
            image, fields = _split_line(line, path, line_no)
            boxes = [sink.keep(lambda f=f: _parse_box(f, num_classes, path, line_no,
                                                     sink.drop_invalid_boxes)) for f in fields]
            boxes = [b for b in boxes if b is not None]
        except AnnotationError as e:
            sink.report(e)
            continue
        full = image if os.path.isabs(image) else os.path.join(base, image)
        arr = np.stack(boxes) if boxes else np.zeros((0, 5), np.float32)
        rows.append((os.path.normpath(full), arr, line_no))
    if not rows and not sink.problems:
        sink.report(AnnotationError(path, "empty annotation file: no image lines"))
    return rows


# ------------------------------------------------------------------------------------------ VOC


def _voc_text(node: ET.Element, tag: str, xml_path: str) -> str:
    child = node.find(tag)
    if child is None or child.text is None or not child.text.strip():
        raise AnnotationError(xml_path, f"missing <{tag}>")
    return child.text.strip()


def parse_voc_xml(xml_path: PathLike, class_names: Sequence[str], image_dir: Optional[str] = None,
                  include_difficult: bool = False, sink: Optional[_Sink] = None
                  ) -> Tuple[str, np.ndarray, np.ndarray]:
    """One Pascal VOC XML file -> ``(image path, boxes (N, 5), difficult objects (M, 5))``.

    Objects marked ``<difficult>1</difficult>`` are the ignore regions (the devkit neither
    rewards nor penalises a detection on one), unless ``include_difficult`` reads them as boxes.
    The image is ``image_dir/<filename>`` (default: ``../JPEGImages`` beside the XML folder).
    VOC coordinates are used as written (as keras-yolo3's ``voc_annotation.py`` does): inclusive
    pixel indices.
    """
    xml_path = os.fspath(xml_path)
    sink = sink or _Sink(strict=True)
    try:
        root = ET.parse(xml_path).getroot()
    except FileNotFoundError:
        raise AnnotationError(xml_path, "XML file not found")
    except (ET.ParseError, OSError) as e:
        raise AnnotationError(xml_path, f"cannot parse XML: {e}")
    if image_dir is None:
        image_dir = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(xml_path))),
                                 "JPEGImages")
    fname = root.findtext("filename")
    if not fname or not fname.strip():
        fname = os.path.splitext(os.path.basename(xml_path))[0] + ".jpg"
    index = {n: i for i, n in enumerate(class_names)}
    boxes, difficult_boxes = [], []
    for k, obj in enumerate(root.iter("object"), start=1):
        where = f"object {k}"
        name = (obj.findtext("name") or "").strip()
        if name not in index:
            raise AnnotationError(xml_path, f"class {name!r} is not in the class list", where=where)
        difficult = (obj.findtext("difficult") or "0").strip() not in ("0", "")
        bnd = obj.find("bndbox")
        if bnd is None:
            raise AnnotationError(xml_path, "missing <bndbox>", where=where)
        vals = []
        for tag in ("xmin", "ymin", "xmax", "ymax"):
            text = bnd.findtext(tag)
            try:
                vals.append(float((text or "").strip()))
            except ValueError:
                raise AnnotationError(xml_path, f"<{tag}> {text!r} is not a number", where=where)
            if not math.isfinite(vals[-1]):
                raise AnnotationError(xml_path, f"<{tag}> {text!r} is not finite", where=where)
        box = sink.keep(lambda: _check_box(
            *vals, index[name], len(class_names),
            lambda r, kind=AnnotationError: kind(xml_path, r, where=where),
            sink.drop_invalid_boxes) or vals + [index[name]])
        if box is not None:
            (difficult_boxes if difficult and not include_difficult else boxes).append(box)
    return (os.path.normpath(os.path.join(image_dir, fname.strip())),
            np.asarray(boxes, np.float32).reshape(-1, 5),
            np.asarray(difficult_boxes, np.float32).reshape(-1, 5))


def _voc_xml_files(path: str) -> Tuple[List[str], Optional[str]]:
    """XML files named by ``path`` (XML file, folder of XML, or ImageSets/Main list) + image folder."""
    if os.path.isdir(path):
        files = sorted(os.path.join(path, f) for f in os.listdir(path) if f.lower().endswith(".xml"))
        if not files:
            raise AnnotationError(path, "folder contains no .xml annotation files")
        return files, None
    if path.lower().endswith(".xml"):
        return [path], None
    # an image-set list: VOCdevkit/VOC2007/ImageSets/Main/train.txt
    year_dir = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(path))))
    ids = [ln.split()[0] for ln in _read_text(path).splitlines() if ln.strip()]
    if not ids:
        raise AnnotationError(path, "empty image-set list")
    return ([os.path.join(year_dir, "Annotations", i + ".xml") for i in ids],
            os.path.join(year_dir, "JPEGImages"))


def _is_voc_image_set(path: str) -> bool:
    parts = os.path.abspath(path).split(os.sep)
    return len(parts) >= 3 and parts[-2] == "Main" and parts[-3] == "ImageSets"


# ----------------------------------------------------------------------------------------- COCO


def _load_json(path: str) -> dict:
    text = _read_text(path)
    if not text.strip():
        raise AnnotationError(path, "empty file")
    try:
        data = json.loads(text)
    except json.JSONDecodeError as e:
        raise AnnotationError(path, f"invalid JSON: {e.msg}", line=e.lineno)
    if not isinstance(data, dict) or not isinstance(data.get("images"), list) \
            or not isinstance(data.get("categories"), list):
        raise AnnotationError(path, "not a COCO instances file (needs 'images' and 'categories' lists)")
    return data


def _coco_categories(data: dict, path: str) -> List[dict]:
    cats = []
    for i, c in enumerate(data["categories"]):
        if not isinstance(c, dict) or not isinstance(c.get("id"), int) or not isinstance(c.get("name"), str):
            raise AnnotationError(path, "category needs an integer 'id' and a string 'name'",
                                  where=f"categories[{i}]")
        cats.append(c)
    seen: Dict[str, int] = {}
    for c in sorted(cats, key=lambda c: c["id"]):
        if c["name"].strip() in seen:
            raise AnnotationError(path, f"categories {seen[c['name'].strip()]} and {c['id']} share "
                                  f"the name {c['name']!r}: class names must be unique",
                                  where="categories")
        seen[c["name"].strip()] = c["id"]
    return sorted(cats, key=lambda c: c["id"])


def coco_class_names(path: PathLike) -> List[str]:
    """Class names of a COCO JSON file, in the order of the contiguous class ids (sorted by id)."""
    path = os.fspath(path)
    return [c["name"] for c in _coco_categories(_load_json(path), path)]


def own_class_names(path: Sources) -> Optional[List[str]]:
    """The class names the sources bring with them: a COCO file's categories (every source a
    COCO file with the same ones), else None."""
    paths = [path] if isinstance(path, (str, os.PathLike)) else list(path)
    if not paths or any(detect_format(p) != "coco" for p in paths):
        return None
    names = [coco_class_names(p) for p in paths]
    return names[0] if all(n == names[0] for n in names) else None


def _default_coco_image_dir(json_path: str) -> str:
    """``annotations/instances_val2017.json`` -> ``../val2017`` if present, else the JSON folder."""
    folder = os.path.dirname(os.path.abspath(json_path))
    stem = os.path.splitext(os.path.basename(json_path))[0]
    if "_" in stem:
        cand = os.path.join(os.path.dirname(folder), stem.split("_", 1)[1])
        if os.path.isdir(cand):
            return cand
    return folder


def parse_coco(path: PathLike, image_dir: Optional[str] = None, include_crowd: bool = False,
               sink: Optional[_Sink] = None) -> List[Tuple[str, np.ndarray, np.ndarray, str]]:
    """COCO JSON -> ``[(image path, boxes (N, 6), crowd regions (M, 5), where)]``.

    ``[x, y, w, h]`` boxes become corners; the sixth column is the annotation's ``area`` (the
    segment's, which COCO's sizes use; NaN where absent). ``iscrowd: 1`` annotations are the
    ignore regions, unless ``include_crowd`` reads them as boxes. Category ids map to contiguous
    ids sorted by id; images without boxes are kept as negatives.
    """
    path = os.fspath(path)
    sink = sink or _Sink(strict=True)
    data = _load_json(path)
    cats = _coco_categories(data, path)
    cat_index = {c["id"]: i for i, c in enumerate(cats)}
    image_dir = image_dir or _default_coco_image_dir(path)
    images: Dict[int, Tuple[str, List, List]] = {}
    order: List[int] = []
    for i, im in enumerate(data["images"]):
        if not isinstance(im, dict) or not isinstance(im.get("id"), int) \
                or not isinstance(im.get("file_name"), str):
            sink.report(AnnotationError(path, "image needs an integer 'id' and a 'file_name'",
                                        where=f"images[{i}]"))
            continue
        images[im["id"]] = (os.path.normpath(os.path.join(image_dir, im["file_name"])), [], [])
        order.append(im["id"])
    for i, ann in enumerate(data.get("annotations") or []):
        where = f"annotations[{i}]" + (f" id={ann.get('id')}" if isinstance(ann, dict) else "")
        try:
            if not isinstance(ann, dict):
                raise AnnotationError(path, "annotation is not an object", where=where)
            if ann.get("image_id") not in images:
                raise AnnotationError(path, f"image_id {ann.get('image_id')!r} is not in 'images'",
                                      where=where)
            if ann.get("category_id") not in cat_index:
                raise AnnotationError(path, f"category_id {ann.get('category_id')!r} is not in "
                                            "'categories'", where=where)
            bbox = ann.get("bbox")
            if not isinstance(bbox, list) or len(bbox) != 4:
                raise AnnotationError(path, f"bbox {bbox!r} is not a list [x, y, w, h]", where=where)
            if not all(_is_number(v) for v in bbox):
                raise AnnotationError(path, f"bbox {bbox!r} has a non-numeric value", where=where)
            area = ann.get("area")
            if area is not None and not (_is_number(area) and area >= 0):
                raise AnnotationError(path, f"area {area!r} is not a number >= 0", where=where)
            x, y, w, h = (float(v) for v in bbox)
            cls = cat_index[ann["category_id"]]
            box = sink.keep(lambda: _check_box(
                x, y, x + w, y + h, cls, len(cats),
                lambda r, kind=AnnotationError: kind(path, f"bbox {bbox!r}: {r}", where=where),
                sink.drop_invalid_boxes) or [x, y, x + w, y + h, cls])
            if box is None:
                continue
            if ann.get("iscrowd", 0) and not include_crowd:
                images[ann["image_id"]][2].append(box)
            else:
                images[ann["image_id"]][1].append(box + [math.nan if area is None else area])
        except AnnotationError as e:
            sink.report(e)
    out = [(images[k][0], np.asarray(images[k][1], np.float64).reshape(-1, 6),
            np.asarray(images[k][2], np.float32).reshape(-1, 5), f"image id {k}") for k in order]
    if not out and not sink.problems:
        sink.report(AnnotationError(path, "no images in the COCO file"))
    return out


def _is_number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


# ---------------------------------------------------------------------------------- front door


def detect_format(path: PathLike) -> str:
    """``'coco'``, ``'voc'``, ``'yolo'`` (an image folder or image-list file of the YOLO layout),
    ``'data'`` (a data file naming several sources) or ``'text'`` for an annotation path."""
    p = os.fspath(path)
    if os.path.isdir(p):
        has_xml = any(f.lower().endswith(".xml") for f in os.listdir(p))
        return "voc" if has_xml or not _has_images(p) else "yolo"
    if p.lower().endswith(".xml") or _is_voc_image_set(p):
        return "voc"
    if p.lower().endswith(".json"):
        return "coco"
    if yolo_layout.is_data_file(p):
        return "data"
    if yolo_layout.is_image_list(p):
        return "yolo"
    return "text"


def _has_images(folder: str) -> bool:
    for _, _, files in os.walk(folder):
        if any(is_image_file(f) for f in files):
            return True
    return False


def _yolo_rows(source: str, num_classes: Optional[int], sink: _Sink, result: "ScanResult"
               ) -> List[Tuple[str, np.ndarray, str, Optional[int]]]:
    """``(image, normalised boxes, label file or image, None)`` of a YOLO-layout source; refused
    rows go to ``sink`` (dropped with ``FILE:LINE`` or reported), clipped rows are logged."""
    images, skipped = yolo_layout.image_paths(source)
    if os.path.isfile(source):
        windows = yolo_layout.windows_separated(source)
        if windows:
            number, line = windows[0]
            result.portability.append(AnnotationError(
                source, f"{len(windows)} lines name their image with Windows separators (first: "
                        f"{line}): yolo3 reads them as /, other tools on this system do not "
                        "find them; write / instead", line=number))
    if skipped:
        logger.warning("%s: %d images skipped (first: %s): the training pipeline decodes JPEG, "
                       "PNG, BMP and GIF", source, len(skipped), skipped[0])
    labels = [yolo_layout.label_file(image) for image in images]
    found = [label for label in labels if label is not None]
    if not found:
        raise AnnotationError(source, f"no label files for its {len(images)} images (looked for "
                                      f"{yolo_layout.expected_labels(images[0])}); an image "
                                      "without objects has an empty label file")
    reads = iter(yolo_layout.read_label_files(found, num_classes))
    rows = []
    for image, label in zip(images, labels):
        if label is None:  # no label file: an image without objects
            rows.append((image, np.zeros((0, 5), np.float32), image, None))
            continue
        read = next(reads)
        if isinstance(read, AnnotationError):
            sink.report(read)
            continue
        for error in read.refused:
            try:
                sink.keep(lambda e=error: _raise(e))
            except AnnotationError as e:
                sink.report(e)
        for line in read.clipped:
            if result.clipped_boxes < WARNINGS_SHOWN:
                logger.warning("%s:%d: box extends past 0..1 and was clipped to the image", label,
                               line)
            result.clipped_boxes += 1
        rows.append((image, read.boxes, label, None))
    return rows


def _clip_to_image(boxes: np.ndarray, hw: Optional[Tuple[int, int]], make_error, sink: _Sink
                   ) -> Tuple[np.ndarray, int]:
    """Clip boxes to ``[0, w] x [0, h]`` (without the image size: to ``>= 0``); returns the kept
    boxes and how many were clipped. A box left without area lies outside the image: an
    :class:`InvalidBoxError` (raised, or dropped by a lenient ``sink``)."""
    if boxes.size == 0:
        return boxes, 0
    out = boxes.copy()
    upper = [np.inf, np.inf] if hw is None else [hw[1], hw[0]]
    out[:, [0, 2]] = np.clip(out[:, [0, 2]], 0, upper[0])
    out[:, [1, 3]] = np.clip(out[:, [1, 3]], 0, upper[1])
    keep = np.ones(len(out), bool)
    for k in np.nonzero((out[:, 2] <= out[:, 0]) | (out[:, 3] <= out[:, 1]))[0]:
        b = boxes[k]
        size = "" if hw is None else f" the {hw[1]}x{hw[0]} image"
        keep[k] = sink.keep(lambda: _raise(make_error(
            f"box {b[0]:g},{b[1]:g},{b[2]:g},{b[3]:g},{int(b[4])} lies outside{size}",
            InvalidBoxError))) is not None
    clipped = int(np.any(out[keep, :4] != boxes[keep, :4], axis=1).sum())
    return out[keep], clipped


def _raise(error: Exception):
    raise error


def scan_annotations(path: Sources, class_names: Optional[Sequence[str]] = None, *,
                     include_difficult: bool = False, include_crowd: bool = False,
                     check_images: bool = True, image_dir: Optional[str] = None,
                     strict: bool = False, drop_invalid_boxes: bool = False) -> ScanResult:
    """Read annotations of any format, collecting every problem (or raising the first if ``strict``).

    ``path``: one source (text, VOC, COCO, a YOLO-layout image folder or image list) or a sequence
    of them (read in turn, one result). ``class_names`` bounds the class ids of text and YOLO files
    and maps VOC names (default: the 20 VOC classes); COCO files bring their own. With
    ``check_images`` every image header is read (or taken from the header cache): missing or
    unreadable images are problems, and boxes partly outside the image are clipped (and counted).
    ``drop_invalid_boxes``: boxes without area, or outside their image, are dropped (listed in
    ``dropped_boxes``) instead of being problems; negative coordinates are clipped.
    """
    with _bulk_loading():
        return _scan(path, class_names, include_difficult=include_difficult,
                     include_crowd=include_crowd, check_images=check_images, image_dir=image_dir,
                     strict=strict, drop_invalid_boxes=drop_invalid_boxes)


@contextlib.contextmanager
def _bulk_loading() -> Iterator[None]:
    """Python's cyclic garbage collector paused while a large set is read: the records hold no
    cycles, and its passes over a heap of a million new objects cost seconds at COCO scale."""
    was_on = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_on:
            gc.enable()


def _scan(path: Sources, class_names: Optional[Sequence[str]] = None, *,
          include_difficult: bool = False, include_crowd: bool = False,
          check_images: bool = True, image_dir: Optional[str] = None,
          strict: bool = False, drop_invalid_boxes: bool = False) -> ScanResult:
    if not isinstance(path, (str, os.PathLike)):  # several sources: one result
        return _merged([_scan(p, class_names, include_difficult=include_difficult,
                              include_crowd=include_crowd, check_images=check_images,
                              image_dir=image_dir, strict=strict,
                              drop_invalid_boxes=drop_invalid_boxes) for p in path])
    path = os.fspath(path)
    sink = _Sink(strict, drop_invalid_boxes)
    result = ScanResult()
    fmt = detect_format(path)
    # (image, boxes (N, 5), or (N, 6) with COCO's area, file, line, ignore regions (M, 5))
    rows: List[Tuple[str, np.ndarray, str, Optional[int], np.ndarray]] = []
    wheres: List[Optional[str]] = []
    if fmt == "data":
        raise AnnotationError(path, "a data file names several sources (train, val ...): read "
                                    "one split's sources with yolo3.data.yolo_layout.read_data_file")
    if fmt == "yolo":
        rows = [row + (_no_boxes(),) for row in
                _yolo_rows(path, None if class_names is None else len(class_names), sink, result)]
        check_images = True  # the boxes are fractions of the image size: it is needed
    elif fmt == "text":
        num = None if class_names is None else len(class_names)
        for image, boxes, line_no in parse_text_annotations(_read_text(path), path, num, sink):
            rows.append((image, boxes, path, line_no, _no_boxes()))
    elif fmt == "coco":
        items = parse_coco(path, image_dir, include_crowd, sink)
        rows = [(image, boxes, path, None, crowd) for image, boxes, crowd, _ in items]
        wheres = [w for _, _, _, w in items]
        result.skipped_crowd = sum(len(crowd) for _, _, crowd, _ in items)
    else:
        names = list(class_names) if class_names is not None else list(VOC_CLASSES)
        files, voc_images = _voc_xml_files(path)
        for xml in files:
            try:
                image, boxes, difficult = parse_voc_xml(xml, names, image_dir or voc_images,
                                                        include_difficult, sink)
            except AnnotationError as e:
                sink.report(e)
                continue
            result.skipped_difficult += len(difficult)
            rows.append((image, boxes, xml, None, difficult))
    if fmt != "coco":
        wheres = [None] * len(rows)

    def record(image, boxes, hw=None, orient=None, ignored=_no_boxes()) -> Record:
        areas = np.asarray(boxes[:, 5], np.float64) if fmt == "coco" else None
        return Record(image, np.asarray(boxes[:, :5], np.float32), hw, orient,
                      np.asarray(ignored, np.float32), areas, pixel_indices=fmt == "voc")

    if check_images and rows:
        probes = probe_images([r[0] for r in rows], workers=8, errors=True)
        for k, (image, boxes, file, line, ignored) in enumerate(rows):
            where = wheres[k] or (f"image {image}" if line is None else None)
            try:
                if isinstance(probes[k], AnnotationError):
                    raise probes[k]
                hw, orient = probes[k]
            except AnnotationError as e:
                sink.report(AnnotationError(file, f"image {image}: {e.reason}", line=line,
                                            where=where if line is None else None))
                continue
            hw = tuple(int(v) for v in hw)
            if fmt == "yolo":  # fractions of the image, clipped to it -> pixels
                boxes = (np.asarray(boxes, np.float64) * [hw[1], hw[0], hw[1], hw[0], 1]
                         ).astype(np.float32)
                result.records.append(record(image, boxes, hw, int(orient)))
                continue
            try:
                boxes, n = _clip_to_image(boxes, hw, lambda r, kind=AnnotationError: kind(
                    file, r, line=line, where=where if line is None else None), sink)
            except AnnotationError as e:
                sink.report(e)
                continue
            result.clipped_boxes += n
            result.records.append(record(image, boxes, hw, int(orient),
                                         _clip_regions(ignored, hw)))
    else:
        for image, boxes, file, line, ignored in rows:
            if drop_invalid_boxes:  # negative coordinates read leniently: clip them at 0
                boxes, n = _clip_to_image(boxes, None, lambda r, kind=AnnotationError: kind(
                    file, r, line=line), sink)
                result.clipped_boxes += n
            result.records.append(record(image, boxes, ignored=ignored))
    result.dropped_boxes = sorted(sink.dropped, key=lambda e: (e.path or "", e.line or 0))
    result.problems = sorted(sink.problems, key=lambda e: (e.path or "", e.line or 0))
    return result


def _clip_regions(regions: np.ndarray, hw: Tuple[int, int]) -> np.ndarray:
    """Ignore regions clipped to their ``hw`` image (:func:`_clip_to_image`); those left without
    area are dropped without a word (a region outside the image covers no detection)."""
    kept, _ = _clip_to_image(np.asarray(regions, np.float32).reshape(-1, 5), hw,
                             lambda r, kind=AnnotationError: kind(None, r),
                             _Sink(strict=False, drop_invalid_boxes=True))
    return kept


def _merged(results: Sequence[ScanResult]) -> ScanResult:
    out = ScanResult()
    for r in results:
        out.records += r.records
        out.problems += r.problems
        out.dropped_boxes += r.dropped_boxes
        out.clipped_boxes += r.clipped_boxes
        out.skipped_difficult += r.skipped_difficult
        out.skipped_crowd += r.skipped_crowd
    return out


def load_annotations(path: Sources, class_names: Optional[Sequence[str]] = None, *,
                     include_difficult: bool = False, include_crowd: bool = False,
                     check_images: bool = True, image_dir: Optional[str] = None) -> List[Record]:
    """Read a text / COCO JSON (``.json``) / VOC (``.xml``, XML folder, image-set list) file.

    Raises :class:`AnnotationError` on the first malformed input; warns with the count of boxes
    clipped to their image. See :func:`scan_annotations` for the arguments.
    """
    res = scan_annotations(path, class_names, include_difficult=include_difficult,
                           include_crowd=include_crowd, check_images=check_images,
                           image_dir=image_dir, strict=True)
    if res.clipped_boxes:
        warnings.warn(f"{source_name(path)}: {res.clipped_boxes} boxes extend past their image and "
                      "were clipped", stacklevel=2)
    return res.records


def load_training_records(path: Sources, class_names: Sequence[str], strict: bool = False
                          ) -> List[Record]:
    """The records training reads from ``path``: invalid boxes (no area, outside the image) are
    dropped with one warning each naming ``FILE:LINE`` and a summary line, unless ``strict`` (then
    they are errors, as every other malformed input is). Raises :class:`AnnotationError` when no
    image is annotated, or when a class id is beyond ``class_names``."""
    result = scan_annotations(path, class_names, strict=True, drop_invalid_boxes=not strict)
    path = source_name(path)
    for problem in result.dropped_boxes[:WARNINGS_SHOWN]:
        logger.warning("%s (box dropped)", problem)
    if result.dropped_boxes:
        logger.warning("%s: %d invalid boxes dropped (strict refuses them instead)%s", path,
                       len(result.dropped_boxes), _first_shown(len(result.dropped_boxes)))
    if result.clipped_boxes:
        logger.warning("%s: %d boxes extend past their image and were clipped", path,
                       result.clipped_boxes)
    if not result.records:
        raise AnnotationError(path, "no annotated images")
    for r in result.records:
        boxes = np.asarray(r.boxes).reshape(-1, 5)
        if len(boxes) and (boxes[:, 4].max() >= len(class_names) or boxes[:, 4].min() < 0):
            raise AnnotationError(path, f"{r.path} has class id {int(boxes[:, 4].max())} beyond "
                                        f"the {len(class_names)} classes of the class list")
    return result.records


def box_sizes(records: Sequence[Record], input_hw: Optional[Sequence[int]] = None) -> np.ndarray:
    """The ``(N, 2)`` float64 ``(w, h)`` of every box of ``records``: in image pixels, or as
    letterboxed into ``input_hw`` ``(h, w)`` (then each record needs its ``image_hw``)."""
    sizes = []
    for r in records:
        wh = (np.asarray(r.boxes)[:, 2:4] - np.asarray(r.boxes)[:, 0:2]).astype(np.float64)
        if input_hw is not None and len(wh):
            ih, iw = r.image_hw
            wh = wh * min(input_hw[0] / ih, input_hw[1] / iw)
        sizes.append(wh.reshape(-1, 2))
    return np.concatenate(sizes) if sizes else np.zeros((0, 2))


def box_image_sizes(records: Sequence[Record]) -> np.ndarray:
    """The ``(N, 2)`` float64 ``(h, w)`` of the image of every box of ``records``, row for row
    with :func:`box_sizes` (each record needs its ``image_hw``)."""
    sizes = [np.tile(np.asarray(r.image_hw, np.float64),
                     (len(np.asarray(r.boxes).reshape(-1, 5)), 1)) for r in records]
    return np.concatenate(sizes) if sizes else np.zeros((0, 2))


def _fmt(v: float) -> str:
    s = f"{float(v):.3f}".rstrip("0").rstrip(".")
    return "0" if s in ("-0", "") else s


def format_record(record: Record, base_dir: Optional[str] = None) -> str:
    """One text row for ``record``; the path is made relative to ``base_dir`` when inside it."""
    p = record.path
    if base_dir is not None:
        rel = os.path.relpath(p, base_dir)
        if not rel.startswith(".."):
            p = rel
    boxes = " ".join(",".join(_fmt(v) for v in b[:4]) + f",{int(b[4])}" for b in record.boxes)
    if any(c.isspace() for c in p) or p.startswith('"') or p.startswith("#"):
        if '"' not in p and "\t" not in p and "\n" not in p:
            return f'"{p}" {boxes}'.rstrip()
        if "\t" not in p and "\n" not in p and not p.startswith('"'):
            return f"{p}\t{boxes}"
        raise ValueError(f"image path {p!r} cannot be written in the text format")
    return f"{p} {boxes}".rstrip()


def write_annotations(path: PathLike, records: Sequence[Record], relative: bool = False) -> None:
    """Write records in the keras-yolo3 text format (paths with spaces quoted or tab-separated).

    With ``relative=True``, images inside the annotation file's folder are written relative to it.
    """
    base = os.path.dirname(os.path.abspath(os.fspath(path))) if relative else None
    lines = [format_record(r, base) for r in records]
    write_text_atomic(path, "".join(line + "\n" for line in lines))
