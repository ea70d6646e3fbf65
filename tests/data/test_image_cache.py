"""The decoded-image cache: sizes known before decoding, RAM and disk giving the decoder's pixels
(area-resized where the recipe needs less), a changed image seen, a damaged entry rebuilt and
named, nothing written among the images, a RAM cache that cannot fit refused with its figures."""
from __future__ import annotations

import logging
import os

import cv2
import numpy as np
import pytest
from PIL import Image

from yolo3.core.errors import NotEnoughMemory
from yolo3.data import image_cache
from yolo3.data.image_cache import (
    DecodedImages,
    cached_hw,
    check_ram,
    entry_bytes,
    read_entry,
)
from yolo3.data.image_ops import decode_image_np


@pytest.fixture
def images(tmp_path):
    folder = tmp_path / "images"
    folder.mkdir()
    rng = np.random.default_rng(0)
    paths, hws = [], []
    for i, (h, w) in enumerate([(60, 80), (200, 120), (90, 90)]):
        path = folder / f"{i}.png"
        Image.fromarray(rng.integers(0, 256, (h, w, 3), dtype=np.uint8)).save(path)
        paths.append(str(path))
        hws.append((h, w))
    return paths, hws


def test_the_kept_size_is_the_longer_side_at_most_what_the_recipe_needs():
    assert cached_hw((480, 640), None) == (480, 640)
    assert cached_hw((480, 640), 832) == (480, 640)
    assert cached_hw((3000, 4000), 832) == (624, 832)
    assert cached_hw((4000, 3), 100) == (100, 1)


def test_ram_gives_the_decoders_pixels_once(images, monkeypatch):
    paths, hws = images
    cache = DecodedImages(paths, [1] * 3, hws, "ram", longest=100)
    assert cache.nbytes() == 60 * 80 * 3 + 100 * 60 * 3 + 90 * 90 * 3
    first = [cache.get(i) for i in range(3)]
    np.testing.assert_array_equal(first[0], decode_image_np(paths[0], 1))
    expected = cv2.resize(decode_image_np(paths[1], 1), (60, 100), interpolation=cv2.INTER_AREA)
    np.testing.assert_array_equal(first[1], expected)
    assert not first[0].flags.writeable
    monkeypatch.setattr(image_cache, "decode_image_np", lambda *a: pytest.fail("decoded again"))
    assert all(cache.get(i) is first[i] for i in range(3))


def test_none_decodes_at_every_use_and_holds_nothing(images):
    paths, hws = images
    cache = DecodedImages(paths, [1] * 3, hws, "none", longest=50)
    assert cache.nbytes() == 0 and cache.hw(1) == (200, 120)
    np.testing.assert_array_equal(cache.get(1), decode_image_np(paths[1], 1))


def test_disk_entries_live_under_the_cache_folder_and_are_read_back(images, tmp_path,
                                                                    monkeypatch):
    paths, hws = images
    before = sorted(os.listdir(os.path.dirname(paths[0])))
    folder = tmp_path / "cache"
    first = DecodedImages(paths, [1] * 3, hws, "disk", longest=100, folder=str(folder))
    pixels = [first.get(i) for i in range(3)]
    assert sorted(os.listdir(os.path.dirname(paths[0]))) == before  # nothing among the images
    assert len(list(folder.glob("*.y3img"))) == 3
    monkeypatch.setattr(image_cache, "decode_image_np", lambda *a: pytest.fail("decoded again"))
    again = DecodedImages(paths, [1] * 3, hws, "disk", longest=100, folder=str(folder))
    for i in range(3):
        np.testing.assert_array_equal(again.get(i), pixels[i])


def test_the_default_disk_folder_is_under_yolo3_cache_dir(images, tmp_path, monkeypatch):
    monkeypatch.setenv("YOLO3_CACHE_DIR", str(tmp_path / "home_cache"))
    paths, hws = images
    cache = DecodedImages(paths, [1] * 3, hws, "disk")
    cache.get(0)
    assert cache.entry_path(0).parent == tmp_path / "home_cache" / "decoded"
    assert cache.entry_path(0).is_file()


def test_a_changed_image_gets_a_new_entry(images, tmp_path):
    paths, hws = images
    cache = DecodedImages(paths, [1] * 3, hws, "disk", folder=str(tmp_path / "c"))
    old = cache.entry_path(0)
    cache.get(0)
    Image.fromarray(np.zeros((60, 80, 3), np.uint8)).save(paths[0])
    os.utime(paths[0], ns=(1, 1))  # another modification time, whatever the clock's resolution
    assert cache.entry_path(0) != old
    np.testing.assert_array_equal(cache.get(0), np.zeros((60, 80, 3), np.uint8))


@pytest.mark.parametrize("damage", ["truncated", "flipped byte", "other shape", "empty"])
def test_a_damaged_entry_is_named_decoded_again_and_rewritten(images, tmp_path, caplog, damage):
    paths, hws = images
    cache = DecodedImages(paths, [1] * 3, hws, "disk", folder=str(tmp_path / "c"))
    good = cache.get(2).copy()
    entry = cache.entry_path(2)
    data = bytearray(entry.read_bytes())
    if damage == "truncated":
        data = data[:len(data) // 2]
    elif damage == "flipped byte":
        data[-5] ^= 0xFF
    elif damage == "other shape":
        data = bytearray(entry_bytes(np.zeros((10, 10, 3), np.uint8)))
    else:
        data = bytearray()
    entry.write_bytes(bytes(data))
    with caplog.at_level(logging.WARNING, logger="yolo3.data.image_cache"):
        np.testing.assert_array_equal(cache.get(2), good)
    assert str(entry) in caplog.text and "damaged" in caplog.text and paths[2] in caplog.text
    assert cache.rebuilt == [str(entry)]
    assert read_entry(entry.read_bytes(), (90, 90)) is not None  # rewritten whole


def test_an_entry_round_trips_and_checks_its_pixels():
    image = np.arange(4 * 5 * 3, dtype=np.uint8).reshape(4, 5, 3)
    data = entry_bytes(image)
    np.testing.assert_array_equal(read_entry(data, (4, 5)), image)
    assert read_entry(data, (5, 4)) is None
    assert read_entry(data[:-1] + bytes([data[-1] ^ 1]), (4, 5)) is None
    assert read_entry(b"Y3", (4, 5)) is None


def test_a_ram_cache_larger_than_half_the_memory_is_refused_with_the_figures():
    check_ram(400, 3, available=1000)
    with pytest.raises(NotEnoughMemory) as e:
        check_ram(2_600_000_000, 1200, available=4_000_000_000)
    message = str(e.value)
    assert "1200 decoded images need 2.6 GB" in message and "4.0 GB" in message
    assert "--cache disk" in message


def test_an_unknown_kind_is_refused(images):
    paths, hws = images
    with pytest.raises(ValueError, match="cache 'gpu'"):
        DecodedImages(paths, [1] * 3, hws, "gpu")
