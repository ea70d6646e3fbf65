"""yolo3.data.device_cache: the one buffer of decoded images the device keeps (``--cache device``):
its layout (streams one after another, each image once), its pixels (the RAM cache's, bit for
bit, EXIF orientation applied), an image it does not hold named."""
from __future__ import annotations

import numpy as np
import pytest
from PIL import Image

from yolo3.core.errors import AnnotationError
from yolo3.data.annotations import Record
from yolo3.data.device_cache import DeviceLayout
from yolo3.data.image_cache import DecodedImages, cached_hw


@pytest.fixture
def records(tmp_path):
    """Four images: three PNGs of noise and a JPEG stored 40 high, 70 wide, displayed turned
    (EXIF orientation 6: 70 high, 40 wide)."""
    rng = np.random.default_rng(0)
    out = []
    for i, (h, w) in enumerate([(60, 80), (200, 120), (90, 90)]):
        path = tmp_path / f"{i}.png"
        Image.fromarray(rng.integers(0, 256, (h, w, 3), dtype=np.uint8)).save(path)
        out.append(Record(str(path), np.zeros((0, 5), np.float32)))
    path = tmp_path / "turned.jpg"
    exif = Image.Exif()
    exif[0x0112] = 6
    Image.fromarray(rng.integers(0, 256, (40, 70, 3), dtype=np.uint8)).save(path, exif=exif)
    out.append(Record(str(path), np.zeros((0, 5), np.float32)))
    return out


def _ram(records, longest):
    paths = [r.path for r in records]
    hws = [(60, 80), (200, 120), (90, 90), (70, 40)][:len(records)]
    orientations = [1, 1, 1, 6][:len(records)]
    return DecodedImages(paths, orientations, hws, "ram", longest=longest)


def test_the_streams_lie_one_after_another_each_image_once(records):
    training, validation = records[:3] + [records[0]], [records[3], records[1]]
    layout = DeviceLayout.of([(training, 100), (validation, None)])
    sizes = [60 * 80, 100 * 60, 90 * 90, 70 * 40, 200 * 120]  # record 1 kept at 100 and 200
    assert layout.starts == tuple(np.cumsum([0] + sizes[:-1]))
    assert layout.pixels == sum(sizes) and layout.nbytes == 3 * sum(sizes) and len(layout) == 5
    starts = layout.starts_of([r.path for r in training], [(60, 80), (100, 60), (90, 90),
                                                           (60, 80)])
    assert starts.tolist() == [0, 4800, 10800, 0]  # the repeated record reads the same pixels
    assert layout.starts_of([records[1].path], [(200, 120)]).tolist() == [layout.starts[4]]
    with pytest.raises(KeyError, match=r"0.png at 30x40 is not among"):
        layout.starts_of([records[0].path], [(30, 40)])
    assert DeviceLayout.of([([], 100)]).pixels == 0


@pytest.mark.parametrize("workers", [1, 3])
def test_the_buffer_holds_the_ram_caches_pixels(records, workers):
    """Each image decoded once (EXIF orientation applied), area-resized to its kept size: what
    ``--cache ram`` gives, bit for bit, at the layout's place."""
    layout = DeviceLayout.of([(records, 100)])
    buffer = layout.fill(workers=workers, progress=workers > 1)
    assert buffer.dtype == np.uint8 and buffer.shape == (layout.pixels, 3)
    ram = _ram(records, 100)
    for i, ((path, h, w), start) in enumerate(zip(layout.keys, layout.starts)):
        want = ram.get(i)
        assert want.shape[:2] == (h, w) == cached_hw(ram.image_hws[i], 100)
        np.testing.assert_array_equal(buffer[start:start + h * w].reshape(h, w, 3), want)
    assert layout.keys[3][1:] == (70, 40)  # displayed turned


def test_an_image_that_does_not_decode_is_named(records, tmp_path):
    bad = tmp_path / "bad.png"
    bad.write_bytes(b"not an image")
    layout = DeviceLayout(((str(bad), 4, 4),), (1,), (0,), 16)
    with pytest.raises(AnnotationError, match="bad.png: cannot read image"):
        layout.fill(workers=1)


def test_a_fill_stopped_by_a_failure_or_ctrl_c_decodes_no_more(records, monkeypatch):
    """The first image's failure (here a Ctrl-C) ends the fill: the images not yet begun are
    never decoded, and the interrupt reaches the caller."""
    from yolo3.data import device_cache
    calls = []

    def decode(path, orientation, hw):
        calls.append(path)
        raise KeyboardInterrupt

    monkeypatch.setattr(device_cache, "decode_at", decode)
    layout = DeviceLayout.of([(records, None)])
    with pytest.raises(KeyboardInterrupt):
        layout.fill(workers=1)
    assert len(calls) == 1
