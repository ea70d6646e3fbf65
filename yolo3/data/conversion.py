"""Writing records in any supported layout, so that data moves both ways between them.

:func:`write_dataset` writes named splits of :class:`~yolo3.data.annotations.Record` lists (boxes in
displayed-image pixels) into a new folder, in one of
:data:`yolo3.config.choices.ANNOTATION_FORMATS`:

- ``text``: ``SPLIT.txt`` in keras-yolo3's rows (absolute image paths) and ``classes.txt``;
- ``coco``: ``SPLIT.json`` (COCO instances: ``file_name`` the absolute image path, ``bbox``
  ``[x, y, w, h]``, category ids from 1 in class order, ``area`` the record's COCO area where it
  has one, else width x height; the ignore regions as ``iscrowd: 1``);
- ``voc``: ``Annotations/*.xml``, ``JPEGImages/`` (the images linked), ``ImageSets/Main/SPLIT.txt``
  and ``classes.txt``, as VOCdevkit lays them out (corners written as they are held, as
  :func:`yolo3.data.annotations.parse_voc_xml` reads them; the ignore regions as
  ``<difficult>1</difficult>``);
- ``text`` and ``yolo`` have no ignore regions: they are left out (a warning counts them).
- ``yolo``: ``data.yaml``, ``images/SPLIT``, ``labels/SPLIT`` (:mod:`yolo3.data.yolo_layout`).

Images are linked (symbolic links where the file system allows, else copied), never re-encoded.
The folder is written beside its final name and moved into place under the ownership rule
(:func:`yolo3.core.output_folder.write_output_folder`): a failure leaves nothing, and a folder holding
files yolo3 did not write is refused unless ``exist_ok`` (they are then kept, never replaced). An
output inside a folder the records' images (or their YOLO-layout labels) lie in is refused: the
next read of that folder would take the written files for input.
Every record needs its ``image_hw`` (read with ``check_images``). No TensorFlow here.
"""
from __future__ import annotations

import json
import logging
import os
import xml.etree.ElementTree as ET
from typing import Dict, List, Sequence

import numpy as np

from yolo3.config.choices import ANNOTATION_FORMATS
from yolo3.core.errors import ArgumentError, PathLike
from yolo3.core.output_folder import write_output_folder
from yolo3.core.paths import refuse_overwriting_inputs
from yolo3.data.annotations import Record, write_annotations
from yolo3.data.class_names import fits_classes_file, write_classes
from yolo3.data.yolo_layout import input_folders, link_image, write_yolo_layout

__all__ = ["write_dataset", "written_entries"]

logger = logging.getLogger(__name__)


def written_entries(fmt: str, split_names: Sequence[str]) -> List[str]:
    """The paths :func:`write_dataset` writes in format ``fmt`` for ``split_names`` that are known
    before the records are read (each image's files are known after, and checked then)."""
    if fmt == "text":
        return [f"{split}.txt" for split in split_names] + ["classes.txt"]
    if fmt == "coco":
        return [f"{split}.json" for split in split_names]
    if fmt == "voc":
        return [f"ImageSets/Main/{split}.txt" for split in split_names] + ["classes.txt"]
    return ["data.yaml"]


def write_dataset(out_dir: PathLike, fmt: str, splits: Dict[str, Sequence[Record]],
                  class_names: Sequence[str], exist_ok: bool = False,
                  flag: str = "out_dir") -> str:
    """Write ``splits`` (``{"train": records, ...}``) as ``fmt`` into the folder ``out_dir``;
    returns its path. ``out_dir`` must be new, empty or yolo3's (``exist_ok``: it may hold other
    files, which are kept) and lie outside every folder the records' images come from; ``flag``
    names it in refusals."""
    if fmt not in ANNOTATION_FORMATS:
        raise ArgumentError(f"unknown annotation format {fmt!r}: expected one of "
                            f"{', '.join(ANNOTATION_FORMATS)}")
    out_dir = os.path.abspath(os.fspath(out_dir))
    missing = [r.path for records in splits.values() for r in records if r.image_hw is None]
    if missing:
        raise ArgumentError(f"{missing[0]}: the image size is unknown (read the records with "
                            "check_images)")
    if fmt in ("text", "voc") and not fits_classes_file(class_names):
        padded = next(n for n in class_names if n != n.strip())
        raise ArgumentError(f"class name {padded!r} begins or ends with spaces, which the "
                            f"classes.txt of the {fmt} layout cannot keep: write it as yolo or "
                            "coco, or rename the class")
    images = [r.path for records in splits.values() for r in records]
    regions = sum(len(r.ignored) for records in splits.values() for r in records)
    if regions and fmt not in ("coco", "voc"):
        logger.warning("%d ignore regions (COCO crowd, VOC difficult) left out: the %s layout "
                       "has no place for them (coco and voc keep them)", regions, fmt)
    refuse_overwriting_inputs([(flag, out_dir)], input_folders(images))
    write_output_folder(out_dir, lambda work: _WRITERS[fmt](str(work), splits, list(class_names)),
                        flag, exist_ok, written_entries(fmt, list(splits)))
    return out_dir


