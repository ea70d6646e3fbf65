"""yolo3.data.images: loading as displayed RGB uint8, header probes (one file, many, cached), EXIF
orientation, and which files the pipeline decodes. Loading against the pipeline's decoder for
rotated, grey, RGBA and palette images: test_pipeline.py."""
from __future__ import annotations

import numpy as np
import pytest
from PIL import Image

from yolo3.core.errors import AnnotationError
from yolo3.data import images as images_module
from yolo3.data.images import (
    exif_orientation,
    is_image_file,
    load_image,
    probe_image,
    probe_images,
)


@pytest.fixture(autouse=True)
def own_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("YOLO3_CACHE_DIR", str(tmp_path / "cache"))


def test_sixteen_bit_png_decodes_alike_in_training_and_inference(tmp_path):
    import tensorflow as tf

    from yolo3.data.images import load_image
    twelve_bit = (np.arange(48 * 64).reshape(48, 64) * 7 % 4096).astype(np.uint16)
    path = tmp_path / "g16.png"
    Image.fromarray(twelve_bit).save(path)
    pipeline = tf.io.decode_image(tf.io.read_file(str(path)), channels=3, expand_animations=False,
                                  dtype=tf.uint8).numpy()
    np.testing.assert_array_equal(load_image(path), pipeline)
    np.testing.assert_array_equal(load_image(path)[..., 0], (twelve_bit >> 8).astype(np.uint8))


def test_missing_and_unreadable_files_are_named(tmp_path):
    (tmp_path / "text.jpg").write_text("not an image")
    for path, reason in ((tmp_path / "gone.jpg", "image file not found"),
                         (tmp_path / "text.jpg", "cannot read image")):
        for read in (load_image, probe_image):
            with pytest.raises(AnnotationError, match=reason) as e:
                read(path)
            assert str(path) in str(e.value)


def test_probe_reads_the_displayed_size_and_orientation(tmp_path):
    path = tmp_path / "r.jpg"
    exif = Image.Exif()
    exif[images_module.EXIF_ORIENTATION_TAG] = 6  # turned a quarter: width and height swap
    Image.fromarray(np.zeros((30, 50, 3), np.uint8)).save(path, exif=exif.tobytes())
    assert probe_image(path) == ((50, 30), 6) and exif_orientation(path) == 6
    exif[images_module.EXIF_ORIENTATION_TAG] = 42  # out of range: ignored
    Image.fromarray(np.zeros((30, 50, 3), np.uint8)).save(path, exif=exif.tobytes())
    assert probe_image(path) == ((30, 50), 1)
    Image.fromarray(np.zeros((7, 9, 3), np.uint8)).save(tmp_path / "plain.bmp")
    assert probe_image(tmp_path / "plain.bmp") == ((7, 9), 1)


def test_many_probes_keep_order_report_errors_and_are_cached(tmp_path, monkeypatch):
    paths = []
    for i in range(20):  # 16 or more: the threaded and cached path
        path = tmp_path / f"{i:02d}.png"
        Image.fromarray(np.zeros((10 + i, 20, 3), np.uint8)).save(path)
        paths.append(path)
    broken = tmp_path / "broken.png"
    broken.write_bytes(b"nope")
    got = probe_images([*paths, broken], errors=True)
    assert [g[0] for g in got[:20]] == [(10 + i, 20) for i in range(20)]
    assert isinstance(got[20], AnnotationError) and "broken.png" in str(got[20])
    with pytest.raises(AnnotationError, match="broken.png"):
        probe_images([*paths, broken])
    monkeypatch.setattr(images_module, "probe_image",
                        lambda p: pytest.fail(f"{p} probed again, not read from the cache"))
    assert [g[0] for g in probe_images(paths)] == [(10 + i, 20) for i in range(20)]


@pytest.mark.parametrize("name, decoded", [("a.JPG", True), ("b.jpeg", True), ("c.png", True),
                                           ("d.bmp", True), ("e.gif", True), ("f.tif", False),
                                           ("g.webp", False), ("h.txt", False), ("jpg", False)])
def test_files_the_pipeline_decodes(name, decoded):
    assert is_image_file(name) is decoded
