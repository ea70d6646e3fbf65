"""The architectures (yolo3.config.architectures) traced by a plain-Python Net, against Darknet's
cfgs.

The tracer follows strides and channels through every operation and counts parameters, without
Keras or the cfg writer: the convolutions must be the cfg's (filters, size, stride) in order, the
operations Darknet's sections in order, the outputs at strides 32/16/8 and the parameter counts
those keras-yolo3's bodies report (62,001,757 for YOLOv3 and 8,858,734 for tiny YOLOv3 at 80 classes).
"""
from __future__ import annotations

from pathlib import Path
from typing import Dict, List, Tuple

import pytest

from yolo3.config import architectures

Point = Tuple[int, int]  # (stride, channels)


class Tracer:
    """A :class:`yolo3.config.architectures.Net` over (stride, channels) points that records what a
    Darknet cfg would hold."""

    def __init__(self):
        self.current: Point = (1, 3)
        self.sections: List[str] = []
        self.convs: List[Tuple[int, int, int]] = []  # (filters, size, stride)
        self.outputs: Dict[int, int] = {}
        self.params = 0
        self.names: List[str] = []

    def _name(self, name: str) -> None:
        assert name not in self.names, f"layer name {name} used twice"
        self.names.append(name)

    def conv(self, block, filters, size, stride=1):
        self._name(block)
        s, c = self.current
        self.params += size * size * c * filters + 4 * filters  # no bias; BN's 4 per channel
        self.sections.append("convolutional")
        self.convs.append((filters, size, stride))
        self.current = (s * stride, filters)
        return self.current

    def output(self, stride, filters):
        self._name(f"output_s{stride}")
        s, c = self.current
        assert s == stride, f"output_s{stride} sits at stride {s}"
        self.params += c * filters + filters
        self.sections += ["convolutional", "yolo"]
        self.convs.append((filters, 1, 1))
        self.outputs[stride] = filters
        self.current = (s, filters)
        return self.current

    def shortcut(self, name, source):
        self._name(name)
        assert source == self.current, f"{name}: residual of {source} and {self.current}"
        self.sections.append("shortcut")
        return self.current

    def tap(self, name):
        self._name(name)
        return self.current

    def route(self, source):
        self.sections.append("route")
        self.current = source
        return source

    def concat(self, name, sources):
        self._name(name)
        strides = {s for s, _ in sources}
        assert len(strides) == 1, f"{name} joins strides {strides}"
        self.sections.append("route")
        self.current = (strides.pop(), sum(c for _, c in sources))
        return self.current

    def upsample(self, name):
        self._name(name)
        self.sections.append("upsample")
        s, c = self.current
        self.current = (s // 2, c)
        return self.current

    def maxpool(self, name, size, stride):
        self._name(name)
        self.sections.append("maxpool")
        s, c = self.current
        self.current = (s * stride, c)
        return self.current


def _cfg(path: Path) -> Tuple[List[str], List[Tuple[int, int, int]]]:
    """Section types after ``[net]`` and each convolution's (filters, size, stride)."""
    sections, convs = [], []
    for raw in path.read_text().splitlines():
        line = raw.split("#", 1)[0].strip()
        if line.startswith("["):
            sections.append(line.strip("[]"))
            if sections[-1] == "convolutional":
                convs.append({})
        elif "=" in line and sections and sections[-1] == "convolutional":
            key, value = (s.strip() for s in line.split("=", 1))
            convs[-1][key] = value
    return sections[1:], [(int(c["filters"]), int(c["size"]), int(c["stride"])) for c in convs]


def _trace(describe, out_filters: int = 255) -> Tracer:
    net = Tracer()
    describe(net, out_filters)
    return net


@pytest.mark.parametrize("describe, cfg", [(architectures.yolov3, "yolov3.cfg"),
                                           (architectures.tiny_yolov3, "yolov3-tiny.cfg"),
                                           (architectures.darknet53_backbone, "darknet53.cfg")])
def test_operations_and_convolutions_are_darknets(describe, cfg, darknet_cfg_dir):
    sections, convs = _cfg(darknet_cfg_dir / cfg)
    net = _trace(describe)
    assert net.sections == sections
    assert net.convs == convs


@pytest.mark.parametrize("describe, outputs, params", [
    (architectures.yolov3, {32: 255, 16: 255, 8: 255}, 62_001_757),
    (architectures.tiny_yolov3, {32: 255, 16: 255}, 8_858_734)])
def test_outputs_and_parameter_count(describe, outputs, params):
    net = _trace(describe)
    assert net.outputs == outputs
    assert net.params == params


def test_spp_adds_three_pools_and_one_reduction_to_the_stride_32_head():
    plain, spp = _trace(architectures.yolov3), _trace(architectures.yolov3_spp)
    assert spp.sections.count("maxpool") == 3 and plain.sections.count("maxpool") == 0
    assert len(spp.convs) == len(plain.convs) + 1
    assert spp.outputs == plain.outputs
    reduce = spp.names.index("head_s32_spp_reduce")
    assert spp.names[reduce - 4:reduce] == ["head_s32_spp_pool5", "head_s32_spp_pool9",
                                            "head_s32_spp_pool13", "head_s32_spp_concat"]


def test_darknet53_taps_are_the_stage_ends():
    net = Tracer()
    taps = architectures.darknet53(net)
    assert taps == {"c3": (8, 256), "c4": (16, 512), "c5": (32, 1024)}
    assert len(net.convs) == 52 and net.sections.count("shortcut") == 23
    assert all(n.startswith(architectures.BACKBONE_PREFIX) for n in net.names)


def test_out_filters_reach_every_output():
    assert _trace(architectures.tiny_yolov3, 3 * (5 + 4)).outputs == {32: 27, 16: 27}
