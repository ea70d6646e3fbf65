"""yolo3.export.calibration: the images int8 calibration and export checks run on - from an
annotation file or a folder, a seeded sample, letterboxed with the one letterbox."""
from __future__ import annotations

import numpy as np
import pytest
from PIL import Image

from yolo3.core.errors import AnnotationError, ArgumentError, SettingError
from yolo3.export.calibration import (
    calibration_images,
    calibration_paths,
    sample_images,
)
from yolo3.ops.letterbox import letterbox_np


@pytest.fixture
def folder(tmp_path):
    (tmp_path / "imgs" / "sub").mkdir(parents=True)
    for i in range(6):
        where = tmp_path / "imgs" / ("sub" if i % 2 else "") / f"{i}.png"
        Image.fromarray(np.full((20 + i, 30, 3), 10 * i, np.uint8)).save(where)
    (tmp_path / "imgs" / "notes.txt").write_text("not an image")
    return tmp_path / "imgs"


def test_a_folder_gives_its_images_recursively_and_a_seeded_sample(folder):
    paths = calibration_paths(folder, 10)
    assert len(paths) == 6 and all(p.endswith(".png") for p in paths)
    three = calibration_paths(folder, 3, seed=1)
    assert len(three) == 3 and set(three) <= set(paths)
    assert calibration_paths(folder, 3, seed=1) == three
    assert any(calibration_paths(folder, 3, seed=s) != three for s in range(2, 8))


def test_an_annotation_file_gives_its_images_once(folder, tmp_path):
    a, b = folder / "0.png", folder / "sub" / "1.png"
    (tmp_path / "train.txt").write_text(f"{a} 1,1,5,5,0\n{b} 2,2,9,9,0\n{a} 3,3,8,8,0\n")
    assert calibration_paths(tmp_path / "train.txt", 10) == sorted([str(a), str(b)])


def test_bad_sources_and_counts_are_named(folder, tmp_path):
    with pytest.raises(ArgumentError, match="calibration source not found"):
        calibration_paths(tmp_path / "nothing", 4)
    (tmp_path / "empty").mkdir()
    with pytest.raises(ArgumentError, match="folder has no images"):
        calibration_paths(tmp_path / "empty", 4)
    (tmp_path / "none.txt").write_text("")
    with pytest.raises(AnnotationError, match=r"none\.txt: empty annotation file"):
        calibration_paths(tmp_path / "none.txt", 4)
    with pytest.raises(SettingError, match="calibration_images must be >= 1"):
        calibration_paths(folder, 0)


def test_images_are_letterboxed_to_the_input(folder):
    paths = calibration_paths(folder, 2)
    images = calibration_images(paths, (32, 48))
    assert [im.shape for im in images] == [(32, 48, 3)] * 2
    np.testing.assert_array_equal(images[0], letterbox_np(np.asarray(Image.open(paths[0])), (32, 48)))
    samples = sample_images((64, 96), count=5, seed=2)
    assert len(samples) == 5 and all(s.shape == (64, 96, 3) and s.dtype == np.float32 for s in samples)
    assert all(0 <= s.min() and s.max() <= 1 for s in samples)
    assert not np.array_equal(samples[0], samples[1])
