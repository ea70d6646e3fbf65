"""What a saved model says about itself: variant, anchors, masks, class names, input size.

A ``.keras`` file written by training or by the converter carries a :class:`ModelInfo` as the
archive entry ``yolo3.json`` beside Keras's own ``config.json`` and weights; exported models carry
it too (a TFLite flatbuffer's ``yolo3`` metadata, an ONNX model's ``yolo3`` metadata property, a
SavedModel folder's ``yolo3.json``). Keras ignores entries
it does not know, so the file still loads with plain ``keras.models.load_model`` in a process that
never imported yolo3 (and gives the inference body); yolo3 reads the entry back with
:func:`read_info`. ``.weights.h5`` files hold weights only: they still need the variant, anchors
and classes from elsewhere.

Models written before carry their facts in side files, still read as a fallback
(:func:`read_side_files`): the converter's ``MODEL.anchors.txt`` + ``MODEL.masks.json`` and
training's ``anchors.txt`` + ``classes.txt`` beside the model. :func:`resolve_info` decides, in one
place, which source wins: explicit arguments, then the embedded info, then side files, then the
variant's defaults. No TensorFlow here.
"""
from __future__ import annotations

import json
import logging
import os
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np

from yolo3.config.head_kinds import head_of_record
from yolo3.config.heads import Head, check_own_anchors, head_of, resolved_head
from yolo3.config.masks import default_masks, validate_masks
from yolo3.core.errors import FileFormatError, PathLike, SettingError
from yolo3.core.extras import require
from yolo3.core.fileio import atomic_write, write_text_atomic
from yolo3.core.log import NOTICE
from yolo3.data.annotations import well_known_classes
from yolo3.data.class_names import read_classes
from yolo3.ops.anchors import read_anchors, write_anchors
from yolo3.ops.tiles import Slicing

logger = logging.getLogger(__name__)

INFO_NAME = "yolo3.json"
# the paths an export writes into its folder (yolo3.core.output_folder refuses a user's file there)
SAVED_MODEL_ENTRIES = ("saved_model.pb", "fingerprint.pb", "variables/variables.index",
                       "variables/variables.data-*", INFO_NAME)
OPENVINO_ENTRIES = ("model.xml", "model.bin")
OPENVINO_INFO_KEY = "yolo3"  # the IR's <rt_info> entry holding the info JSON
FORMAT = "yolo3-model-info"
VERSION = 1
MASKS_SUFFIX = ".masks.json"
ANCHORS_SUFFIX = ".anchors.txt"
TRAINING_ANCHORS = "anchors.txt"
TRAINING_CLASSES = "classes.txt"

__all__ = ["ModelInfo", "read_info", "embed_info", "resolve_info", "read_side_files",
           "sidecar_paths", "check_sidecars", "write_sidecars", "read_sidecars", "INFO_NAME",
           "info_json", "ONNX_METADATA_KEY", "OPENVINO_INFO_KEY", "openvino_xml",
           "SAVED_MODEL_ENTRIES", "OPENVINO_ENTRIES"]

ONNX_METADATA_KEY = "yolo3"


