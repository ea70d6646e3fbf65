"""Synthetic shapes dataset: exact boxes, recognisable shapes, determinism, splits."""
from __future__ import annotations

import numpy as np
from PIL import Image

from yolo3.data.annotations import load_annotations
from yolo3.data.class_names import read_classes
from yolo3.data.synthetic import make_synthetic_dataset, split_paths


def _saturated_mask(img: np.ndarray) -> np.ndarray:
    """Pixels with HSV saturation > 0.6: the shapes (background texture stays below ~0.35)."""
    x = img.astype(np.float64)
    mx, mn = x.max(-1), x.min(-1)
    return (mx - mn) > 0.6 * np.maximum(mx, 1)


def test_single_object_boxes_are_exact_pixel_extents(tmp_path):
    ann, cls = make_synthetic_dataset(str(tmp_path), 12, (96, 128), seed=3, max_objects=1)
    recs = load_annotations(ann, read_classes(cls))
    assert len(recs) == 12
    for r in recs:
        img = np.asarray(Image.open(r.path).convert("RGB"))
        assert img.shape == (96, 128, 3) and len(r.boxes) == 1
        ys, xs = np.nonzero(_saturated_mask(img))
        np.testing.assert_array_equal(r.boxes[0, :4], [xs.min(), ys.min(), xs.max() + 1, ys.max() + 1])


def test_counts_sizes_overlap_and_classes(tmp_path):
    ann, cls = make_synthetic_dataset(str(tmp_path), 40, (64, 64), seed=1)
    assert read_classes(cls) == ["circle", "square", "triangle"]
    recs = load_annotations(ann, read_classes(cls))
    counts = [len(r.boxes) for r in recs]
    assert min(counts) >= 1 and max(counts) <= 4 and len(set(counts)) > 1
    allb = np.concatenate([r.boxes for r in recs])
    assert set(allb[:, 4].astype(int)) == {0, 1, 2}
    wh = allb[:, 2:4] - allb[:, :2]
    assert wh.min() >= 8 and wh.max() <= 32  # 1/8 .. 1/2 of 64
    for r in recs:  # limited overlap: intersection <= 15% of the smaller box
        b = r.boxes
        for i in range(len(b)):
            for j in range(i + 1, len(b)):
                iw = min(b[i, 2], b[j, 2]) - max(b[i, 0], b[j, 0])
                ih = min(b[i, 3], b[j, 3]) - max(b[i, 1], b[j, 1])
                if iw > 0 and ih > 0:
                    small = min(np.prod(b[i, 2:4] - b[i, :2]), np.prod(b[j, 2:4] - b[j, :2]))
                    assert iw * ih <= 0.15 * small + 1e-6


def test_deterministic_by_seed_and_split(tmp_path):
    a1, _ = make_synthetic_dataset(str(tmp_path / "a"), 5, (64, 64), seed=7, val_fraction=0.4)
    a2, _ = make_synthetic_dataset(str(tmp_path / "b"), 5, (64, 64), seed=7)
    a3, _ = make_synthetic_dataset(str(tmp_path / "c"), 5, (64, 64), seed=8)
    r1, r2, r3 = (load_annotations(a) for a in (a1, a2, a3))
    for x, y in zip(r1, r2):
        np.testing.assert_array_equal(x.boxes, y.boxes)
        np.testing.assert_array_equal(np.asarray(Image.open(x.path)), np.asarray(Image.open(y.path)))
    assert not all(np.array_equal(np.asarray(Image.open(x.path)), np.asarray(Image.open(y.path)))
                   for x, y in zip(r1, r3))
    train, val = split_paths(a1)
    tr, va = load_annotations(train), load_annotations(val)
    assert len(tr) == 3 and len(va) == 2
    assert [r.path for r in tr + va] == [r.path for r in r1]
