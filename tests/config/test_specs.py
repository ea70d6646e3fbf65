"""The model-spec registry (yolo3.config.specs) against Darknet's own cfg files, read here as plain
text.

The cfgs in ``../shared/darknet`` are the independent reference: their ``[convolutional]`` count,
their ``[yolo]`` sections (one per output scale) and their ``anchors`` line are what a registered
variant must describe. No TensorFlow: the registry is data.
"""
from __future__ import annotations

import re
from pathlib import Path
from typing import Dict, List

import numpy as np
import pytest

from yolo3.config import specs
from yolo3.config.specs import (
    BACKBONES,
    SPECS,
    InputSizeError,
    ModelSpec,
    UnknownVariantError,
    check_input_size,
    get_spec,
    layout,
    layout_names,
    multi_scale_shapes,
    multi_scale_sizes,
    spec_of_layers,
    specs_preferring,
    strides_for,
)

CFG_OF = {"yolov3": "yolov3.cfg", "tiny": "yolov3-tiny.cfg"}


def _sections(cfg: Path) -> List[Dict[str, str]]:
    """A cfg as a list of sections: ``{"type": name, key: value, ...}`` (comments dropped)."""
    out: List[Dict[str, str]] = []
    for raw in cfg.read_text().splitlines():
        line = raw.split("#", 1)[0].strip()
        if line.startswith("["):
            out.append({"type": line.strip("[]")})
        elif "=" in line and out:
            key, value = (s.strip() for s in line.split("=", 1))
            out[-1][key] = value
    return out


@pytest.mark.parametrize("variant", sorted(CFG_OF))
def test_blocks_are_darknets_convolutions_in_cfg_order(variant, darknet_cfg_dir):
    sections = _sections(darknet_cfg_dir / CFG_OF[variant])
    convs = [s for s in sections if s["type"] == "convolutional"]
    blocks = get_spec(variant).blocks()
    assert len(blocks) == len(convs)
    # the outputs are the convolutions right before each [yolo], in the cfg's order
    before_yolo = [i for i, s in enumerate(sections) if s["type"] == "yolo"]
    conv_index = {id(s): k for k, s in enumerate(convs)}
    output_positions = [conv_index[id(sections[i - 1])] for i in before_yolo]
    assert [blocks[k] for k in output_positions] == [
        f"output_s{s}" for s in get_spec(variant).strides]


@pytest.mark.parametrize("variant", sorted(CFG_OF))
def test_anchors_and_scales_are_the_cfgs(variant, darknet_cfg_dir):
    yolos = [s for s in _sections(darknet_cfg_dir / CFG_OF[variant]) if s["type"] == "yolo"]
    spec = get_spec(variant)
    assert spec.num_scales == len(yolos)
    numbers = [float(v) for v in re.split(r"[,\s]+", yolos[0]["anchors"].strip()) if v]
    expected = np.asarray(numbers, np.float32).reshape(-1, 2)
    np.testing.assert_array_equal(spec.default_anchors(), expected)
    # sorted by area, as the default masks' "largest anchors on the largest stride" assumes
    area = expected.prod(axis=1)
    assert np.all(np.diff(area) >= 0)


def test_yolov3_default_masks_are_the_cfgs(darknet_cfg_dir):
    yolos = [s for s in _sections(darknet_cfg_dir / "yolov3.cfg") if s["type"] == "yolo"]
    cfg_masks = [[int(v) for v in s["mask"].split(",")] for s in yolos]
    assert get_spec("yolov3").default_masks() == cfg_masks
    # tiny: Darknet's cfg says 3,4,5 / 1,2,3 (a known quirk); keras-yolo3 and yolo3 use 3,4,5 / 0,1,2
    assert get_spec("tiny").default_masks() == [[3, 4, 5], [0, 1, 2]]


