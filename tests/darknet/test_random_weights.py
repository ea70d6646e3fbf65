"""yolo3.darknet.random_weights: random Darknet weights of exactly the real file's layout, repeatable
from a seed, whose activations stay O(1) through the whole network (OpenCV's importer runs them)."""
from __future__ import annotations

import numpy as np
import pytest
from darknet_helpers import opencv_forward, random_images

from yolo3.darknet.cfg import parse_cfg
from yolo3.darknet.random_weights import write_random_weights


@pytest.fixture
def tiny_cfg(darknet_cfg_dir):
    return darknet_cfg_dir / "yolov3-tiny.cfg"


def test_the_file_has_the_real_weights_layout(tiny_cfg, darknet_cfg_dir, tmp_path):
    """Darknet's own yolov3-tiny.weights (header 0.2: a 64-bit 'seen') is the size reference."""
    header = write_random_weights(tiny_cfg, tmp_path / "r.weights", seed=1, major=0, minor=2,
                                  seen=32013312)
    assert (tmp_path / "r.weights").stat().st_size == (darknet_cfg_dir / "yolov3-tiny.weights").stat().st_size
    assert header.as_list() == [0, 2, 0, 32013312]
    raw = (tmp_path / "r.weights").read_bytes()
    assert np.frombuffer(raw[:12], "<i4").tolist() == [0, 2, 0]
    assert int(np.frombuffer(raw[12:20], "<i8")[0]) == 32013312
    write_random_weights(tiny_cfg, tmp_path / "old.weights", minor=1)  # 32-bit 'seen': 4 bytes less
    assert (tmp_path / "old.weights").stat().st_size == len(raw) - 4


def test_weights_follow_the_seed(tiny_cfg, tmp_path):
    write_random_weights(tiny_cfg, tmp_path / "a.weights", seed=5)
    write_random_weights(tiny_cfg, tmp_path / "b.weights", seed=5)
    write_random_weights(tiny_cfg, tmp_path / "c.weights", seed=6)
    a, b, c = ((tmp_path / f"{n}.weights").read_bytes() for n in "abc")
    assert a == b and a != c and len(a) == len(c)


def test_outputs_are_bounded_and_depend_on_the_input(tiny_cfg, tmp_path):
    write_random_weights(tiny_cfg, tmp_path / "r.weights", seed=2)
    rng = np.random.default_rng(0)
    images = random_images(rng, 2, 128, 160)
    outputs = opencv_forward(parse_cfg(tiny_cfg), tiny_cfg, tmp_path / "r.weights", images)
    assert [o.shape[1:3] for o in outputs] == [(4, 5), (8, 10)]
    for out in outputs:
        assert np.isfinite(out).all()
        assert 0.05 < out.std() < 20, out.std()  # O(1): neither vanished nor exploded
        assert np.abs(out[0] - out[1]).mean() > 0.01 * out.std()  # the two images differ
