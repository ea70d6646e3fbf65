"""yolo3.data.verify: every image decoded once with the training pipeline's own decoder, failures
named per file, files that decoded remembered until they change."""
from __future__ import annotations

import numpy as np
import pytest
from PIL import Image

from yolo3.core.errors import ArgumentError
from yolo3.data import verify


@pytest.fixture(autouse=True)
def own_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("YOLO3_CACHE_DIR", str(tmp_path / "cache"))


def _png(path, size=8, value=0):
    Image.fromarray(np.full((size, size, 3), value, np.uint8)).save(path)
    return path


def test_bad_files_are_named_and_good_ones_cached(tmp_path, monkeypatch):
    good, bad = _png(tmp_path / "good.png"), tmp_path / "bad.jpg"
    Image.fromarray(np.zeros((64, 64, 3), np.uint8)).save(bad)
    bad.write_bytes(bad.read_bytes()[:200])  # a truncated JPEG: its header still reads
    failures = verify.verify_images([good, bad, good], progress=False)
    assert [f.path for f in failures] == [str(bad)] and "cannot decode" in str(failures[0])
    assert verify.unchecked([good, bad]) == [str(bad)]
    calls = []
    real = verify._decode
    monkeypatch.setattr(verify, "_decode", lambda p: calls.append(p) or real(p))
    assert verify.verify_images([good], progress=False) == [] and calls == []  # cached
    _png(good, size=9, value=1)  # changed: decoded again
    assert verify.verify_images([good], progress=False) == [] and calls == [str(good)]
    assert verify.verify_images([good], progress=False, use_cache=False) == []
    assert calls == [str(good)] * 2


def test_formats_the_pipeline_cannot_read_and_missing_files(tmp_path):
    tiff = tmp_path / "scan.tif"
    Image.fromarray(np.zeros((8, 8, 3), np.uint8)).save(tiff)
    failures = verify.verify_images([tiff, tmp_path / "gone.jpg"], progress=False)
    reasons = {f.path: str(f) for f in failures}
    assert f"not a format the training pipeline decodes ({verify.PIPELINE_FORMATS})" \
        in reasons[str(tiff)]
    assert "image file not found" in reasons[str(tmp_path / "gone.jpg")]


def test_check_decodable_lists_ten_and_counts_the_rest(tmp_path):
    good = _png(tmp_path / "ok.png")
    bad = []
    for i in range(12):
        path = tmp_path / f"bad{i:02d}.png"
        path.write_bytes(b"\x89PNG\r\n\x1a\n" + b"\0" * 20)
        bad.append(path)
    verify.check_decodable([good], progress=False)  # all decode: no error
    with pytest.raises(ArgumentError) as e:
        verify.check_decodable([good, *bad], progress=False)
    message = str(e.value)
    assert message.startswith("12 images cannot be used for training (yolo3 check lists them all)")
    assert sum(f"bad{i:02d}.png" in message for i in range(12)) == 10
    assert message.endswith("... and 2 more")
