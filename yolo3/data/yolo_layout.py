"""The YOLO layout (Darknet's and Ultralytics'; what Roboflow, CVAT and Label Studio export).

A dataset is described by a data file, an Ultralytics ``data.yaml`` (``path``, ``train``, ``val``,
``test``: each a folder, a list of folders or a text file listing images; ``names`` a list or an
``{id: name}`` mapping; ``nc``) or a Darknet ``obj.data`` (``classes``, ``train``, ``valid``,
``names``). Each image has a label file: its path with the last ``images`` folder replaced by
``labels`` (Ultralytics) or beside it (Darknet), extension ``.txt``, one row per object:
``class cx cy w h`` normalised to 0..1 by the image size, or ``class x1 y1 x2 y2 ...`` (a
segmentation polygon, read as its box). A missing or empty label file is an image without objects.

This module reads the files (sources -> image paths, label rows -> normalised boxes with their line
numbers) and writes the layout; :mod:`yolo3.data.annotations` turns the rows into records. No
TensorFlow here.
"""
from __future__ import annotations

import math
import os
import shutil
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Sequence, Tuple, Union

import numpy as np
import yaml
from PIL import Image

from yolo3.core.errors import AnnotationError, InvalidBoxError, PathLike
from yolo3.data.class_names import check_class_names, shown_value
from yolo3.data.images import DECODED_EXTENSIONS, is_image_file

__all__ = ["DataFile", "LabelRows", "read_data_file", "is_data_file", "is_image_list",
           "windows_separated", "image_paths", "label_file", "link_image", "expected_labels",
           "parse_label_rows", "read_label_file", "read_label_files", "label_rows",
           "write_yolo_layout", "data_yaml_text", "load_yaml_bounded", "MAX_YAML_VALUES",
           "input_folders"]

_OTHER_IMAGES = (".webp", ".tif", ".tiff", ".dng", ".mpo", ".pfm", ".heic")
_ROUNDING = 1e-5  # an edge this far outside 0..1 is clipped without a warning
_NOT_NORMALISED = 1.5  # a coordinate above this is a pixel value, not a fraction of the image
SPLITS = ("train", "val", "test")
MAX_YAML_VALUES = 100_000  # values a data.yaml may expand to (its aliases followed): far above any
# real one (COCO's has 90), far below what nested aliases reach (a billion from 600 bytes)


# ------------------------------------------------------------------------------------ data files


@dataclass(frozen=True)
class DataFile:
    """A data file read: class ``names`` and, per split (``train``, ``val``, ``test``), its
    sources (absolute image folders or image-list files)."""

    path: str
    names: List[str]
    splits: Dict[str, List[str]] = field(default_factory=dict)

    def sources(self, split: str) -> List[str]:
        """The sources of ``split``; AnnotationError naming the data file when it has none (training
        needs ``train`` and ``val``; ``val`` is Darknet's ``valid``)."""
        if not self.splits.get(split):
            key = "valid" if split == "val" and self.path.lower().endswith(".data") else split
            raise AnnotationError(self.path, f"no {key}: the {split} split is needed here (the "
                                             f"file has {', '.join(self.splits) or 'none'})")
        return self.splits[split]


def is_data_file(path: PathLike) -> bool:
    """True for an Ultralytics ``.yaml`` / ``.yml`` or a Darknet ``.data`` file."""
    return os.fspath(path).lower().endswith((".yaml", ".yml", ".data"))


def read_data_file(path: PathLike) -> DataFile:
    """Read a ``data.yaml`` or ``obj.data``; AnnotationError naming the file (and line, where
    there is one) for a missing key, ``nc`` disagreeing with ``names``, or a source that does not
    exist."""
    path = os.path.abspath(os.fspath(path))
    text = _read_utf8(path, "data file")
    if path.lower().endswith(".data"):
        return _read_darknet_data(path, text)
    return _read_ultralytics_yaml(path, text)


