"""yolo3.darknet.layout against Darknet's own cfg files read here as plain text: the cfg text it
writes holds Darknet's sections and parameters in order, and its block -> cfg index map points at
the right [convolutional] sections."""
from __future__ import annotations

from typing import Dict, List

import numpy as np
import pytest

from yolo3.config.masks import keras_yolo3_masks
from yolo3.config.specs import get_spec
from yolo3.core.errors import DarknetError
from yolo3.darknet.layout import (
    block_layer_names,
    body_to_cfg_index,
    converted_layer,
    layout_blocks,
    layout_cfg_text,
)

KEYS = ("filters", "size", "stride", "activation", "batch_normalize", "from", "layers", "mask",
        "classes", "num", "anchors", "pad")


def sections(text: str) -> List[Dict[str, str]]:
    """The layer sections of a cfg (``[net]`` left out), each ``{"type": ..., key: value}`` for the
    keys that decide the network; layer references made absolute as Darknet resolves them."""
    out: List[Dict[str, str]] = []
    for raw in text.splitlines():
        line = raw.split("#", 1)[0].strip().replace(" ", "")
        if not line:
            continue
        if line.startswith("["):
            out.append({"type": line.strip("[]")})
        elif out and line.split("=", 1)[0] in KEYS:
            key, value = line.split("=", 1)
            out[-1][key] = value
    out = [s for s in out if s["type"] != "net"]
    for i, s in enumerate(out):
        for key in ("from", "layers"):
            if key in s:
                s[key] = ",".join(str(i + int(v) if int(v) < 0 else int(v))
                                  for v in s[key].split(","))
        s.setdefault("batch_normalize", "0")
        if s["type"] == "convolutional":
            s.setdefault("stride", "1")
    return out


@pytest.mark.parametrize("variant, cfg", [("yolov3", "yolov3.cfg"), ("tiny", "yolov3-tiny.cfg")])
def test_written_cfg_has_darknets_sections(variant, cfg, darknet_cfg_dir):
    """With Darknet's masks (tiny's cfg uses 1,2,3 for stride 16; yolo3's default is 0,1,2)."""
    spec = get_spec(variant)
    ours = sections(layout_cfg_text(variant, 80, spec.default_anchors(),
                                    keras_yolo3_masks(spec.num_scales)))
    theirs = sections((darknet_cfg_dir / cfg).read_text())
    assert len(ours) == len(theirs)
    for i, (a, b) in enumerate(zip(ours, theirs)):
        assert a == b, f"section {i}: {a} != {b}"


def test_block_indices_point_at_darknets_convolutions(darknet_cfg_dir):
    for variant, cfg in (("yolov3", "yolov3.cfg"), ("tiny", "yolov3-tiny.cfg"),
                         ("darknet53", "darknet53.cfg")):
        theirs = sections((darknet_cfg_dir / cfg).read_text())
        index = body_to_cfg_index(variant)
        assert sorted(index.values()) == [i for i, s in enumerate(theirs)
                                          if s["type"] == "convolutional"][:len(index)]
        for block, i in index.items():
            if block.startswith("output_s"):
                assert theirs[i + 1]["type"] == "yolo" and theirs[i]["activation"] == "linear"
        assert layout_blocks(variant) == sorted(index, key=index.get)
    assert layout_blocks("tiny") == get_spec("tiny").blocks()


def test_written_cfg_takes_anchors_masks_classes_and_size():
    anchors = np.arange(1, 13, dtype=np.float32).reshape(6, 2) * 5
    text = layout_cfg_text("tiny", 3, anchors, [[3, 4, 5], [0, 1, 2]], (96, 160))
    assert "height=96" in text.replace(" ", "") and "width=160" in text.replace(" ", "")
    yolos = [s for s in sections(text) if s["type"] == "yolo"]
    assert [s["mask"] for s in yolos] == ["3,4,5", "0,1,2"] and {s["classes"] for s in yolos} == {"3"}
    outputs = [s for s in sections(text) if s.get("activation") == "linear"]
    assert {s["filters"] for s in outputs} == {str(3 * (3 + 5))}


def test_layer_names_and_unknown_layouts():
    assert block_layer_names("head_s32_a", {"head_s32_a_conv", "head_s32_a_bn"}) == \
        ("head_s32_a_conv", "head_s32_a_bn")
    assert block_layer_names("output_s32", {"output_s32"}) == ("output_s32", None)
    with pytest.raises(DarknetError, match="not a yolo3 body"):
        block_layer_names("head_s8_a", {"dense"})
    assert converted_layer("bn_12") == ("bn", 12) and converted_layer("maxpool_3") == ("maxpool", 3)
    assert converted_layer("backbone_stem_conv") is None
    with pytest.raises(DarknetError, match="yolo9"):
        body_to_cfg_index("yolo9")


def test_an_anchor_free_variant_has_no_cfg_to_write():
    from yolo3.config.specs import UnknownVariantError
    with pytest.raises(UnknownVariantError, match="'tiny-af' has an anchor-free head.*no Darknet "
                                                  "layout .its base 'tiny' has one."):
        layout_cfg_text("tiny-af")
