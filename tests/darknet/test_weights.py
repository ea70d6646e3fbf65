"""yolo3.darknet.weights: Darknet's weights layout, read from the real yolov3-tiny.weights against a
plain NumPy reading of the bytes, written back byte for byte, and every short or long file named."""
from __future__ import annotations

import numpy as np
import pytest

from yolo3.core.errors import DarknetError
from yolo3.darknet.cfg import parse_cfg
from yolo3.darknet.weights import (
    ConvWeights,
    Header,
    conv_param_count,
    expected_size,
    read_weights,
    write_weights,
)


@pytest.fixture
def tiny(darknet_cfg_dir):
    """Darknet's tiny cfg (parsed) and its real pretrained weights file."""
    return parse_cfg(darknet_cfg_dir / "yolov3-tiny.cfg"), darknet_cfg_dir / "yolov3-tiny.weights"


def test_real_weights_read_as_the_bytes_say(tiny):
    cfg, path = tiny
    header, convs = read_weights(path, cfg)
    raw = path.read_bytes()
    assert header.as_list()[:3] == np.frombuffer(raw[:12], "<i4").tolist() == [0, 2, 0]
    assert header.seen == int(np.frombuffer(raw[12:20], "<i8")[0]) and header.nbytes == 20
    floats = np.frombuffer(raw[20:], "<f4")
    # the first [convolutional]: 16 filters of 3x3 over RGB, batch-normalised
    first = convs[cfg.convs()[0].index]
    np.testing.assert_array_equal(first.bias, floats[0:16])
    np.testing.assert_array_equal(first.gamma, floats[16:32])
    np.testing.assert_array_equal(first.mean, floats[32:48])
    np.testing.assert_array_equal(first.variance, floats[48:64])
    np.testing.assert_array_equal(first.kernel, floats[64:64 + 16 * 27].reshape(16, 3, 3, 3))
    assert (first.variance > 0).all()
    assert len(convs) == len(cfg.convs()) == 13
    last = convs[cfg.convs()[-1].index]  # an output convolution: bias, no batch norm
    assert last.gamma is None and last.kernel.shape == (255, 256, 1, 1)
    assert len(raw) == expected_size(cfg, header)
    assert sum(conv_param_count(cfg, l) for l in cfg.convs()) == floats.size


def test_written_weights_are_byte_identical(tiny, tmp_path):
    cfg, path = tiny
    header, convs = read_weights(path, cfg)
    write_weights(tmp_path / "copy.weights", header, [convs[l.index] for l in cfg.convs()])
    assert (tmp_path / "copy.weights").read_bytes() == path.read_bytes()


def test_old_headers_have_a_32_bit_count():
    old, new = Header(0, 1, 0, 7), Header(0, 2, 0, 7)
    assert old.nbytes == 16 and new.nbytes == 20 and Header(1, 0).seen_is_int64
    assert old.to_bytes()[12:] == np.int32(7).tobytes()
    assert new.to_bytes()[12:] == np.int64(7).tobytes()
    block = ConvWeights(bias=np.zeros(2), kernel=np.zeros((2, 1, 1, 1)))
    assert len(block.arrays()) == 2


def test_short_and_long_files_are_named(tiny, tmp_path):
    cfg, path = tiny
    raw = path.read_bytes()
    (tmp_path / "cut.weights").write_bytes(raw[:len(raw) // 2])
    with pytest.raises(DarknetError, match=r"cut\.weights.*ends inside \[convolutional\] layer "
                                           r"\d+ \(cfg line \d+\)"):
        read_weights(tmp_path / "cut.weights", cfg)
    (tmp_path / "long.weights").write_bytes(raw + b"\0" * 8)
    with pytest.raises(DarknetError, match="8 bytes left over after the last"):
        read_weights(tmp_path / "long.weights", cfg)
    (tmp_path / "tiny.weights").write_bytes(raw[:7])
    with pytest.raises(DarknetError, match="7 bytes: too short for a header"):
        read_weights(tmp_path / "tiny.weights", cfg)
    (tmp_path / "head.weights").write_bytes(raw[:15])
    with pytest.raises(DarknetError, match="ends inside its header"):
        read_weights(tmp_path / "head.weights", cfg)
    with pytest.raises(DarknetError, match="cannot read weights file"):
        read_weights(tmp_path / "missing.weights", cfg)
