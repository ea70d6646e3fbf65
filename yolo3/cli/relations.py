"""The relations between a command's flags, in one table (:data:`RELATIONS`), checked after
parsing and before any work (:func:`check_relations`): a flag that shapes another's work needs it
("--tile-whole needs --tile"), two that exclude each other, bounds in order ("--min-px <=
--max-px"). That the outputs differ from each other holds for every command
(:func:`check_distinct_outputs`). A flag is *given* when its value differs from its default
(:func:`yolo3.cli.flags.given`). Plain Python: nothing here imports TensorFlow.
"""
from __future__ import annotations

import argparse
import os
from dataclasses import dataclass
from typing import Dict, Optional, Sequence, Tuple, Union

from yolo3.cli.flags import declared_paths, given
from yolo3.core.errors import ArgumentError

__all__ = ["Needs", "Excludes", "AtMost", "RELATIONS", "check_relation", "check_relations",
           "check_distinct_outputs", "command_of"]


@dataclass(frozen=True)
class Needs:
    """``flag`` given (with one of the values ``when``, where given) needs one of ``others``
    given (with one of the values ``values``, where given): ``why`` says what it does."""

    flag: str
    others: Tuple[str, ...]
    why: str = ""
    when: Tuple[object, ...] = ()
    values: Tuple[object, ...] = ()


@dataclass(frozen=True)
class Excludes:
    """``flag`` and ``other`` are never both given; with ``values``, ``flag`` is never given
    while ``other`` has one of them (defaults included): a flag that would do nothing there,
    ``why`` saying what it does."""

    flag: str
    other: str
    values: Tuple[object, ...] = ()
    why: str = ""


@dataclass(frozen=True)
class AtMost:
    """The value of ``low`` is at most that of ``high`` (defaults included); with ``high`` None,
    ``low`` is a flag of two values, the first at most the second."""

    low: str
    high: Optional[str] = None


Relation = Union[Needs, Excludes, AtMost]