def test_strides_are_the_input_over_each_grid():
    for spec in SPECS.values():
        assert list(spec.strides) == [32 // 2 ** k for k in range(spec.num_scales)]
        assert spec.max_stride == 32
    assert strides_for(3) == [32, 16, 8] and strides_for(2) == [32, 16] and strides_for(1) == [32]
    for bad in (0, 4):
        with pytest.raises(ValueError, match="1 to 3 output scales"):
            strides_for(bad)


def test_anchors_per_scale_splits_evenly():
    assert get_spec("yolov3").anchors_per_scale(9) == 3
    assert get_spec("yolov3").anchors_per_scale(6) == 2
    assert get_spec("tiny").anchors_per_scale(6) == 3
    assert get_spec("tiny").default_masks(4) == [[2, 3], [0, 1]]


def test_aliases_and_specs_pass_through():
    tiny = SPECS["tiny"]
    for name in ("tiny", "yolov3-tiny", "tiny-yolov3"):
        assert get_spec(name) is tiny
    assert get_spec(tiny) is tiny
    assert [s.name for s in specs_preferring("tiny")][0] == "tiny"
    assert sorted(s.name for s in specs_preferring("tiny")) == sorted(SPECS)
    assert specs_preferring(None) == list(SPECS.values())


def test_unknown_names_list_the_known_ones():
    with pytest.raises(UnknownVariantError, match="unknown variant 'yolov9'.*yolov3, yolov3-spp, tiny"):
        get_spec("yolov9")
    with pytest.raises(UnknownVariantError, match="unknown layout 'resnet'.*darknet53"):
        layout("resnet")
    assert specs.UnknownModelError is UnknownVariantError  # the old name still catches it
    assert layout("darknet53") is BACKBONES["darknet53"]
    assert layout("tiny") is SPECS["tiny"].describe
    assert layout_names() == ["yolov3", "yolov3-spp", "tiny", *BACKBONES]


# the blocks an anchor-free variant adds to its base's network, besides the heads
ADDED_BLOCKS = {"tiny-af": ["head_s8_reduce", "head_s8_conv1"], "yolov3-af": []}
ADDED_STRIDES = {"tiny-af": (8,), "yolov3-af": ()}


@pytest.mark.parametrize("variant, base", [("tiny-af", "tiny"), ("yolov3-af", "yolov3")])
def test_anchor_free_variants_are_their_base_with_another_head(variant, base):
    spec, base_spec = get_spec(variant), get_spec(base)
    assert spec.anchor_free and not base_spec.anchor_free and spec.base == base
    assert spec.strides == base_spec.strides + ADDED_STRIDES[variant]
    assert spec.head.strides == spec.strides
    assert spec.anchors == () and spec.default_anchors().shape == (0, 2)
    assert spec.darknet_layout is None and base_spec.darknet_layout == base
    assert spec.darknet_sources == base_spec.darknet_sources  # Darknet weights of the base load
    assert spec.output_filters(4) == 4 * spec.head.reg_max + 4
    assert base_spec.output_filters(4) == 3 * (5 + 4) and base_spec.output_filters(4, 2) == 18
    with pytest.raises(ValueError, match=f"variant '{variant}': an anchor-free head has no "
                                         "anchors or masks"):
        spec.default_masks()
    with pytest.raises(UnknownVariantError, match=f"{variant}.*anchor-free head.*no Darknet "
                                                  f"layout.*its base '{base}' has one"):
        layout(variant)
    # everything but the base's output convolutions (tiny-af: and a stride-8 branch after them),
    # then two 3x3 blocks and a prediction per branch (box, classes) at each stride
    outputs = {f"output_s{s}" for s in spec.strides}
    kept = [b for b in base_spec.blocks() if b not in outputs]
    assert [b for b in spec.blocks() if not b.startswith("head_s") or b in kept
            or not any(b.endswith(t) for t in ("box1", "box2", "box_pred", "cls1", "cls2",
                                               "cls_pred"))] == kept + ADDED_BLOCKS[variant]
    for stride in spec.strides:
        head = [b for b in spec.blocks() if b.startswith(f"head_s{stride}_box")
                or b.startswith(f"head_s{stride}_cls")]
        assert head == [f"head_s{stride}_{b}" for b in ("box1", "box2", "box_pred", "cls1",
                                                         "cls2", "cls_pred")]


@pytest.mark.parametrize("size, expected", [(416, (416, 416)), ((320, 192), (320, 192)),
                                            (np.int64(64), (64, 64)), ([96, 128], (96, 128))])
def test_check_input_size_accepts(size, expected):
    assert check_input_size(size) == expected


@pytest.mark.parametrize("size, message", [
    (100, "multiples of 32 .100 is not"), ((320, 0), "0 is not a positive multiple"),
    (-32, "-32 is not"), ((32, 32, 3), "one side or .height, width."),
    ("big", "not a number"), (None, "not a number")])
def test_check_input_size_refuses_with_the_reason(size, message):
    with pytest.raises(InputSizeError, match=message):
        check_input_size(size)


def test_a_spec_checks_sizes_against_its_largest_stride():
    spec = ModelSpec("s16", "two scales of stride 16 and 8", SPECS["tiny"].describe,
                     SPECS["tiny"].anchors, (16, 8), "s16_body", head=SPECS["tiny"].head)
    assert spec.check_input_size(48) == (48, 48)
    with pytest.raises(InputSizeError, match="multiples of 32"):
        SPECS["tiny"].check_input_size(48)


def test_multi_scale_sizes_are_the_stride_multiples_between_the_ends():
    assert multi_scale_sizes(320, 416, 32) == (320, 352, 384, 416)
    assert multi_scale_sizes(64, 96, 16) == (64, 80, 96)
    with pytest.raises(InputSizeError, match="multiples of 32"):
        multi_scale_sizes(300, 416, 32)
    with pytest.raises(InputSizeError, match="MIN <= MAX"):
        multi_scale_sizes(416, 320, 32)


def test_multi_scale_shapes_keep_the_aspect_at_the_variants_largest_stride():
    # the longer side takes each size, the shorter keeps the aspect, rounded to the stride
    assert multi_scale_shapes(320, 416, (288, 512), 32) == ((192, 320), (192, 352), (224, 384),
                                                             (224, 416))
    assert multi_scale_shapes(320, 384, (416, 416), 32) == ((320, 320), (352, 352), (384, 384))
    assert multi_scale_shapes(32, 64, (32, 256), 32) == ((32, 32), (32, 64))  # never below it
    for variant in ("yolov3", "tiny", "tiny-af"):
        spec = get_spec(variant)
        shapes = spec.multi_scale_shapes(320, 416, (288, 512))
        assert shapes == multi_scale_shapes(320, 416, (288, 512), spec.max_stride)
        assert all(spec.check_input_size(shape) == shape for shape in shapes)


def test_spec_of_layers_recognises_each_variant_by_its_blocks():
    for spec in SPECS.values():
        names = [b if b.startswith("output_s") or b.endswith("_pred") else f"{b}_conv"
                 for b in spec.blocks()]
        if spec.anchor_free:  # the outputs join the predictions
            names = [f"output_s{s}" for s in spec.strides] + names
        extra = ["input_1", "bn_x", "leaky_x"]  # non-convolution layers do not matter
        assert spec_of_layers(names + extra) is spec
        assert spec_of_layers(names[:-1]) is None  # one block missing: not this variant
    assert spec_of_layers([]) is None