def _read_utf8(path: str, what: str) -> str:
    try:
        with open(path, encoding="utf-8-sig") as f:
            return f.read()
    except FileNotFoundError:
        raise AnnotationError(path, f"{what} not found") from None
    except IsADirectoryError:
        raise AnnotationError(path, f"a folder, not a {what}") from None
    except UnicodeDecodeError as e:
        raise AnnotationError(path, f"not UTF-8 text ({e.reason} at byte {e.start})") from None
    except OSError as e:
        raise AnnotationError(path, f"cannot read {what}: {e.strerror or e}") from None


def load_yaml_bounded(text: str, path: str, limit: int = MAX_YAML_VALUES):
    """``yaml.safe_load(text)``, refusing (AnnotationError naming ``path``) a document whose
    aliases expand it to more than ``limit`` values or refer to themselves: a few hundred bytes
    of nested aliases would otherwise take gigabytes. Syntax errors name ``FILE:LINE``."""
    try:
        loader = yaml.SafeLoader(text)
        try:
            node = loader.get_single_node()
            if node is None:
                return None
            _count_values(node, path, limit)
            return loader.construct_document(node)
        finally:
            loader.dispose()
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        raise AnnotationError(path, f"not valid YAML: {getattr(e, 'problem', None) or e}",
                              line=mark.line + 1 if mark is not None else None) from None


def _count_values(root: "yaml.Node", path: str, limit: int) -> int:
    """How many values ``root`` stands for with its aliases followed (a shared node counts each
    time it is used, as loading copies it); AnnotationError past ``limit`` or on a cycle."""
    sizes: Dict[int, int] = {}
    on_path: set = set()

    def size(node) -> int:
        key = id(node)
        if key in sizes:
            return sizes[key]
        if key in on_path:
            raise AnnotationError(path, "an alias refers to the value that holds it (a recursive "
                                        "YAML alias)", line=node.start_mark.line + 1)
        on_path.add(key)
        total = 1
        if isinstance(node, yaml.SequenceNode):
            total += sum(size(child) for child in node.value)
        elif isinstance(node, yaml.MappingNode):
            total += sum(size(k) + size(v) for k, v in node.value)
        on_path.discard(key)
        if total > limit:
            raise AnnotationError(path, f"the YAML expands to more than {limit} values (nested "
                                        "aliases?): not a data file", line=node.start_mark.line + 1)
        sizes[key] = total
        return total
    return size(root)


def _read_ultralytics_yaml(path: str, text: str) -> DataFile:
    data = load_yaml_bounded(text, path)
    if not isinstance(data, dict):
        raise AnnotationError(path, "a data.yaml is a mapping with train, val and names")
    names = _names(path, data)
    if not data.get("train"):
        raise AnnotationError(path, "no train: a data.yaml names the train and val sources "
                                    "(folders, lists of folders or image-list files)")
    root = _root(path, data.get("path"), data["train"])
    splits = {}
    for split in SPLITS:
        value = data.get(split)
        if not value:
            continue
        entries = value if isinstance(value, list) else [value]
        splits[split] = [_ultralytics_source(path, root, str(entry), split) for entry in entries]
    return DataFile(path, names, splits)


def _names(path: str, data: dict) -> List[str]:
    """The class names of a data.yaml: a list, or an ``{id: name}`` mapping with every id from 0
    (an int, or text of one); each name checked as every layout's are
    (:func:`yolo3.data.class_names.check_class_names`); ``nc``, when given, a whole number equal to
    their count."""
    names = data.get("names")
    if names is None:
        raise AnnotationError(path, "no names: a data.yaml lists its class names (names: [a, b] or "
                                    "names: {0: a, 1: b})")
    if isinstance(names, dict):
        names = _names_by_id(path, names)
    if not isinstance(names, list) or not names:
        raise AnnotationError(path, f"names: expected a list or an {{id: name}} mapping, got "
                                    f"{shown_value(names)}")
    names = check_class_names(names, path, "names", AnnotationError)
    nc = data.get("nc")
    if nc is not None:
        if isinstance(nc, bool) or not isinstance(nc, int):
            raise AnnotationError(path, f"nc: the class count is a whole number, got "
                                        f"{shown_value(nc)} ({type(nc).__name__})")
        if nc != len(names):
            raise AnnotationError(path, f"nc is {nc} but names has {len(names)} entries")
    return names


