"""Darknet cfg parser and weights file format (no Keras, no OpenCV: fast)."""
from __future__ import annotations

import numpy as np
import pytest
from darknet_helpers import spp_cfg_text

from yolo3.core.errors import DarknetError
from yolo3.darknet.cfg import (
    MaxpoolSpec,
    RouteSpec,
    equivalent,
    format_cfg,
    parse_cfg,
    parse_cfg_text,
)
from yolo3.darknet.random_weights import write_random_weights
from yolo3.darknet.weights import Header, expected_size, read_weights, write_weights

NET = "[net]\nwidth=64\nheight=64\nchannels=3\n"
CONV = "[convolutional]\nbatch_normalize=1\nfilters={f}\nsize=3\nstride={s}\npad=1\nactivation=leaky\n"


def test_yolov3_structure(darknet_cfg_dir):
    cfg = parse_cfg(darknet_cfg_dir / "yolov3.cfg")
    assert len(cfg.layers) == 107 and len(cfg.convs()) == 75
    assert [l.index for l in cfg.yolo_layers()] == [82, 94, 106]
    assert cfg.output_indices() == [81, 93, 105]
    assert cfg.layers[86].spec == RouteSpec(sources=[85, 61])
    assert cfg.layers[83].spec == RouteSpec(sources=[79])
    assert [cfg.layers[i].stride for i in cfg.output_indices()] == [32, 16, 8]
    anchors, masks, classes = cfg.yolo_info()
    assert masks == [[6, 7, 8], [3, 4, 5], [0, 1, 2]] and classes == 80
    assert anchors.shape == (9, 2) and tuple(anchors[0]) == (10, 13)


def test_tiny_masks_read_from_cfg(darknet_cfg_dir):
    cfg = parse_cfg(darknet_cfg_dir / "yolov3-tiny.cfg")
    assert cfg.yolo_info()[1] == [[3, 4, 5], [1, 2, 3]]
    assert cfg.output_indices() == [15, 22]
    assert cfg.layers[11].spec == MaxpoolSpec(size=2, stride=1)


def test_backbone_only(darknet_cfg_dir):
    cfg = parse_cfg(darknet_cfg_dir / "darknet53.cfg")
    assert len(cfg.convs()) == 52 and not cfg.yolo_layers()
    assert cfg.output_indices() == [74] and cfg.layers[74].channels == 1024
    assert cfg.yolo_info() == (None, [], None)


def test_spp(darknet_cfg_dir):
    cfg = parse_cfg_text(spp_cfg_text((darknet_cfg_dir / "yolov3.cfg").read_text()))
    pools = [l.spec for l in cfg.layers if l.kind == "maxpool"]
    assert [(p.size, p.stride) for p in pools] == [(5, 1), (9, 1), (13, 1)]
    route = cfg.layers[83].spec
    assert route == RouteSpec(sources=[82, 80, 78, 77]) and cfg.layers[83].channels == 2048
    assert len(cfg.layers) == 114
    assert [l.index for l in cfg.yolo_layers()] == [89, 101, 113]


@pytest.mark.parametrize("name", ["yolov3.cfg", "yolov3-tiny.cfg", "darknet53.cfg"])
def test_format_cfg_round_trip(darknet_cfg_dir, name):
    cfg = parse_cfg(darknet_cfg_dir / name)
    again = parse_cfg_text(format_cfg(cfg.net, cfg.layers))
    assert equivalent(cfg, again)
    changed = parse_cfg_text(format_cfg(cfg.net, cfg.layers).replace("size=3", "size=1", 1))
    assert not equivalent(cfg, changed)


