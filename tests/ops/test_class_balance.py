"""Class weights and repeat factors against plain float64 loops; the weights file."""
from __future__ import annotations

import math

import numpy as np
import pytest

from yolo3.core.errors import FileFormatError
from yolo3.ops.class_balance import (
    class_counts,
    class_weights,
    format_weights,
    read_class_weights,
    repeat_factors,
    repeated_indices,
)


def _labels(rng, images=200, shares=(0.6, 0.35, 0.05)):
    return [rng.choice(len(shares), size=int(rng.integers(0, 5)), p=shares) for _ in range(images)]


def test_counts_equal_a_plain_count(rng):
    labels = _labels(rng)
    want = [sum(int(c == k) for image in labels for c in image) for k in range(4)]
    assert class_counts(labels, 4).tolist() == want and want[3] == 0


@pytest.mark.parametrize("method", ["inverse", "sqrt", "effective"])
def test_weights_equal_a_plain_loop_and_keep_the_loss_size(method):
    counts = [600, 250, 30, 0]
    raw = []
    for n in counts:
        if n == 0:
            raw.append(None)
        elif method == "inverse":
            raw.append(1.0 / n)
        elif method == "sqrt":
            raw.append(1.0 / math.sqrt(n))
        else:
            raw.append((1 - 0.999) / (1 - 0.999 ** n))
    low = min(r for r in raw if r is not None)
    capped = [None if r is None else min(r, 10 * low) for r in raw]
    total = sum(counts)
    norm = total / sum(n * r for n, r in zip(counts, capped) if r is not None)
    want = [1.0 if r is None else r * norm for r in capped]
    got = class_weights(counts, method)
    np.testing.assert_allclose(got, want, rtol=1e-12)
    # the mean weight over the boxes is 1; rare classes weigh more, at most 10x the common one
    assert sum(n * w for n, w in zip(counts, got)) / total == pytest.approx(1.0)
    assert got[0] < got[1] < got[2] <= 10 * got[0] + 1e-12
    with pytest.raises(ValueError, match="class weight method"):
        class_weights(counts, "median")


def test_repeat_factors_equal_lvis_plain_loop(rng):
    labels = _labels(rng)
    threshold = 0.3
    share = [sum(k in set(image.tolist()) for image in labels) / len(labels) for k in range(3)]
    per_class = [max(1.0, math.sqrt(threshold / f)) if f > 0 else 1.0 for f in share]
    want = [max([per_class[k] for k in set(image.tolist())], default=1.0) for image in labels]
    got = repeat_factors(labels, 3, threshold)
    np.testing.assert_allclose(got, want, rtol=1e-12)
    assert got.max() > 1.5 and got.min() == 1.0
    order = repeated_indices(got, seed=0)
    counts = np.bincount(order, minlength=len(labels))
    assert np.all(counts >= np.floor(got)) and np.all(counts <= np.ceil(got))
    assert counts.sum() == pytest.approx(got.sum(), rel=0.1)
    np.testing.assert_array_equal(order, repeated_indices(got, seed=0))
    with pytest.raises(ValueError, match="repeat threshold"):
        repeat_factors(labels, 3, 0.0)


def test_weights_file_by_position_or_name_and_its_errors(tmp_path):
    names = ["car", "traffic light", "dog"]
    path = tmp_path / "w.txt"
    path.write_text("# rare lights\ntraffic light 3\ncar 0.5\ndog 1  # as is\n")
    np.testing.assert_allclose(read_class_weights(path, names), [0.5, 3.0, 1.0])
    path.write_text("0.5\n3\n1\n")
    np.testing.assert_allclose(read_class_weights(path, names), [0.5, 3.0, 1.0])
    path.write_text(format_weights(np.array([0.25, 2.0, 1.5]), names))
    np.testing.assert_allclose(read_class_weights(path, names), [0.25, 2.0, 1.5])
    for text, message in (("car x\n", "line 1: 'x' is not a number"),
                          ("car -1\n", "line 1: a weight must be a number above 0"),
                          ("car 1e308\n", "line 1: a weight must be a number above 0 and up to"),
                          ("car nan\n", "line 1: a weight must be a number above 0"),
                          ("cat 2\n", "line 1: 'cat' is not a class"),
                          ("1\n2\n3\n4\n", "line 4: more weights than the 3 classes"),
                          ("car 1\ncar 2\n", "line 2: class 'car' weighted twice"),
                          ("car 1\n", "no weight for traffic light, dog")):
        path.write_text(text)
        with pytest.raises(FileFormatError, match=message) as caught:
            read_class_weights(path, names)
        assert str(path) in str(caught.value)
    path.write_bytes(bytes(range(256)))  # a binary file: named, never a UnicodeDecodeError
    with pytest.raises(FileFormatError, match="not UTF-8 text") as caught:
        read_class_weights(path, names)
    assert str(path) in str(caught.value)