def _names_by_id(path: str, names: dict) -> list:
    """The values of an ``{id: name}`` mapping in id order; every id a whole number (an int, or
    text of one), together 0..n-1."""
    by_id: Dict[int, object] = {}
    for key, value in names.items():
        if isinstance(key, bool) or not (isinstance(key, int) or
                                         (isinstance(key, str) and key.strip().isdigit())):
            raise AnnotationError(path, f"names: the keys of a names mapping are class ids 0, 1, "
                                        f"..., got {shown_value(key)}")
        if int(key) in by_id:
            raise AnnotationError(path, f"names: class id {int(key)} is given twice")
        by_id[int(key)] = value
    ids = sorted(by_id)
    if ids != list(range(len(ids))):
        missing = sorted(set(range(len(ids))) - set(ids))
        raise AnnotationError(path, f"names: class ids {ids[:8]} are not 0..{len(ids) - 1} "
                                    f"({'missing ' + str(missing[:8]) if missing else 'a gap'})")
    return [by_id[k] for k in ids]


def _root(path: str, declared, train) -> str:
    """The dataset root, as Ultralytics resolves it: ``path`` (relative: against the working
    folder, else the data file's folder, which stands in for Ultralytics' datasets folder; the
    first where the train source exists), else the data file's folder."""
    here = os.path.dirname(path)
    if not declared:
        return here
    declared = os.path.expanduser(str(declared))
    if os.path.isabs(declared):
        return declared
    candidates = [os.path.abspath(declared), os.path.normpath(os.path.join(here, declared))]
    entry = str(train[0] if isinstance(train, list) else train)
    for root in candidates:
        if os.path.exists(os.path.join(root, entry)):
            return root
    return next((root for root in candidates if os.path.isdir(root)), candidates[1])


def _ultralytics_source(path: str, root: str, entry: str, split: str) -> str:
    source = os.path.normpath(os.path.join(root, os.path.expanduser(entry)))
    if not os.path.exists(source) and entry.startswith("../"):
        source = os.path.normpath(os.path.join(root, entry[3:]))  # Ultralytics' second try
    if not os.path.exists(source):
        raise AnnotationError(path, f"{split}: {source} does not exist")
    return source


def _read_darknet_data(path: str, text: str) -> DataFile:
    values: Dict[str, Tuple[str, int]] = {}
    for number, line in enumerate(text.splitlines(), 1):
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        if "=" not in line:
            raise AnnotationError(path, f"expected key = value, got {line!r}", line=number)
        key, value = (s.strip() for s in line.split("=", 1))
        values[key] = (value, number)
    missing = [k for k in ("train", "names") if not values.get(k, ("",))[0]]
    if missing:
        raise AnnotationError(path, f"no {', '.join(missing)}: an obj.data names train, valid and "
                                    "names (and classes)")
    names_path, line = values["names"]
    names_file = _darknet_path(path, names_path, "names", line)
    numbered = [(n, line.strip()) for n, line in
                enumerate(_read_utf8(names_file, "names file").splitlines(), 1) if line.strip()]
    if not numbered:
        raise AnnotationError(names_file, "no class names")
    names = check_class_names([name for _, name in numbered], names_file, error=AnnotationError,
                              lines=[n for n, _ in numbered])
    if "classes" in values:
        classes, line = values["classes"]
        if not classes.isdigit() or int(classes) != len(names):
            raise AnnotationError(path, f"classes is {classes} but {names_file} has {len(names)} "
                                        "names", line=line)
    splits = {split: [_darknet_path(path, values[key][0], key, values[key][1])]
              for split, key in (("train", "train"), ("val", "valid"), ("test", "test"))
              if values.get(key, ("",))[0]}
    return DataFile(path, names, splits)


def _darknet_path(path: str, value: str, key: str, line: int) -> str:
    """A path of an obj.data: relative to Darknet's working folder, which is the working folder,
    the data file's folder or its parent (``data/obj.data`` naming ``data/train.txt``)."""
    value = os.path.expanduser(value)
    here = os.path.dirname(path)
    candidates = [value] if os.path.isabs(value) else [
        os.path.abspath(value), os.path.join(here, value), os.path.join(os.path.dirname(here), value)]
    for candidate in candidates:
        if os.path.exists(candidate):
            return os.path.normpath(os.path.abspath(candidate))
    raise AnnotationError(path, f"{key}: {value} does not exist (looked in "
                                f"{', '.join(os.path.dirname(os.path.abspath(c)) for c in candidates)})",
                          line=line)


