"""The mask rule (yolo3.config.masks) and the registry's strides."""
from __future__ import annotations

import pytest

from yolo3.config.masks import default_masks, keras_yolo3_masks, validate_masks
from yolo3.config.specs import all_specs, strides_for


def test_default_masks_and_strides():
    assert default_masks(9) == [[6, 7, 8], [3, 4, 5], [0, 1, 2]]
    assert default_masks(6) == [[3, 4, 5], [0, 1, 2]]
    assert default_masks(3) == [[0, 1, 2]]
    for bad in (0, 4, -3):
        with pytest.raises(ValueError):
            default_masks(bad)
    assert strides_for(3) == [32, 16, 8] and strides_for(2) == [32, 16]
    with pytest.raises(ValueError):
        strides_for(4)
    assert validate_masks([[3, 4, 5], [1, 2, 3]], 6) == [[3, 4, 5], [1, 2, 3]]
    with pytest.raises(ValueError, match="outside"):
        validate_masks([[3, 4, 6]], 6)
    with pytest.raises(ValueError, match="non-empty"):
        validate_masks([[0, 1], []], 6)


def test_registered_strides_are_prefixes_of_the_longest():
    for spec in all_specs():
        assert strides_for(spec.num_scales) == list(spec.strides)
    assert strides_for(1) == [32]
    with pytest.raises(ValueError):
        strides_for(0)


def test_keras_yolo3_masks_are_its_own():
    assert keras_yolo3_masks(3) == [[6, 7, 8], [3, 4, 5], [0, 1, 2]]
    assert keras_yolo3_masks(2) == [[3, 4, 5], [1, 2, 3]]
    for masks, n in ((keras_yolo3_masks(3), 9), (keras_yolo3_masks(2), 6)):
        assert validate_masks(masks, n) == masks
