"""yolo3.core.file_cache, and the caches built on it: image headers (probe_images) and decoded
images (data.verify): a fact is reused only while its file keeps its size and modification time."""
from __future__ import annotations

import os

import numpy as np
from PIL import Image

from yolo3.core.file_cache import FileCache, file_stamp
from yolo3.data import images as images_module


def test_values_hold_while_the_file_is_unchanged(tmp_path, monkeypatch):
    monkeypatch.setenv("YOLO3_CACHE_DIR", str(tmp_path / "cache"))
    f = tmp_path / "a.txt"
    f.write_text("one")
    cache = FileCache("facts.json")
    assert cache.get(str(f)) is None
    cache.put(str(f), [1, 2])
    cache.save()
    again = FileCache("facts.json")
    assert again.get(str(f)) == [1, 2]
    f.write_text("other")  # size changes: the fact no longer holds
    assert again.get(str(f)) is None
    again.forget(str(f))
    again.save()
    assert FileCache("facts.json").get(str(f)) is None
    assert FileCache("facts.json", enabled=False).get(str(f)) is None
    assert file_stamp(str(tmp_path / "missing")) is None


def test_a_damaged_or_unwritable_cache_only_costs_time(tmp_path, monkeypatch):
    monkeypatch.setenv("YOLO3_CACHE_DIR", str(tmp_path / "cache"))
    (tmp_path / "cache").mkdir()
    (tmp_path / "cache" / "facts.json").write_text("{not json")
    f = tmp_path / "a.txt"
    f.write_text("x")
    cache = FileCache("facts.json")
    assert cache.get(str(f)) is None
    blocker = tmp_path / "file"
    blocker.write_text("")
    monkeypatch.setenv("YOLO3_CACHE_DIR", str(blocker / "sub"))  # cannot be made
    unwritable = FileCache("facts.json")
    unwritable.put(str(f), 1)
    unwritable.save()  # no error


def test_image_headers_are_read_once(tmp_path, monkeypatch):
    monkeypatch.setenv("YOLO3_CACHE_DIR", str(tmp_path / "cache"))
    paths = []
    for k in range(20):
        p = tmp_path / f"{k}.png"
        Image.fromarray(np.zeros((8 + k, 10, 3), np.uint8)).save(p)
        paths.append(str(p))
    calls = []
    real = images_module.probe_image
    monkeypatch.setattr(images_module, "probe_image", lambda p: calls.append(p) or real(p))
    first = images_module.probe_images(paths)
    assert len(calls) == 20 and first[3] == ((11, 10), 1)
    calls.clear()
    assert images_module.probe_images(paths) == first and calls == []
    Image.fromarray(np.zeros((5, 6, 3), np.uint8)).save(paths[3])
    os.utime(paths[3], ns=(1, 1))
    assert images_module.probe_images(paths)[3] == ((5, 6), 1) and calls == [paths[3]]