# ----------------------------------------------------------------------------------- image sources


def is_image_list(path: PathLike) -> bool:
    """True for a text file listing image paths one per line (and nothing else: no box fields)."""
    path = os.fspath(path)
    if not os.path.isfile(path) or not path.lower().endswith(".txt"):
        return False
    try:
        with open(path, encoding="utf-8-sig") as f:
            lines = [ln.strip() for ln in f.read().splitlines()]
    except (OSError, UnicodeDecodeError):
        return False
    lines = [ln for ln in lines if ln and not ln.startswith("#")]
    return bool(lines) and all(os.path.splitext(ln)[1].lower() in DECODED_EXTENSIONS + _OTHER_IMAGES
                               for ln in lines)


def image_paths(source: PathLike) -> Tuple[List[str], List[str]]:
    """``(images, skipped)``: the absolute image paths of a source (a folder, searched recursively,
    or an image-list file), and the images of formats the training pipeline cannot decode."""
    source = os.path.abspath(os.fspath(source))
    if os.path.isdir(source):
        found = []
        for folder, dirs, files in os.walk(source):
            dirs.sort()
            found += [os.path.join(folder, f) for f in sorted(files)]
    elif os.path.isfile(source):
        found = _listed_images(source)
    else:
        raise AnnotationError(source, "image source not found")
    images = [p for p in found if is_image_file(p)]
    skipped = [p for p in found if p.lower().endswith(_OTHER_IMAGES)]
    if not images:
        raise AnnotationError(source, "no images (JPEG, PNG, BMP, GIF) in this source"
                              + (f"; {len(skipped)} of other formats" if skipped else ""))
    return images, skipped


def _listed_images(list_file: str) -> List[str]:
    """Image paths of a list file: absolute as written; ``./x`` relative to the list's folder (as
    Ultralytics reads it); other relative paths against the working folder, the list's folder or
    its parent (Darknet's ``data/train.txt`` lists ``data/obj/x.jpg``), the first that exists.
    Windows separators (``data\\obj\\x.jpg``, as Darknet on Windows writes lists) are read as
    ``/`` where only that spelling exists. A list none of whose images exists is an
    AnnotationError naming its first line."""
    listed = _list_entries(list_file)
    out = [path for _, _, path, _ in listed]
    if out and not any(os.path.exists(p) for p in out):  # none exists: the first is missing
        number, line, path, _ = listed[0]
        hint = (" (Windows separators were read as / too)" if "\\" in line else "")
        raise AnnotationError(list_file, f"none of the {len(out)} images it lists exists: {line} "
                                         f"is not at {path}{hint}", line=number)
    return out