_TILED = "it shapes how the tiles are cut and merged"
_PHOTO = "it shapes the photo style's images"
RELATIONS: Dict[str, Tuple[Relation, ...]] = {
    "train": (
        Excludes("--gpus", "--cpu-replicas"),
        Excludes("--data-workers", "--pipeline", values=("tf",),
                 why="it sets the numpy pipeline's threads, and tf.data picks its own"),
        Excludes("--data-feed", "--pipeline", values=("tf",),
                 why="it says who makes the numpy pipeline's batches"),
        Excludes("--cache", "--pipeline", values=("tf",),
                 why="the decoded-image cache is the numpy pipeline's"),
        Needs("--tile-whole", ("--tile",), "it sets the share of whole images in tiled training"),
        Needs("--tile-background", ("--tile",), "it sets the share of background windows"),
        Needs("--tile-whole-from", ("--tile",), "it sets which objects tiles leave to the whole "
                                                "image"),
        Needs("--tile-overlap", ("--tile",), "it sets sliced validation's overlap"),
        Needs("--multi-scale-every", ("--multi-scale",), "it sets how often the size changes"),
        Needs("--ema-momentum", ("--ema",), "it is the average's momentum", values=(True,)),
        Needs("--warmup-epochs", ("--schedule",), "the warm-up is the cosine schedule's",
              values=("cosine",)),
        AtMost("--freeze-epochs", "--epochs"),
        AtMost("--multi-scale"),
    ),
    "detect": (
        Needs("--overlap", ("--tile",), _TILED),
        Needs("--merge", ("--tile",), _TILED),
        Needs("--no-whole-image", ("--tile",), _TILED),
        Needs("--save-conf", ("--save-txt",), "it adds scores to the label files"),
    ),
    "evaluate": (
        Needs("--overlap", ("--tile",), _TILED),
        Needs("--merge", ("--tile",), _TILED),
        Needs("--no-whole-image", ("--tile",), _TILED),
        Needs("--tile", ("--model",), "it slices the images a model detects in: --detections "
              "are already made"),
        Needs("--save-detections", ("--model",), "it writes the detections a model makes"),
    ),
    "export": (
        Needs("--quantize", ("--tflite", "--openvino"), "it quantizes TFLite and OpenVINO "
              "models"),
        Needs("--quantize", ("--calibration",), "int8 is calibrated on representative images",
              when=("int8",)),
        Needs("--calibration-images", ("--calibration",), "it samples the calibration images"),
        Needs("--tflite-input", ("--tflite",), "it sets the TFLite model's input"),
        Needs("--tflite-batch", ("--tflite",), "it sets the TFLite model's batch"),
        Needs("--onnx-input", ("--onnx",), "it sets the ONNX model's input"),
        Needs("--openvino-input", ("--openvino",), "it sets the OpenVINO model's input"),
        Needs("--openvino-batch", ("--openvino",), "it sets the OpenVINO model's batch"),
        Needs("--openvino-batch", ("--raw",), "any batch (0) leaves decoding and NMS out: "
              "they need a fixed batch", when=(0,)),
    ),
    "synth": tuple(Needs(flag, ("--style",), _PHOTO, values=("photo",)) for flag in (
        "--photos", "--size-distribution", "--no-distractors", "--background-photos",
        "--background-zoom", "--boxes", "--min-visible", "--no-recolour", "--class-shares")) + (
        AtMost("--min-size", "--max-size"),
        AtMost("--background-zoom"),
        Needs("--sequences", ("--video",), "it counts the video sequences"),
        Needs("--no-pan", ("--video",), "it stills the video's camera"),
    ) + tuple(Excludes("--video", flag) for flag in (
        "--num-images", "--val-fraction", "--format", "--classes", "--size-distribution",
        "--no-distractors", "--background-photos", "--background-zoom", "--boxes",
        "--min-visible", "--no-recolour", "--class-shares")),
    "check": (
        Needs("--draw-dir", ("--draw",), "it is where --draw's images go"),
        Needs("--anchors", ("--plots",), "it marks the anchors on the plots"),
        Needs("--batches", ("--plots",), "the batches are drawn into --plots"),
        Needs("--mosaic", ("--batches",), "it shapes the drawn batches"),
    ),
    "benchmark data": (
        Needs("--distinct", ("--scale",), "it shapes the --scale set"),
        Needs("--boxes", ("--scale",), "it shapes the --scale set"),
        Needs("--workdir", ("--scale",), "it is where the --scale set goes"),
    ),
    "benchmark training": (
        Needs("--profile-ops", ("--profile",), "it sets the profile's length"),
        Needs("--loss-variant", ("--loss-steps",), "it picks the loss comparison's variant"),
        Needs("--loss-size", ("--loss-steps",), "it sets the loss comparison's input"),
        Needs("--data-images", ("--data-wait",), "it sizes the --data-wait set"),
    ),
    "benchmark recipe": (
        Needs("--photos", ("--style",), _PHOTO, values=("photo",)),
        Needs("--peer-python", ("--peer",), "it runs the peer"),
        Needs("--threads", ("--peer",), "it sets the peer's threads"),
        Needs("--peer-device", ("--peer",), "it places the peer"),
        Needs("--peer-only", ("--peer",), "it trains the peer alone"),
    ),
    "benchmark inference": (
        Needs("--weights", ("--cfg",), "Darknet weights are read by their cfg"),
    ),
    "benchmark track": (
        Needs("--photos", ("--style",), _PHOTO, values=("photo",)),
    ),
    "benchmark tiles": (
        AtMost("--min-px", "--max-px"),
    ),
    "benchmark export": (
        Needs("--trained", ("--annotations", "--data"), "its accuracy is measured on a "
              "held-out set"),
        Needs("--annotations", ("--trained",), "it is the held-out set of a trained model"),
        Needs("--data", ("--trained",), "it is the held-out set of a trained model"),
        # --calibration-images alone: how many synthetic calibration images the benchmark makes
    ),
}