@pytest.mark.parametrize("text, line, words", [
    (NET + CONV.format(f=8, s=1) + "\n[dropout]\nprobability=.5\n", 13, ["[dropout]", "not supported"]),
    (NET + CONV.format(f=8, s=1) + "[route]\nlayers=-5\n", 13, ["layers", "does not exist"]),
    (NET + CONV.format(f=8, s=1) + "[route]\nlayers=-1, 7\n", 13, ["absolute 7"]),
    (NET + CONV.format(f=8, s=1) + "[route]\nlayers=-1,-1,-1,-1,-1\n", 13, ["1 to 4"]),
    (NET + CONV.format(f=8, s=1) + CONV.format(f=16, s=1) + "[shortcut]\nfrom=-2\n", 19,
     ["shapes differ"]),
    (NET + CONV.format(f=8, s=1).replace("leaky", "swishy"), 11, ["swishy"]),
    (NET + CONV.format(f=8, s=1).replace("filters=8", "filters=eight"), 7, ["not an integer"]),
    (NET + CONV.format(f=8, s=1) + "[maxpool]\nsize=3\nstride=2\n", 14, ["not supported"]),
    (NET + CONV.format(f=20, s=1) + "[yolo]\nmask=0,1\nanchors=1,2,3,4\nclasses=80\n", 12,
     ["20 channels", "2 * (80 + 5)"]),
    ("[convolutional]\nfilters=3\n", 1, ["[net]"]),
    ("filters=3\n[net]\n", 1, ["before the first"]),
    (NET + "[convolutional\n", 5, ["malformed"]),
])
def test_bad_cfg_is_a_clear_error(tmp_path, text, line, words):
    path = tmp_path / "bad.cfg"
    path.write_text(text)
    with pytest.raises(DarknetError) as info:
        parse_cfg(path)
    msg = str(info.value)
    assert msg.startswith(f"{path}:{line}"), msg
    for w in words:
        assert w in msg, msg


def test_missing_cfg_file(tmp_path):
    with pytest.raises(DarknetError, match="cannot read cfg"):
        parse_cfg(tmp_path / "missing.cfg")


TINY_NET = NET + CONV.format(f=4, s=2) + CONV.format(f=6, s=1).replace("batch_normalize=1\n", "")


@pytest.mark.parametrize("major, minor, header_bytes", [(0, 2, 20), (0, 1, 16), (1, 0, 20)])
def test_weights_header_and_blocks(tmp_path, major, minor, header_bytes):
    cfg_path = tmp_path / "t.cfg"
    cfg_path.write_text(TINY_NET)
    cfg = parse_cfg(cfg_path)
    w = tmp_path / "t.weights"
    write_random_weights(cfg_path, w, seed=3, major=major, minor=minor, revision=7, seen=123)
    floats = 4 * 4 + 4 * 3 * 9 + 6 + 6 * 4 * 9
    assert w.stat().st_size == header_bytes + 4 * floats == expected_size(cfg, Header(major, minor))
    raw = np.fromfile(w, dtype="<f4", offset=header_bytes)
    header, blocks = read_weights(w, cfg)
    assert header.as_list() == [major, minor, 7, 123]
    b0, b1 = blocks[0], blocks[1]
    np.testing.assert_array_equal(b0.bias, raw[0:4])  # beta first
    np.testing.assert_array_equal(b0.gamma, raw[4:8])
    np.testing.assert_array_equal(b0.variance, raw[12:16])
    np.testing.assert_array_equal(b0.kernel, raw[16:16 + 108].reshape(4, 3, 3, 3))
    assert b1.gamma is None and b1.kernel.shape == (6, 4, 3, 3)
    np.testing.assert_array_equal(b1.bias, raw[124:130])
    copy = tmp_path / "copy.weights"
    write_weights(copy, header, [b0, b1])
    assert copy.read_bytes() == w.read_bytes()


def test_weights_size_errors(tmp_path):
    cfg_path = tmp_path / "t.cfg"
    cfg_path.write_text(TINY_NET)
    cfg = parse_cfg(cfg_path)
    w = tmp_path / "t.weights"
    write_random_weights(cfg_path, w)
    data = w.read_bytes()
    short = tmp_path / "short.weights"
    short.write_bytes(data[:-4])
    with pytest.raises(DarknetError, match=r"ends inside \[convolutional\] layer 1 \(cfg line 12\)"):
        read_weights(short, cfg)
    short.write_bytes(data[:200])
    with pytest.raises(DarknetError, match=r"ends inside \[convolutional\] layer 0"):
        read_weights(short, cfg)
    short.write_bytes(data[:10])
    with pytest.raises(DarknetError, match="too short for a header"):
        read_weights(short, cfg)
    long = tmp_path / "long.weights"
    long.write_bytes(data + b"\0" * 8)
    with pytest.raises(DarknetError, match="8 bytes left over"):
        read_weights(long, cfg)