def _list_entries(list_file: str) -> List[Tuple[int, str, str, bool]]:
    """``(line number, line, image path, read with / for Windows separators)`` of each image a
    list file names (:func:`_listed_images` says how a line is read)."""
    here = os.path.dirname(list_file)
    out = []
    for number, line in enumerate(_read_utf8(list_file, "image list").splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        path, slashed = _listed_path(line, here), False
        if not os.path.exists(path) and "\\" in line and os.sep == "/":
            respelled = _listed_path(line.replace("\\", "/"), here)
            if os.path.exists(respelled):
                path, slashed = respelled, True
        out.append((number, line, path, slashed))
    return out


def windows_separated(list_file: PathLike) -> List[Tuple[int, str]]:
    """``(line number, line)`` of the lines of an image list that name their image with Windows
    separators (``obj\\0.jpg``) where only the ``/`` spelling exists on this system: yolo3 reads
    them (:func:`image_paths`), other tools here do not."""
    return [(number, line) for number, line, _, slashed in _list_entries(os.fspath(list_file))
            if slashed]


def _listed_path(line: str, here: str) -> str:
    if os.path.isabs(line):
        return os.path.normpath(line)
    if line.startswith("./"):
        return os.path.normpath(os.path.join(here, line))
    candidates = [os.path.abspath(line), os.path.join(here, line),
                  os.path.join(os.path.dirname(here), line)]
    return os.path.normpath(next((c for c in candidates if os.path.exists(c)), candidates[1]))


def _labels_twin(path: str) -> Optional[str]:
    """``path`` with its last ``images`` folder replaced by ``labels`` (Ultralytics' rule), or
    None when it has no ``images`` folder."""
    marker = f"{os.sep}images{os.sep}"
    if marker not in path:
        return None
    head, tail = path.rsplit(marker, 1)
    return f"{head}{os.sep}labels{os.sep}{tail}"


def label_file(image: str) -> Optional[str]:
    """The label file of ``image``: Ultralytics' (the last ``images`` folder of the path replaced by
    ``labels``), else Darknet's (beside the image); None when neither exists."""
    stem = os.path.splitext(image)[0]
    twin = _labels_twin(stem)
    # a path that exists but is no file (a folder, a broken link) is returned: reading it names it
    if twin is not None and os.path.lexists(twin + ".txt"):
        return twin + ".txt"
    beside = stem + ".txt"
    return beside if os.path.lexists(beside) else None


def input_folders(images: Sequence[str]) -> List[str]:
    """The folders ``images`` lie in and, where the YOLO layout pairs one with them, their label
    folders: the places a writer must stay out of (what it wrote there would be read as input)."""
    folders = {os.path.dirname(os.path.abspath(p)) for p in images}
    twins = {_labels_twin(f + os.sep) for f in folders}
    return sorted(folders | {t.rstrip(os.sep) for t in twins if t is not None})


def expected_labels(image: str) -> str:
    """Where the label files of ``image``'s source were looked for (for error messages)."""
    folder = os.path.dirname(image)
    twin = _labels_twin(folder + os.sep)
    if twin is not None:
        return f"{twin} or .txt files beside the images"
    return f".txt files beside the images in {folder}"


# ------------------------------------------------------------------------------------- label rows


@dataclass
class LabelRows:
    """One label file read: ``boxes`` ``(N, 5)`` float64 normalised ``x1, y1, x2, y2, class`` (kept
    rows, clipped to 0..1), each kept row's ``lines``, the rows ``clipped`` (line numbers) and the
    rows refused (:class:`InvalidBoxError` naming ``FILE:LINE``)."""

    boxes: np.ndarray
    lines: List[int]
    clipped: List[int] = field(default_factory=list)
    refused: List[InvalidBoxError] = field(default_factory=list)


def parse_label_rows(text: str, path: str, num_classes: Optional[int]) -> LabelRows:
    """Read ``class cx cy w h`` rows (or ``class x1 y1 ... xn yn`` polygons of 4+ points) of the
    label file ``path``. A row with another count of numbers, a non-number, a class id outside
    ``0..num_classes - 1``, a size that is not positive, pixel values instead of fractions, or a
    box left without area inside the image is refused; coordinates outside 0..1 are clipped."""
    return _parse_texts([text], [path], num_classes)[0]


def read_label_files(paths: Sequence[str], num_classes: Optional[int]
                     ) -> List[Union[LabelRows, AnnotationError]]:
    """:func:`parse_label_rows` of many label files; a file that cannot be read gives its
    :class:`AnnotationError` in the list instead."""
    out: List[Union[LabelRows, AnnotationError, None]] = [None] * len(paths)
    texts, readable = [], []
    for k, path in enumerate(paths):
        try:
            texts.append(_read_utf8(path, "label file"))
            readable.append(k)
        except AnnotationError as e:
            out[k] = e
    for k, rows in zip(readable, _parse_texts(texts, [paths[k] for k in readable], num_classes)):
        out[k] = rows
    return out  # type: ignore[return-value]


def _parse_texts(texts: Sequence[str], paths: Sequence[str], num_classes: Optional[int]
                 ) -> List[LabelRows]:
    """Label files' texts -> :class:`LabelRows`. The common file (every row ``class cx cy w h``,
    nothing to refuse) is checked with all the others in one pass over one array (a COCO-sized
    set has 800k rows); any other file is read row by row, which says why a row is refused."""
    out: List[Optional[LabelRows]] = [None] * len(texts)
    plain, arrays, numbers = [], [], []
    for k, text in enumerate(texts):
        lines = text.splitlines()
        numbered = [n for n, line in enumerate(lines, 1) if line.strip()]
        if not numbered:
            out[k] = LabelRows(np.zeros((0, 5)), [])
            continue
        if all(len(lines[n - 1].split()) == 5 for n in numbered):
            try:
                arrays.append(np.array(text.split(), np.float64).reshape(-1, 5))
                plain.append(k)
                numbers.append(numbered)
                continue
            except ValueError:
                pass
        out[k] = _rows_one_by_one(text, paths[k], num_classes)
    if plain:
        values = np.concatenate(arrays)
        cls, centre, size = values[:, 0], values[:, 1:3], values[:, 3:5]
        edges = np.concatenate([centre - size / 2, centre + size / 2], axis=1)
        inside = np.clip(edges, 0.0, 1.0)
        with np.errstate(invalid="ignore"):
            good = (np.isfinite(values).all(axis=1) & (cls == np.floor(cls)) & (cls >= 0)
                    & (np.abs(values[:, 1:]) <= _NOT_NORMALISED).all(axis=1)
                    & (size > 0).all(axis=1)
                    & (inside[:, 2] > inside[:, 0]) & (inside[:, 3] > inside[:, 1]))
            if num_classes is not None:
                good &= cls < num_classes
            clipped = np.abs(inside - edges).max(axis=1) > _ROUNDING
        boxes = np.concatenate([inside, cls[:, None]], axis=1)
        cuts = np.cumsum([len(a) for a in arrays])[:-1]
        for k, rows, ok, cut, lines in zip(plain, np.split(boxes, cuts), np.split(good, cuts),
                                           np.split(clipped, cuts), numbers):
            if ok.all():
                out[k] = LabelRows(rows, lines, [n for n, c in zip(lines, cut) if c])
            else:
                out[k] = _rows_one_by_one(texts[k], paths[k], num_classes)
    return out  # type: ignore[return-value]


def _rows_one_by_one(text: str, path: str, num_classes: Optional[int]) -> LabelRows:
    boxes, lines, clipped, refused = [], [], [], []
    for number, line in enumerate(text.splitlines(), 1):
        fields = line.split()
        if not fields:
            continue
        try:
            box, was_clipped = _row_box(fields, num_classes)
        except ValueError as e:
            refused.append(InvalidBoxError(path, str(e), line=number))
            continue
        boxes.append(box)
        lines.append(number)
        if was_clipped:
            clipped.append(number)
    array = np.asarray(boxes, np.float64).reshape(-1, 5)
    return LabelRows(array, lines, clipped, refused)


def _row_box(fields: Sequence[str], num_classes: Optional[int]) -> Tuple[List[float], bool]:
    n = len(fields)
    if n != 5 and (n < 9 or n % 2 == 0):
        raise ValueError(f"{n} numbers: expected 5 (class cx cy w h) or a class and a polygon of "
                         "4 or more points (9, 11, ... numbers)")
    try:
        values = [float(v) for v in fields]
    except ValueError:
        bad = next(v for v in fields if not _is_number(v))
        raise ValueError(f"{bad!r} is not a number") from None
    if not all(math.isfinite(v) for v in values):
        raise ValueError("a value is not finite")
    cls = values[0]
    if cls != int(cls) or cls < 0 or (num_classes is not None and cls >= num_classes):
        limit = f"0..{num_classes - 1}" if num_classes is not None else ">= 0"
        raise ValueError(f"class id {fields[0]} is outside the class list ({limit})")
    coords = values[1:]
    if max(abs(v) for v in coords) > _NOT_NORMALISED:
        raise ValueError("coordinates above 1: label rows are fractions of the image size "
                         "(pixel values?)")
    if n == 5:
        cx, cy, w, h = coords
        if w <= 0 or h <= 0:
            raise ValueError(f"size {w:g} x {h:g} is not positive")
        x1, y1, x2, y2 = cx - w / 2, cy - h / 2, cx + w / 2, cy + h / 2
    else:
        xs, ys = coords[0::2], coords[1::2]
        x1, y1, x2, y2 = min(xs), min(ys), max(xs), max(ys)
    edges = [x1, y1, x2, y2]
    inside = [min(max(v, 0.0), 1.0) for v in edges]
    if inside[2] <= inside[0] or inside[3] <= inside[1]:
        raise ValueError("the box has no area inside the image")
    # rows written with 6 decimals may pass an edge by a rounding step: not worth a warning
    clipped = max(abs(a - b) for a, b in zip(inside, edges)) > _ROUNDING
    return inside + [cls], clipped


def _is_number(text: str) -> bool:
    try:
        float(text)
        return True
    except ValueError:
        return False


def read_label_file(path: str, num_classes: Optional[int]) -> LabelRows:
    """:func:`parse_label_rows` of a label file (AnnotationError naming it when unreadable)."""
    return parse_label_rows(_read_utf8(path, "label file"), path, num_classes)


# ------------------------------------------------------------------------------------------ writing


def label_rows(boxes: np.ndarray, image_hw: Sequence[int], scores: Optional[np.ndarray] = None
               ) -> str:
    """``class cx cy w h`` rows (normalised, 6 decimals) of ``boxes`` ``(N, 5)`` pixel
    ``x1, y1, x2, y2, class`` in an image of ``(h, w)``; with ``scores``, each row ends with its
    score (Ultralytics' ``save_conf``)."""
    h, w = (float(v) for v in image_hw)
    lines = []
    for k, (x1, y1, x2, y2, cls) in enumerate(np.asarray(boxes, np.float64).reshape(-1, 5)):
        row = (f"{int(cls)} {(x1 + x2) / 2 / w:.6f} {(y1 + y2) / 2 / h:.6f} "
               f"{(x2 - x1) / w:.6f} {(y2 - y1) / h:.6f}")
        if scores is not None:
            row += f" {float(scores[k]):.6f}"
        lines.append(row)
    return "".join(line + "\n" for line in lines)


def link_image(source: str, target: str) -> None:
    """Link ``target`` to the image ``source`` (a symbolic link where the file system allows, else
    a copy)."""
    try:
        os.symlink(os.path.abspath(source), target)
    except OSError:
        shutil.copyfile(source, target)


def write_yolo_layout(out_dir: str, splits: Dict[str, Sequence], class_names: Sequence[str]) -> str:
    """Write ``splits`` (``{"train": records, "val": records, ...}``, records with ``path``,
    ``boxes`` and ``image_hw``) under ``out_dir`` in the YOLO layout; returns the path of
    ``data.yaml``. Image names are made unique per split by their index; an image without boxes
    gets an empty label file (a negative)."""
    sources = {}  # no path: the splits resolve against the data file's folder (Ultralytics too)
    for split, records in splits.items():
        images = os.path.join(out_dir, "images", split)
        labels = os.path.join(out_dir, "labels", split)
        os.makedirs(images, exist_ok=True)
        os.makedirs(labels, exist_ok=True)
        for i, record in enumerate(records):
            stem = f"{i:06d}_{os.path.splitext(os.path.basename(record.path))[0]}"
            extension = os.path.splitext(record.path)[1].lower()
            link_image(record.path, os.path.join(images, stem + extension))
            hw = record.image_hw
            if hw is None:
                with Image.open(record.path) as im:
                    hw = (im.height, im.width)
            with open(os.path.join(labels, stem + ".txt"), "w", encoding="utf-8") as f:
                f.write(label_rows(record.boxes, hw))
        sources[split] = f"images/{split}"
    path = os.path.join(out_dir, "data.yaml")
    with open(path, "w", encoding="utf-8") as f:
        f.write(data_yaml_text(sources, class_names))
    return path


def data_yaml_text(sources: Dict[str, str], class_names: Sequence[str]) -> str:
    """A data.yaml naming ``sources`` (``{split: path}``) and ``class_names`` (as ``{id: name}``),
    written by the YAML library: every name reads back identical (quotes, backslashes, ``#``,
    colons, spaces around it, any Unicode)."""
    names = check_class_names(list(class_names), None, "class names")
    document = {**sources, "names": {i: name for i, name in enumerate(names)}}
    return yaml.safe_dump(document, sort_keys=False, allow_unicode=True, width=1000)
