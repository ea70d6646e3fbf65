"""The pure side of weight loading: mapping the layer names of a weights file onto a model's.

Nothing here touches a model or a file: these functions rename ``{layer name: [arrays]}``
dictionaries, as detectron2's ``c2_model_loading`` maps Caffe2 names under its checkpointer.
:func:`yolo3.checkpoint.saving.read_layer_weights` reads the arrays, :func:`rename_for_model` is the
one call that maps them, and :mod:`yolo3.checkpoint.weights` copies them into a model.

- keras-yolo3's ``.h5`` files name layers ``conv2d_N``, ``batch_normalization_N`` in creation order,
  which is Darknet's cfg order and the order of the variant's blocks
  (:meth:`yolo3.config.specs.ModelSpec.blocks`): :func:`rename_keras_yolo3` maps them by that order
  and raises each batch norm's variance by keras-yolo3's epsilon (Keras's 1e-3) minus the body's
  (Darknet's 1e-6), so the outputs are keras-yolo3's.
- A model converted from Darknet (layers ``conv_<i>``, ``bn_<i>`` named by cfg index) is renamed by
  :func:`rename_converted` through :func:`yolo3.darknet.layout.body_to_cfg_index`: a variant's own
  cfg into its body, or a backbone cfg into the ``backbone_*`` layers of the variants built on it.

No TensorFlow here.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Sequence, Set, Tuple

import numpy as np

from yolo3.config.architectures import OUTPUT_PREFIX
from yolo3.config.specs import anchor_specs, get_spec, spec_of_layers
from yolo3.core.errors import Yolo3Error
from yolo3.darknet.layout import (
    LAYOUT_KINDS,
    block_layer_names,
    body_to_cfg_index,
    converted_layer,
    layout_blocks,
)

__all__ = ["WeightsError", "Renaming", "rename_for_model", "keras_yolo3_order",
           "keras_yolo3_spec", "rename_keras_yolo3", "shift_variance", "converted_conv_indices",
           "darknet_layout", "target_variant", "rename_converted", "KERAS_YOLO3_BN_EPSILON"]


class WeightsError(Yolo3Error, ValueError):
    """A weights file that cannot be read or matched to the model."""


Arrays = Dict[str, List[np.ndarray]]


@dataclass
class Renaming:
    """A source renamed for a model: ``arrays`` by the model's layer names, and how they were
    mapped (a converted Darknet source's cfg layout and its unused layers, or keras-yolo3's order)."""

    arrays: Arrays
    darknet_layout: Optional[str] = None
    unmapped: List[str] = field(default_factory=list)
    keras_yolo3: Optional[str] = None


def rename_for_model(path: str, source: Arrays, layer_names: Sequence[str], model_name: str,
                     epsilons: Dict[str, Optional[float]]) -> Renaming:
    """``source`` (``{layer: [arrays]}`` read from ``path``) under the names of a model with
    ``layer_names`` (all its layers) and the weighted layers ``epsilons`` (name: batch-norm epsilon,
    None for other layers). A keras-yolo3 file is mapped by creation order, a converted Darknet model
    by its cfg layout; any other source keeps its names. WeightsError when a keras-yolo3 or converted
    source fits no layout of the model."""
    order = keras_yolo3_order(source)
    conv_indices = converted_conv_indices(source) if order is None else None
    if order is None and conv_indices is None:
        return Renaming(source)
    kind = target_variant(layer_names, model_name, path)
    if order is not None:
        if kind is None:
            raise WeightsError(f"{path}: a keras-yolo3 file maps only onto a yolo3 body")
        arrays, summary = rename_keras_yolo3(path, source, get_spec(kind), order, epsilons)
        return Renaming(arrays, keras_yolo3=summary)
    if kind is None:  # a converted model onto another converted model: the names are the same
        return Renaming(source)
    layout = darknet_layout(path, kind, conv_indices)
    arrays, unmapped = rename_converted(source, layout, set(epsilons))
    return Renaming(arrays, darknet_layout=layout, unmapped=unmapped)


_KERAS2_NAME = re.compile(r"^(conv2d|batch_normalization)(?:_(\d+))?$")
KERAS_YOLO3_BN_EPSILON = 1e-3  # Keras's default, which keras-yolo3's models were trained with


def keras_yolo3_order(source: Dict[str, List[np.ndarray]]) -> Optional[Tuple[List[str], List[str]]]:
    """``(conv layers, batch-norm layers)`` in creation order when every layer with weights in
    ``source`` has a Keras 2 default name (keras-yolo3's files), else None."""
    convs, bns = [], []
    for name in source:
        m = _KERAS2_NAME.match(name)
        if not m:
            return None
        (convs if m.group(1) == "conv2d" else bns).append((int(m.group(2) or 0), name))
    if not convs:
        return None
    return [n for _, n in sorted(convs)], [n for _, n in sorted(bns)]


def shift_variance(variance: np.ndarray, from_epsilon: float, to_epsilon: float) -> np.ndarray:
    """float32 variances ``v'`` for a batch norm with ``to_epsilon`` such that ``v' + to_epsilon``
    equals ``v + from_epsilon`` in float32 (exactly, where a float32 ``v'`` can give it), so the
    layer normalises exactly as the source did with its epsilon."""
    target = np.asarray(variance, np.float32) + np.float32(from_epsilon)
    shifted = (target.astype(np.float64) - to_epsilon).astype(np.float32)
    for _ in range(4):  # the rounded difference may be an ulp off: step to the exact one
        got = shifted + np.float32(to_epsilon)
        if np.array_equal(got, target):
            break
        shifted = np.where(got < target, np.nextafter(shifted, np.float32(np.inf)),
                           np.where(got > target, np.nextafter(shifted, np.float32(-np.inf)),
                                    shifted))
    return shifted


def keras_yolo3_spec(path: str, order: Tuple[List[str], List[str]], variant: Optional[str] = None):
    """The variant of a keras-yolo3 file: ``variant``'s, else the one with as many blocks as the
    file has convolutions; WeightsError when none fits."""
    candidates = [get_spec(variant)] if variant else anchor_specs()
    for spec in candidates:
        if len(spec.blocks()) == len(order[0]):
            return spec
    raise WeightsError(f"{path}: keras-yolo3 file with {len(order[0])} convolutions: "
                       + ", ".join(f"a {s.name} body has {len(s.blocks())}" for s in candidates))


def rename_keras_yolo3(path: str, source: Dict[str, List[np.ndarray]], spec, order,
                       epsilons: Dict[str, Optional[float]]) -> Tuple[Dict[str, List[np.ndarray]], str]:
    """keras-yolo3 layer names -> the ``spec`` body's, by creation order (the variant's blocks, or
    a backbone layout's for a backbone-only file such as keras-yolo3's darknet53_weights.h5);
    batch-norm variances shifted from keras-yolo3's epsilon to the target's. ``epsilons``: the target
    layers' names, each with its batch-norm epsilon (None for other layers). Returns (renamed, a
    summary)."""
    convs, bns = order
    layouts = {layout: layout_blocks(layout) for layout in spec.darknet_sources}
    fitting = [name for name, blocks in layouts.items() if len(blocks) == len(convs)]
    if not fitting:
        raise WeightsError(f"{path}: {len(convs)} convolutions in keras-yolo3 order, but a "
                           f"{spec.name} body has {len(layouts[spec.name])}"
                           + "".join(f" (its {b} backbone {len(layouts[b])})" for b in layouts
                                     if b != spec.name))
    layout = fitting[0]
    names = set(epsilons)
    pairs = [block_layer_names(block, names) for block in layouts[layout]]
    bn_targets = [bn for _, bn in pairs if bn is not None]
    if len(bns) != len(bn_targets):
        raise WeightsError(f"{path}: {len(bns)} batch norms in keras-yolo3 order, but the "
                           f"{layout} layout has {len(bn_targets)}")
    renamed = {conv: source[name] for (conv, _), name in zip(pairs, convs)}
    for bn, name in zip(bn_targets, bns):
        gamma, beta, mean, variance = source[name]
        epsilon = epsilons.get(bn)
        epsilon = KERAS_YOLO3_BN_EPSILON if epsilon is None else float(epsilon)
        renamed[bn] = [gamma, beta, mean, shift_variance(variance, KERAS_YOLO3_BN_EPSILON, epsilon)]
    onto = f"a {spec.name} body" if layout == spec.name else f"the {layout} backbone of a {spec.name} body"
    return renamed, (f"{len(convs)} convolutions and {len(bns)} batch norms mapped by creation "
                     f"order onto {onto} (variances shifted from keras-yolo3's batch-norm "
                     f"epsilon {KERAS_YOLO3_BN_EPSILON:g} to the body's)")


def converted_conv_indices(source: Dict[str, List[np.ndarray]]) -> Optional[Set[int]]:
    """cfg indices of the ``conv_<i>`` layers when ``source`` is a converted Darknet model, else None."""
    parsed = [converted_layer(name) for name in source]
    if not parsed or any(p is None for p in parsed):
        return None
    convs = {index for kind, index in parsed if kind == "conv"}
    return convs or None


def layout_fits(kind: str, conv_indices: Set[int]) -> bool:
    """Whether the converted convs up to the layout's last one are exactly the layout's convs."""
    wanted = set(body_to_cfg_index(kind).values())
    return wanted == {i for i in conv_indices if i <= max(wanted)}


def darknet_layout(path: str, target: str, conv_indices: Set[int]) -> str:
    """The Darknet layout of a converted source that fits a ``target`` body, or WeightsError."""
    for kind in get_spec(target).darknet_sources:
        if layout_fits(kind, conv_indices):
            return kind
    found = [k for k in LAYOUT_KINDS if layout_fits(k, conv_indices)]
    reason = (f"its {found[0]} cfg layout does not fit a {target} body" if found else
              f"its {len(conv_indices)} convolutions (cfg indices {min(conv_indices)}.."
              f"{max(conv_indices)}) follow none of the {', '.join(LAYOUT_KINDS)} cfg layouts")
    raise WeightsError(f"{path}: converted Darknet model: {reason}")


def target_variant(layer_names: Sequence[str], model_name: str, path: str) -> Optional[str]:
    """The variant of a yolo3 body with these layer names, None for a converted Darknet model
    (its names match the source's as they are); WeightsError for any other model."""
    spec = spec_of_layers(layer_names)
    if spec is not None:
        return spec.name
    if "conv_0" in layer_names:
        return None
    raise WeightsError(f"{path}: a converted Darknet model maps only onto a yolo3 body or "
                       f"another converted model, not {model_name!r}")


def rename_converted(source: Dict[str, List[np.ndarray]], layout: str, target_names: Set[str]
                      ) -> Tuple[Dict[str, List[np.ndarray]], List[str]]:
    """``conv_<i>`` / ``bn_<i>`` -> yolo3 layer names; returns (renamed, unmapped source names).
    An output convolution the target lacks (an anchor-free body's head replaces them) stays
    unmapped."""
    rename: Dict[str, str] = {}
    for block, index in body_to_cfg_index(layout).items():
        if block.startswith(OUTPUT_PREFIX) and block not in target_names:
            continue
        conv, bn = block_layer_names(block, target_names)
        rename[f"conv_{index}"] = conv
        if bn is not None:
            rename[f"bn_{index}"] = bn
    renamed = {rename[name]: arrays for name, arrays in source.items() if name in rename}
    return renamed, sorted((n for n in source if n not in rename), key=cfg_order)


def cfg_order(name: str) -> Tuple[int, str]:
    kind, index = converted_layer(name)
    return index, kind