@dataclass
class ModelInfo:
    """Facts a detector needs beyond the weights.

    anchors ``(N, 2)`` float32 ``(w, h)`` input pixels; masks: anchor indices per output, largest
    stride first; class_names: None when unknown (a converted model without a classes file);
    variant: the registered variant (None for a converted model of another cfg); input_size:
    ``(h, w)`` the model was trained or converted at (the detector's default), None if any size;
    darknet_header: ``[major, minor, revision, seen]`` of converted Darknet weights (kept for
    exporting back); head: the model's head (:mod:`yolo3.config.heads`; always one once made:
    given as None, Darknet's anchor head of ``anchors`` and ``masks``; a head of another kind has
    its own anchors and masks, none for an anchor-free head, and ``anchors`` and ``masks`` are
    its); slicing: how a model trained on tiles detects by default
    (:class:`yolo3.ops.tiles.Slicing`), None for whole images.
    """

    anchors: np.ndarray
    masks: List[List[int]]
    num_classes: int
    class_names: Optional[List[str]] = None
    variant: Optional[str] = None
    input_size: Optional[Tuple[int, int]] = None
    darknet_header: Optional[List[int]] = None
    export: Optional[Dict[str, Any]] = None  # exported models: format, quantisation, input, ...
    sources: Dict[str, str] = field(default_factory=dict, compare=False)  # fact -> where it came from
    head: Optional[Head] = None  # always a head after __post_init__
    slicing: Optional[Slicing] = None

    def __post_init__(self):
        self.head = head_of(self.anchors, self.masks, self.head)
        check_own_anchors(self.head, self.anchors, self.masks)
        self.anchors, self.masks = self.head.anchor_array(), self.head.mask_lists()
        self.num_classes = int(self.num_classes)
        if self.class_names is not None:
            self.class_names = [str(n) for n in self.class_names]
            if len(self.class_names) != self.num_classes:
                raise ValueError(f"{len(self.class_names)} class names for {self.num_classes} "
                                 "classes")
        if self.input_size is not None:
            self.input_size = (int(self.input_size[0]), int(self.input_size[1]))

    @classmethod
    def of_head(cls, head: Head, num_classes: int, **facts: Any) -> "ModelInfo":
        """The facts of a model with ``head`` (:mod:`yolo3.config.heads`; its anchors and masks,
        or the anchor-free head itself) and ``num_classes`` classes; ``facts``: the other fields
        (``class_names``, ``variant``, ``input_size`` ...)."""
        return cls(head.anchor_array(), head.mask_lists(), num_classes, head=head, **facts)

    @property
    def detection_head(self) -> Head:
        """``head`` (its name in yolo3 0.6, when ``head`` was None for an anchor head)."""
        return self.head

    @property
    def strides(self) -> List[int]:
        """The output strides, largest first (the body's output order)."""
        return list(self.head.strides)

    def names(self) -> List[str]:
        """Class names, or ``'0'``, ``'1'``, ... when unknown."""
        return list(self.class_names) if self.class_names else [str(i) for i in range(self.num_classes)]

    def to_dict(self) -> Dict[str, Any]:
        return {"format": FORMAT, "version": VERSION, "variant": self.variant,
                "anchors": self.anchors.tolist(), "masks": self.masks,
                "num_classes": self.num_classes, "class_names": self.class_names,
                "input_size": None if self.input_size is None else list(self.input_size),
                "darknet_header": self.darknet_header, "export": self.export,
                "head": self.head.record(),
                "slicing": None if self.slicing is None else self.slicing.to_dict()}

    @classmethod
    def from_dict(cls, data: Dict[str, Any], path: Optional[PathLike] = None) -> "ModelInfo":
        where = INFO_NAME
        if not isinstance(data, dict) or data.get("format") != FORMAT:
            raise FileFormatError(path, f"{where} is not yolo3 model info", where=where)
        if int(data.get("version", 0)) > VERSION:
            raise FileFormatError(path, f"model info version {data['version']} is newer than this "
                                        f"yolo3 reads ({VERSION}): upgrade yolo3", where=where)
        try:
            return cls(anchors=data["anchors"], masks=data["masks"], num_classes=data["num_classes"],
                       class_names=data.get("class_names"), variant=data.get("variant"),
                       input_size=data.get("input_size"),
                       darknet_header=data.get("darknet_header"), export=data.get("export"),
                       sources={k: f"{os.fspath(path)} ({INFO_NAME})" for k in
                                ("anchors", "masks", "classes")} if path else {},
                       head=head_of_record(data.get("head"), data["anchors"], data["masks"]),
                       slicing=Slicing.from_dict(data["slicing"]) if data.get("slicing") else None)
        except (KeyError, TypeError, ValueError) as e:
            raise FileFormatError(path, f"bad model info: {e}", where=where) from None


# -- inside a .keras archive -------------------------------------------------------------------

def info_json(info: ModelInfo) -> str:
    """The JSON text of ``info`` (what every format stores)."""
    return json.dumps(info.to_dict(), indent=1)


