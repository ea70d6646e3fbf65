"""The focal cross-entropy against a float64 NumPy formula."""
from __future__ import annotations

import numpy as np

from yolo3.ops.focal import focal_bce


def test_focal_bce_equals_the_formula_and_gamma_zero_is_plain_cross_entropy():
    rng = np.random.default_rng(0)
    logits = rng.normal(0, 3, (4, 7)).astype(np.float32)
    labels = np.concatenate([rng.integers(0, 2, (2, 7)), rng.uniform(0, 1, (2, 7))]).astype(np.float32)
    x, t = logits.astype(np.float64), labels.astype(np.float64)
    bce = np.maximum(x, 0) - x * t + np.log1p(np.exp(-np.abs(x)))
    p = 1 / (1 + np.exp(-x))
    np.testing.assert_allclose(np.asarray(focal_bce(labels, logits)), bce, rtol=1e-5, atol=1e-6)
    for gamma in (1.0, 2.0):
        want = bce * np.abs(t - p) ** gamma
        np.testing.assert_allclose(np.asarray(focal_bce(labels, logits, gamma)), want,
                                   rtol=1e-4, atol=1e-6)
