"""The network architectures, written once as a sequence of Darknet operations.

Each architecture is a function ``describe(net, out_filters)`` that calls the methods of a
:class:`Net`. Two classes implement it:

- :class:`yolo3.model.KerasNet` builds Keras layers with yolo3 names (the trainable bodies);
- :class:`yolo3.darknet.layout.DarknetNet` writes Darknet cfg layers and records which cfg index
  each yolo3 block has (the converter's loading map and the exporter's cfg).

So the Keras bodies and their Darknet cfgs cannot disagree. Names: a convolution *block* ``NAME``
(conv, batch norm, leaky ReLU) becomes the Keras layers ``NAME_conv``, ``NAME_bn``, ``NAME_leaky``
(``NAME_pad`` before a stride-2 one); the output convolution of stride ``s`` is ``output_s<s>``.
Backbone layers start with ``backbone_``, the heads with ``head_s32_``, ``head_s16_``, ``head_s8_``.

:func:`anchor_free` makes the anchor-free variant of an architecture: the same network with each
output convolution replaced by a decoupled head (YOLOv8's: two 3x3 blocks and a linear 1x1
prediction for the box distances, the same for the classes; the body output ``output_s<s>`` is
their concatenation). No TensorFlow here.
"""
from __future__ import annotations

from typing import Any, Callable, Dict, Protocol, Sequence

Ref = Any  # a point of the network: a Keras tensor, or a cfg layer index
Describe = Callable[..., None]  # describe(net, out_filters)

BACKBONE_PREFIX = "backbone_"
OUTPUT_PREFIX = "output_s"  # + the stride: the name of an output convolution
PREDICTION_SUFFIX = "_pred"  # a linear prediction convolution of an anchor-free head


def output_name(stride: int) -> str:
    """The name of the output convolution of ``stride`` (``output_s32``)."""
    return f"{OUTPUT_PREFIX}{stride}"

# Darknet-53: (stage, filters, residual blocks); taps c3, c4, c5 end stages s3, s4, s5.
DARKNET53_STAGES = (("s1", 64, 1), ("s2", 128, 2), ("s3", 256, 8), ("s4", 512, 8), ("s5", 1024, 4))
DARKNET53_TAPS = {"s3": "c3", "s4": "c4", "s5": "c5"}


class Net(Protocol):
    """The operations an architecture is written in. Every method returns the new current point."""

    current: Ref

    def conv(self, block: str, filters: int, size: int, stride: int = 1) -> Ref:
        """Darknet ``[convolutional]`` with batch norm and leaky ReLU (stride 2: pad top/left)."""

    def output(self, stride: int, filters: int) -> Ref:
        """The linear 1x1 output convolution ``output_s<stride>`` (with bias): a body output,
        followed in Darknet by its ``[yolo]`` layer."""

    def shortcut(self, name: str, source: Ref) -> Ref:
        """Residual sum of ``source`` and the current point (Darknet ``[shortcut]``)."""

    def tap(self, name: str) -> Ref:
        """A named point (Keras ``Identity`` layer; nothing in Darknet)."""

    def route(self, source: Ref) -> Ref:
        """Continue from an earlier point (Darknet ``[route]`` with one layer; nothing in Keras)."""

    def concat(self, name: str, sources: Sequence[Ref]) -> Ref:
        """Channel concatenation (Darknet ``[route]`` with several layers)."""

    def upsample(self, name: str) -> Ref:
        """2x nearest-neighbour upsampling."""

    def maxpool(self, name: str, size: int, stride: int) -> Ref:
        """Max pooling with Darknet's padding (TF ``same``)."""

    def predict(self, name: str, filters: int) -> Ref:
        """A linear 1x1 convolution with bias, no batch norm: one prediction of an anchor-free
        head (``name`` ends in ``_pred``)."""

    def join_output(self, stride: int, sources: Sequence[Ref]) -> Ref:
        """The body output of ``stride`` (``output_s<stride>``) as the channel concatenation of
        ``sources``: an anchor-free head's distance and class predictions (Darknet has no such
        output)."""