def _classes(folder: str, names: List[str]) -> None:
    write_classes(os.path.join(folder, "classes.txt"), names)


def _write_text(folder: str, splits: Dict[str, Sequence[Record]], names: List[str]) -> None:
    for split, records in splits.items():
        write_annotations(os.path.join(folder, f"{split}.txt"), records)
    _classes(folder, names)


def _write_coco(folder: str, splits: Dict[str, Sequence[Record]], names: List[str]) -> None:
    categories = [{"id": k + 1, "name": name, "supercategory": ""} for k, name in enumerate(names)]
    for split, records in splits.items():
        images, annotations = [], []
        for image_id, record in enumerate(records, 1):
            h, w = record.image_hw
            images.append({"id": image_id, "file_name": record.path, "height": int(h),
                           "width": int(w)})
            boxes = np.asarray(record.boxes, np.float64).reshape(-1, 5)
            areas = (np.full(len(boxes), np.nan) if record.areas is None
                     else np.asarray(record.areas, np.float64))
            rows = [(box, area, 0) for box, area in zip(boxes, areas)]
            rows += [(box, np.nan, 1) for box in np.asarray(record.ignored, np.float64).reshape(-1, 5)]
            for (x1, y1, x2, y2, cls), area, crowd in rows:
                bw, bh = x2 - x1, y2 - y1
                annotations.append({"id": len(annotations) + 1, "image_id": image_id,
                                    "category_id": int(cls) + 1, "iscrowd": crowd,
                                    "bbox": [round(x1, 3), round(y1, 3), round(bw, 3), round(bh, 3)],
                                    "area": round(bw * bh if np.isnan(area) else area, 3)})
        with open(os.path.join(folder, f"{split}.json"), "w", encoding="utf-8") as f:
            json.dump({"images": images, "annotations": annotations, "categories": categories}, f)


def _write_voc(folder: str, splits: Dict[str, Sequence[Record]], names: List[str]) -> None:
    for sub in ("Annotations", "JPEGImages", os.path.join("ImageSets", "Main")):
        os.makedirs(os.path.join(folder, sub))
    for split, records in splits.items():
        ids = []
        for k, record in enumerate(records):
            stem = f"{split}_{k:06d}_{os.path.splitext(os.path.basename(record.path))[0]}"
            file_name = stem + os.path.splitext(record.path)[1].lower()
            link_image(record.path, os.path.join(folder, "JPEGImages", file_name))
            ET.ElementTree(_voc_xml(record, file_name, names)).write(
                os.path.join(folder, "Annotations", stem + ".xml"), encoding="utf-8")
            ids.append(stem)
        with open(os.path.join(folder, "ImageSets", "Main", f"{split}.txt"), "w",
                  encoding="utf-8") as f:
            f.write("".join(i + "\n" for i in ids))
    _classes(folder, names)


def _voc_xml(record: Record, file_name: str, names: List[str]) -> ET.Element:
    root = ET.Element("annotation")
    ET.SubElement(root, "folder").text = "JPEGImages"
    ET.SubElement(root, "filename").text = file_name
    size = ET.SubElement(root, "size")
    h, w = record.image_hw
    for tag, value in (("width", w), ("height", h), ("depth", 3)):
        ET.SubElement(size, tag).text = str(int(value))
    rows = [(box, "0") for box in np.asarray(record.boxes, np.float64).reshape(-1, 5)]
    rows += [(box, "1") for box in np.asarray(record.ignored, np.float64).reshape(-1, 5)]
    for (x1, y1, x2, y2, cls), difficult in rows:
        obj = ET.SubElement(root, "object")
        ET.SubElement(obj, "name").text = names[int(cls)]
        ET.SubElement(obj, "difficult").text = difficult
        box = ET.SubElement(obj, "bndbox")
        for tag, value in (("xmin", x1), ("ymin", y1), ("xmax", x2), ("ymax", y2)):
            ET.SubElement(box, tag).text = f"{value:.3f}".rstrip("0").rstrip(".")
    return root


def _write_yolo(folder: str, splits: Dict[str, Sequence[Record]], names: List[str]) -> None:
    write_yolo_layout(folder, splits, names)


_WRITERS = {"text": _write_text, "coco": _write_coco, "voc": _write_voc, "yolo": _write_yolo}