def read_info(path: PathLike) -> Optional[ModelInfo]:
    """The :class:`ModelInfo` a model file carries, or None when it carries none: a ``.keras``
    archive's ``yolo3.json``, an ``.onnx``'s ``yolo3`` metadata property, a SavedModel folder's
    ``yolo3.json`` (a ``.tflite``'s ``yolo3`` metadata needs TensorFlow's flatbuffer schema:
    :func:`yolo3.checkpoint.tflite_metadata.read_tflite_info`), an OpenVINO IR's ``yolo3`` run-time
    info entry (the ``.xml``, or the folder holding it: :func:`openvino_xml`)."""
    path = os.fspath(path)
    try:
        xml = openvino_xml(path)
        if xml is not None:
            text, path = _read_openvino_info(xml), xml
        elif os.path.isdir(path):
            text = _read_file(os.path.join(path, INFO_NAME))
        elif path.endswith(".tflite"):
            raise FileFormatError(path, "a TFLite model's info is read by "
                                        "yolo3.checkpoint.tflite_metadata.read_tflite_info")
        elif path.endswith(".onnx"):
            text = _read_onnx_metadata(path)
        elif zipfile.is_zipfile(path):
            with zipfile.ZipFile(path) as archive:
                text = (archive.read(INFO_NAME).decode("utf-8")
                        if INFO_NAME in archive.namelist() else None)
        else:
            return None
        data = None if text is None else json.loads(text)
    except FileFormatError:
        raise
    except (OSError, zipfile.BadZipFile, UnicodeDecodeError, ValueError) as e:
        raise FileFormatError(path, f"cannot read {INFO_NAME}: {e}") from None
    return None if data is None else ModelInfo.from_dict(data, path)


def openvino_xml(path: PathLike) -> Optional[str]:
    """The OpenVINO IR ``.xml`` that ``path`` names: the file itself, or the one ``.xml`` in a
    folder without a SavedModel; None when ``path`` is neither. A folder with several ``.xml``
    files is a FileFormatError naming them."""
    path = os.fspath(path)
    if path.lower().endswith(".xml"):
        return path
    if not os.path.isdir(path) or os.path.isfile(os.path.join(path, "saved_model.pb")):
        return None
    found = sorted(name for name in os.listdir(path) if name.lower().endswith(".xml"))
    if len(found) > 1:
        raise FileFormatError(path, f"holds several OpenVINO .xml files ({', '.join(found)}): "
                                    "name the one to run")
    return os.path.join(path, found[0]) if found else None


def _read_openvino_info(xml: str) -> Optional[str]:
    """The ``yolo3`` entry of an IR's ``<rt_info>`` (its ``value``), read without OpenVINO; a file
    that is not well-formed XML is a FileFormatError naming it (with the line)."""
    import xml.etree.ElementTree as ElementTree

    if not os.path.isfile(xml):
        raise FileFormatError(xml, "model file not found")
    depth, in_info = 0, False
    try:
        for event, element in ElementTree.iterparse(xml, events=("start", "end")):
            if event == "start":
                depth += 1
                if depth == 2 and element.tag == "rt_info":
                    in_info = True
                elif in_info and depth == 3 and element.tag == OPENVINO_INFO_KEY:
                    return element.get("value")
                continue
            depth -= 1
            if depth == 1:
                in_info = False
                element.clear()  # the layers of a large IR are not kept
    except ElementTree.ParseError as e:
        line = e.position[0] if getattr(e, "position", None) else "?"
        raise FileFormatError(f"{xml}:{line}", f"not an OpenVINO IR (malformed XML: {e})") from None
    return None


def _read_file(path: str) -> Optional[str]:
    return open(path, encoding="utf-8").read() if os.path.isfile(path) else None


def _read_onnx_metadata(path: str) -> Optional[str]:
    onnx = require("onnx", "reading ONNX models")
    try:
        model = onnx.load(path, load_external_data=False)
    except OSError:
        raise
    except Exception as e:  # noqa: BLE001 - protobuf's DecodeError and onnx's own types
        first = str(e).splitlines()[0][:200] if str(e).strip() else type(e).__name__
        raise FileFormatError(path, f"not an ONNX model: {first}") from None
    return next((p.value for p in model.metadata_props if p.key == ONNX_METADATA_KEY), None)