def darknet53(net: Net) -> Dict[str, Ref]:
    """Darknet-53 (52 convolutions, 23 shortcuts); returns the taps ``{'c3', 'c4', 'c5'}``."""
    p = BACKBONE_PREFIX
    net.conv(f"{p}stem", 32, 3)
    taps: Dict[str, Ref] = {}
    for stage, filters, blocks in DARKNET53_STAGES:
        x = net.conv(f"{p}{stage}_down", filters, 3, stride=2)
        for j in range(1, blocks + 1):
            net.conv(f"{p}{stage}_b{j}_conv1", filters // 2, 1)
            net.conv(f"{p}{stage}_b{j}_conv2", filters, 3)
            x = net.shortcut(f"{p}{stage}_b{j}_add", x)
        if stage in DARKNET53_TAPS:
            taps[DARKNET53_TAPS[stage]] = net.tap(f"{p}{DARKNET53_TAPS[stage]}")
    return taps


def _spp(net: Net, name: str, filters: int) -> Ref:
    """Spatial pyramid pooling (yolov3-spp): max pools 5, 9, 13 at stride 1 of the current point,
    concatenated as ``[pool13, pool9, pool5, input]`` (Darknet's route order), then a 1x1 conv."""
    x = net.current
    pool5 = net.maxpool(f"{name}_pool5", 5, 1)
    net.route(x)
    pool9 = net.maxpool(f"{name}_pool9", 9, 1)
    net.route(x)
    pool13 = net.maxpool(f"{name}_pool13", 13, 1)
    net.concat(f"{name}_concat", [pool13, pool9, pool5, x])
    return net.conv(f"{name}_reduce", filters, 1)


def _yolov3_heads(net: Net, taps: Dict[str, Ref], out_filters: int, spp: bool) -> None:
    """Three heads (strides 32, 16, 8): five alternating 1x1/3x3 convs (SPP after the third one of
    the stride-32 head), a 3x3 conv and the output; the fifth conv feeds the next head's 1x1 conv,
    2x upsampling and concatenation with the backbone tap."""
    skips = {16: taps["c4"], 8: taps["c3"]}
    branch = taps["c5"]
    for stride, filters in ((32, 512), (16, 256), (8, 128)):
        name = f"head_s{stride}"
        if stride in skips:
            net.route(branch)
            net.conv(f"{name}_reduce", filters, 1)
            up = net.upsample(f"{name}_upsample")
            net.concat(f"{name}_concat", [up, skips[stride]])
        net.conv(f"{name}_conv1", filters, 1)
        net.conv(f"{name}_conv2", filters * 2, 3)
        net.conv(f"{name}_conv3", filters, 1)
        if spp and stride == 32:
            _spp(net, f"{name}_spp", filters)
        net.conv(f"{name}_conv4", filters * 2, 3)
        branch = net.conv(f"{name}_conv5", filters, 1)
        net.conv(f"{name}_conv6", filters * 2, 3)
        net.output(stride, out_filters)


def yolov3(net: Net, out_filters: int) -> None:
    """YOLOv3: Darknet-53 and three heads (Darknet's yolov3.cfg)."""
    _yolov3_heads(net, darknet53(net), out_filters, spp=False)


def yolov3_spp(net: Net, out_filters: int) -> None:
    """YOLOv3-SPP: YOLOv3 with spatial pyramid pooling in the stride-32 head (yolov3-spp.cfg)."""
    _yolov3_heads(net, darknet53(net), out_filters, spp=True)


def tiny_yolov3(net: Net, out_filters: int) -> None:
    """Tiny YOLOv3: seven 3x3 convs with max pooling, two heads (Darknet's yolov3-tiny.cfg)."""
    _tiny_yolov3(net, out_filters, stride8=False)


def tiny_yolov3_stride8(net: Net, out_filters: int) -> None:
    """Tiny YOLOv3 with a third output at stride 8, as YOLOv3's third head is made: the stride-16
    head's feature reduced (``head_s8_reduce``), upsampled and joined with the backbone's stride-8
    feature (``backbone_c3``), then a 3x3 conv (``head_s8_conv1``). Every layer of
    :func:`tiny_yolov3` keeps its name and shape, so tiny's weights load into all of them.
    (Objects smaller than a stride-16 cell have no cell centre inside them at strides 16 and 32.)"""
    _tiny_yolov3(net, out_filters, stride8=True)


def _tiny_yolov3(net: Net, out_filters: int, stride8: bool) -> None:
    p = BACKBONE_PREFIX
    for i, filters in enumerate([16, 32, 64, 128]):
        net.conv(f"{p}conv{i}", filters, 3)
        if stride8 and i == 3:
            c3 = net.tap(f"{p}c3")
        net.maxpool(f"{p}pool{i}", 2, 2)
    net.conv(f"{p}conv4", 256, 3)
    c4 = net.tap(f"{p}c4")
    net.maxpool(f"{p}pool4", 2, 2)
    net.conv(f"{p}conv5", 512, 3)
    net.maxpool(f"{p}pool5", 2, 1)  # Darknet's size-2 stride-1 maxpool pads bottom/right: TF "same"
    net.conv(f"{p}conv6", 1024, 3)
    net.tap(f"{p}c5")
    branch = net.conv("head_s32_conv1", 256, 1)
    net.conv("head_s32_conv2", 512, 3)
    net.output(32, out_filters)
    net.route(branch)
    net.conv("head_s16_reduce", 128, 1)
    up = net.upsample("head_s16_upsample")
    net.concat("head_s16_concat", [up, c4])
    feature16 = net.conv("head_s16_conv1", 256, 3)
    net.output(16, out_filters)
    if stride8:
        net.route(feature16)
        net.conv("head_s8_reduce", 64, 1)
        up = net.upsample("head_s8_upsample")
        net.concat("head_s8_concat", [up, c3])
        net.conv("head_s8_conv1", 128, 3)
        net.output(8, out_filters)


def darknet53_backbone(net: Net, out_filters: int = 0) -> None:
    """The Darknet-53 backbone alone (darknet53.cfg): a Darknet layout whose weights load into the
    ``backbone_*`` layers of the bodies built on Darknet-53."""
    darknet53(net)


class _DecoupledOutputs:
    """A :class:`Net` that forwards every operation to ``net`` but writes each output convolution
    as a decoupled anchor-free head on the current point (see :func:`anchor_free`)."""

    def __init__(self, net: Net, reg_max: int, box_width: int, class_width: int):
        self._net, self.reg_max = net, reg_max
        self.box_width, self.class_width = box_width, class_width

    def __getattr__(self, name: str):
        return getattr(self._net, name)

    @property
    def current(self) -> Ref:
        return self._net.current

    def output(self, stride: int, filters: int) -> Ref:
        net, name = self._net, f"head_s{stride}"
        feature = net.current
        predictions = []
        for branch, width, channels in (("box", self.box_width, 4 * self.reg_max),
                                        ("cls", self.class_width, filters - 4 * self.reg_max)):
            net.route(feature)
            net.conv(f"{name}_{branch}1", width, 3)
            net.conv(f"{name}_{branch}2", width, 3)
            predictions.append(net.predict(f"{name}_{branch}{PREDICTION_SUFFIX}", channels))
        return net.join_output(stride, predictions)


def anchor_free(describe: Describe, reg_max: int, box_width: int = 64,
                class_width: int = 256) -> Describe:
    """The anchor-free variant of architecture ``describe``: the same network, each output
    convolution replaced by a decoupled head on the point it read. Per output of stride ``s``:
    ``head_s<s>_box1``, ``_box2`` (3x3 blocks of ``box_width``) and ``head_s<s>_box_pred``
    (``4 * reg_max`` distance logits), ``head_s<s>_cls1``, ``_cls2`` (``class_width``) and
    ``head_s<s>_cls_pred`` (the class logits: ``out_filters - 4 * reg_max``), joined as
    ``output_s<s>``. The default widths are YOLOv8's rule (``max(16, c / 4, 4 * reg_max)`` and
    ``max(c, classes)`` for ``c`` = 256, the channels of the finest feature the heads read)."""
    def describe_anchor_free(net: Net, out_filters: int) -> None:
        describe(_DecoupledOutputs(net, reg_max, box_width, class_width), out_filters)
    describe_anchor_free.__name__ = f"{describe.__name__}_anchor_free"
    describe_anchor_free.__doc__ = (f"{(describe.__doc__ or '').splitlines()[0]} With an "
                                    f"anchor-free decoupled head (reg_max {reg_max}).")
    return describe_anchor_free