def command_of(parser: argparse.ArgumentParser) -> str:
    """The command a parser parses, as :data:`RELATIONS` names it (``benchmark tiles``)."""
    return parser.prog.split(" ", 1)[1] if " " in parser.prog else parser.prog


def _action(parser: argparse.ArgumentParser, flag: str) -> argparse.Action:
    try:
        return parser._option_string_actions[flag]
    except KeyError:
        raise KeyError(f"{command_of(parser)}: RELATIONS names {flag}, which it does not "
                       "have") from None


def _value(parser: argparse.ArgumentParser, args: argparse.Namespace, flag: str):
    action = _action(parser, flag)
    return getattr(args, action.dest, action.default)


def _shown(value) -> str:
    if isinstance(value, (list, tuple)):
        return " ".join(str(v) for v in value)
    return str(value)


def check_relation(relation: Relation, parser: argparse.ArgumentParser,
                   args: argparse.Namespace) -> None:
    """Refuse ``args`` breaking ``relation`` (an :class:`~yolo3.core.errors.ArgumentError`)."""
    if isinstance(relation, Excludes):
        if not given(_action(parser, relation.flag), args):
            return
        other = _value(parser, args, relation.other)
        if relation.values and other in relation.values:
            raise ArgumentError(f"{relation.flag} does nothing with {relation.other} "
                                f"{_shown(other)}" + (f": {relation.why}" if relation.why else ""))
        if not relation.values and given(_action(parser, relation.other), args):
            raise ArgumentError(f"{relation.flag} and {relation.other} exclude each other: "
                                "give one of them")
        return
    if isinstance(relation, AtMost):
        low = _value(parser, args, relation.low)
        if relation.high is None:
            if low is not None and len(low) == 2 and low[0] > low[1]:
                raise ArgumentError(f"{relation.low} {_shown(low)}: the first value must be at "
                                    "most the second")
            return
        high = _value(parser, args, relation.high)
        if low is not None and high is not None and low > high:
            raise ArgumentError(f"{relation.low} {_shown(low)} must be at most {relation.high} "
                                f"{_shown(high)}")
        return
    action = _action(parser, relation.flag)
    value = getattr(args, action.dest, action.default)
    if not given(action, args) or (relation.when and value not in relation.when):
        return
    for other in relation.others:
        other_action = _action(parser, other)
        other_value = getattr(args, other_action.dest, other_action.default)
        if relation.values:
            if other_value in relation.values:
                return
        elif given(other_action, args):
            return
    needed = " or ".join(f"{o} {_shown(relation.values[0])}" if relation.values else o
                         for o in relation.others)
    shown = f"{relation.flag} {_shown(value)}" if relation.when else relation.flag
    raise ArgumentError(f"{shown} needs {needed}" + (f": {relation.why}" if relation.why else ""))


def check_relations(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """Refuse ``args`` breaking one of :data:`RELATIONS` of ``parser``'s command
    (:class:`~yolo3.core.errors.ArgumentError` naming the flags)."""
    for relation in RELATIONS.get(command_of(parser), ()):
        check_relation(relation, parser, args)


def check_distinct_outputs(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """Refuse two output flags naming the same path (``--out e.json --save-detections
    e.json``): the second write would replace the first."""
    seen: Dict[str, str] = {}
    for flag, path, _ in declared_paths(parser, args)[0]:
        real = os.path.normcase(os.path.realpath(path))
        if real in seen and seen[real] != flag:
            raise ArgumentError(f"{path}: {seen[real]} and {flag} name the same path: the one "
                                "written last would replace the other; give each its own")
        seen.setdefault(real, flag)


def flags_named(relations: Sequence[Relation]) -> Tuple[str, ...]:
    """Every flag ``relations`` name (for the test that each exists)."""
    out = []
    for r in relations:
        if isinstance(r, Needs):
            out += [r.flag, *r.others]
        elif isinstance(r, Excludes):
            out += [r.flag, r.other]
        else:
            out += [r.low] + ([r.high] if r.high else [])
    return tuple(out)