def embed_info(path: PathLike, info: ModelInfo) -> None:
    """Write ``info`` into the ``.keras`` archive ``path`` (replacing an earlier one).

    Call it on the temporary file of an atomic save
    (:func:`yolo3.checkpoint.saving.atomic_save_model`)."""
    path = os.fspath(path)
    text = info_json(info)
    with zipfile.ZipFile(path) as archive:
        present = INFO_NAME in archive.namelist()
    if not present:
        with zipfile.ZipFile(path, "a") as archive:
            archive.writestr(INFO_NAME, text)
        return

    def rewrite(tmp: str) -> None:
        with zipfile.ZipFile(path) as src, zipfile.ZipFile(tmp, "w") as dst:
            for item in src.infolist():
                if item.filename != INFO_NAME:
                    dst.writestr(item, src.read(item.filename))
            dst.writestr(INFO_NAME, text)
    atomic_write(path, rewrite, suffix=".keras")


# -- side files (models written before) --------------------------------------------------------

def sidecar_paths(out_path: PathLike) -> Tuple[Path, Path]:
    """``(anchors file, masks JSON)`` written beside a converted model ``out_path``.

    ``model.keras`` -> ``model.anchors.txt``, ``model.masks.json``; ``model.weights.h5`` likewise.
    The JSON holds ``masks``, ``num_classes``, ``input_size`` ``[h, w]`` and the weights ``header``.
    """
    out = Path(out_path)
    name = out.name
    for ext in (".weights.h5", ".keras", ".h5", ".weights"):
        if name.endswith(ext):
            name = name[: -len(ext)]
            break
    return out.with_name(name + ANCHORS_SUFFIX), out.with_name(name + MASKS_SUFFIX)


def check_sidecars(out_path: PathLike, flag: str = "out_path") -> None:
    """Refuse, before any work, side files of ``out_path`` (:func:`sidecar_paths`) that are not
    the converter's: yolo3 replaces them only as a pair it wrote, a masks JSON of its own layout
    beside an anchors file (:class:`~yolo3.core.errors.SettingError` naming ``flag``)."""
    anchors_path, masks_path = sidecar_paths(out_path)
    if not (anchors_path.exists() or masks_path.exists()):
        return
    ours = masks_path.is_file()
    if ours:
        try:
            meta = json.loads(masks_path.read_text(encoding="utf-8"))
            ours = isinstance(meta, dict) and {"masks", "num_classes", "input_size",
                                               "header"} <= set(meta)
        except (OSError, ValueError):
            ours = False
    if ours and anchors_path.exists():
        try:
            read_anchors(anchors_path)
        except (OSError, ValueError):
            ours = False
    if not ours:
        present = [str(p) for p in (anchors_path, masks_path) if p.exists()]
        raise SettingError(f"{', '.join(present)}: yolo3 writes its side files beside {flag} "
                           f"{os.fspath(out_path)}, and what is there is not a pair it wrote: "
                           f"yolo3 never replaces it; move it away or choose another {flag}",
                           flag)


def write_sidecars(out_path: PathLike, anchors: Optional[np.ndarray], masks: List[List[int]],
                   num_classes: Optional[int], input_size: Tuple[int, int],
                   header: List[int]) -> Tuple[Optional[Path], Path]:
    """Write the converter's side files beside ``out_path``: the anchors file (when there are
    anchors) and the masks JSON. Returns their paths (anchors None without anchors)."""
    check_sidecars(out_path)
    anchors_path, masks_path = sidecar_paths(out_path)
    if anchors is not None:
        write_anchors(anchors_path, anchors)
    meta = {"masks": masks, "num_classes": num_classes, "input_size": list(input_size),
            "header": list(header)}
    write_text_atomic(masks_path, json.dumps(meta) + "\n")
    return (anchors_path if anchors is not None else None), masks_path


def read_sidecars(model_path: PathLike) -> dict:
    """The masks JSON beside ``model_path`` plus ``anchors`` (array or None); {} if there is none."""
    anchors_path, masks_path = sidecar_paths(model_path)
    if not masks_path.is_file():
        return {}
    try:
        meta = json.loads(masks_path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise FileFormatError(masks_path, f"cannot read masks JSON: {e}") from None
    if not isinstance(meta, dict):
        raise FileFormatError(masks_path, "expected a JSON object with 'masks'")
    meta["anchors"] = read_anchors(anchors_path) if anchors_path.is_file() else None
    meta["anchors_path"] = str(anchors_path)
    meta["masks_path"] = str(masks_path)
    return meta


def read_side_files(model_path: PathLike) -> Dict[str, Any]:
    """Facts found in side files beside ``model_path``: ``anchors``, ``masks``, ``class_names``,
    ``input_size``, ``darknet_header`` (each only when found) and ``sources`` (fact -> file)."""
    found: Dict[str, Any] = {"sources": {}}
    side = read_sidecars(model_path)
    if side.get("anchors") is not None:
        found["anchors"] = side["anchors"]
        found["sources"]["anchors"] = side["anchors_path"]
    if side.get("masks"):
        found["masks"] = side["masks"]
        found["sources"]["masks"] = side["masks_path"]
    if side.get("input_size"):
        found["input_size"] = tuple(side["input_size"])
    if side.get("header"):
        found["darknet_header"] = list(side["header"])
    folder = os.path.dirname(os.path.abspath(os.fspath(model_path)))
    anchors_file = os.path.join(folder, TRAINING_ANCHORS)
    if "anchors" not in found and os.path.isfile(anchors_file):
        found["anchors"] = read_anchors(anchors_file)
        found["sources"]["anchors"] = anchors_file
    classes_file = os.path.join(folder, TRAINING_CLASSES)
    if os.path.isfile(classes_file):
        found["class_names"] = read_classes(classes_file)
        found["sources"]["classes"] = classes_file
    return found


# -- deciding ------------------------------------------------------------------------------------

def resolve_info(model_path: PathLike, output_channels: Sequence[int], *,
                 anchors_path: Optional[PathLike] = None, classes_path: Optional[PathLike] = None,
                 anchor_mask: Optional[Sequence[Sequence[int]]] = None,
                 variant: Optional[str] = None, embedded: Optional[ModelInfo] = None,
                 default_anchors: Optional[np.ndarray] = None,
                 well_known_names: bool = False,
                 head: Optional[Head] = None) -> ModelInfo:
    """The facts of the body saved at ``model_path`` with outputs of ``output_channels`` channels.

    The head's kind is ``head``'s (the variant's facts), else the ``embedded`` info's (read from
    the file), else Darknet's anchor head. Where the kind has anchors, each fact comes from, in
    order: the explicit argument (``anchors_path``, ``anchor_mask``), the ``embedded`` info, side
    files beside the model, then ``default_anchors`` and the default masks; a kind without
    anchors refuses them. The class names: ``classes_path``, the embedded ones, a side file; with
    ``well_known_names``, an 80-class (20-class) model without class names gets the COCO (VOC)
    names (``sources["classes"]`` says so), as keras-yolo3 defaults to them. The class count is
    the one whose channels the head's outputs have. Raises :class:`FileFormatError` naming the
    file whose facts do not fit the model.
    """
    model_path = os.fspath(model_path)
    side = read_side_files(model_path) if embedded is None else {}
    sources: Dict[str, str] = dict(embedded.sources) if embedded is not None else {}
    sources.update(side.get("sources", {}))
    asked = []

    def find_anchors() -> Tuple[np.ndarray, List[List[int]]]:
        asked.append(True)
        return _anchors_and_masks(model_path, len(output_channels), anchors_path, anchor_mask,
                                  embedded, side, default_anchors, sources)

    try:
        found = resolved_head(find_anchors, head, embedded.head if embedded is not None else None)
    except FileFormatError:
        raise
    except ValueError as e:  # anchors and masks that make no head
        raise FileFormatError(sources.get("masks", model_path), str(e)) from None
    if (anchors_path is not None or anchor_mask is not None) and not asked:
        raise FileFormatError(model_path, f"has {_described(found)}: it takes no anchors or "
                                          "anchor masks")
    num_classes = _class_count(model_path, output_channels, found,
                               sources.get("masks", sources.get("anchors", model_path)))
    class_names = _class_names(classes_path, embedded, side, sources)
    known = well_known_classes(num_classes) if well_known_names and class_names is None else None
    if known is not None:
        class_names, sources["classes"] = list(known[1]), f"the {known[0]} names (no class list)"
        logger.log(NOTICE, "%s: no class list given or found beside it: the %d %s names",
                   model_path, num_classes, known[0])
    if class_names is not None and len(class_names) != num_classes:
        raise FileFormatError(sources.get("classes", model_path),
                              f"{len(class_names)} classes but the model predicts {num_classes}")
    input_size = embedded.input_size if embedded is not None else side.get("input_size")
    header = embedded.darknet_header if embedded is not None else side.get("darknet_header")
    if variant is None and embedded is not None:
        variant = embedded.variant
    return ModelInfo.of_head(found, num_classes, class_names=class_names, variant=variant,
                             input_size=input_size, darknet_header=header, sources=sources,
                             slicing=None if embedded is None else embedded.slicing)


def _described(head: Head) -> str:
    """``an anchor-free head``, ``a toy head``: a head's kind in words."""
    words = f"{head.kind.replace('_', '-')} head"
    return f"{'an' if words[0] in 'aeiou' else 'a'} {words}"


def _anchors_and_masks(model_path: str, num_outputs: int, anchors_path: Optional[PathLike],
                       anchor_mask, embedded: Optional[ModelInfo], side: dict,
                       default_anchors: Optional[np.ndarray], sources: Dict[str, str]
                       ) -> Tuple[np.ndarray, List[List[int]]]:
    """An anchor head's anchors ``(N, 2)`` and masks, each from the first source that has them
    (:func:`resolve_info`); ``sources`` gains where they came from."""
    if anchors_path is not None:
        anchors, sources["anchors"] = read_anchors(anchors_path), os.fspath(anchors_path)
    elif embedded is not None:
        anchors, sources["anchors"] = embedded.anchors, f"{model_path} ({INFO_NAME})"
    elif "anchors" in side:
        anchors = side["anchors"]
    elif default_anchors is not None:
        anchors, sources["anchors"] = default_anchors, "the variant's default anchors"
    else:
        raise FileFormatError(model_path, "no anchors: the model carries none, none were found "
                                          "beside it, and no anchors file was given")
    anchors = np.asarray(anchors, np.float32).reshape(-1, 2)
    anchors_source = sources.get("anchors", model_path)

    if anchor_mask is not None:
        masks = anchor_mask
    elif embedded is not None:
        masks = embedded.masks
    elif "masks" in side:
        masks = side["masks"]
    else:
        try:
            masks = default_masks(len(anchors), num_outputs)
        except ValueError as e:
            raise FileFormatError(anchors_source, f"{e} ({num_outputs} outputs)") from None
    try:
        masks = validate_masks(masks, len(anchors))
    except (TypeError, ValueError) as e:
        if anchors_path is not None and anchor_mask is None:  # the given anchors are what differs
            raise FileFormatError(anchors_path, f"{len(anchors)} anchors do not fit the model's "
                                  f"anchor masks {masks}: {e}") from None
        raise FileFormatError(sources.get("masks", anchors_source), f"bad anchor masks: {e}") from None
    if len(masks) != num_outputs:
        raise FileFormatError(model_path, f"{num_outputs} outputs but {len(masks)} anchor "
                                          f"masks {masks}")
    return anchors, masks


def _class_count(model_path: str, output_channels: Sequence[int], head: Head,
                 facts_source: str) -> int:
    """The class count whose channels ``head``'s outputs have (FileFormatError naming
    ``facts_source``, where the head's anchors and masks came from, when none fits)."""
    channels = [int(c) for c in output_channels]
    try:
        num_classes = head.num_classes(channels[0])
    except ValueError as e:
        raise FileFormatError(facts_source, f"output channels {channels} do not fit "
                                            f"{_head_facts(head)}: {e}") from None
    if channels != head.output_channels(num_classes):
        raise FileFormatError(facts_source, f"output channels {channels} do not fit "
                                            f"{_head_facts(head)}")
    return num_classes


def _head_facts(head: Head) -> str:
    """A head in the words of an error: its kind, strides and anchor masks where it has any."""
    masks = head.mask_lists()
    return f"{_described(head)} of strides {list(head.strides)}" + (
        f" and anchor masks {masks}" if masks else "")


def _class_names(classes_path: Optional[PathLike], embedded: Optional[ModelInfo], side: dict,
                 sources: Dict[str, str]) -> Optional[List[str]]:
    """The class names: the given file, else the embedded ones, else a side file (or None)."""
    if classes_path is not None:
        sources["classes"] = os.fspath(classes_path)
        return read_classes(classes_path)
    if embedded is not None and embedded.class_names:
        return embedded.class_names
    return side.get("class_names")
