"""yolo3.core.value_types: settings' values against their type hints, and values read from text."""
from __future__ import annotations

from pathlib import Path
from typing import Optional, Tuple, Union

import numpy as np
import pytest

from yolo3.core.value_types import conforms, describe, from_text

PAIR = Tuple[int, int]


@pytest.mark.parametrize("value, hint, fits", [
    (True, bool, True), (1, bool, False),
    (3, int, True), (np.int64(3), int, True), (True, int, False), (2.5, int, False),
    (0.5, float, True), (2, float, True), (False, float, False), ("0.5", float, False),
    ("a.txt", str, True), (Path("a.txt"), str, True), (3, str, False),
    (None, Optional[float], True), (0.1, Optional[float], True), ("x", Optional[float], False),
    ((160, 224), Optional[PAIR], True), ([160, 224], Optional[PAIR], True),
    ((160,), Optional[PAIR], False), ((160, 2.5), Optional[PAIR], False),
    (416, Union[int, PAIR], True), ((288, 512), Union[int, PAIR], True),
    ("416", Union[int, PAIR], False),
])
def test_conforms(value, hint, fits):
    assert conforms(value, hint) is fits


def test_describe_says_what_fits():
    assert describe(float) == "a number" and describe(int) == "a whole number"
    assert describe(bool) == "true or false" and describe(str) == "text"
    assert describe(Optional[int]) == "none or a whole number"
    assert describe(Optional[PAIR]) == "none or two whole numbers"
    assert describe(Union[int, PAIR]) == "a whole number or two whole numbers"


@pytest.mark.parametrize("text, hint, value", [
    ("0.7", float, 0.7), ("1", float, 1.0), ("16", int, 16),
    ("true", bool, True), ("False", bool, False), ("yes", bool, True),
    ("none", Optional[float], None), ("None", Optional[str], None), ("0.01", Optional[float], 0.01),
    ("[160, 224]", Optional[PAIR], (160, 224)), ("[288,512]", Union[int, PAIR], (288, 512)),
    ("tiny", str, "tiny"), ("2024", str, "2024"), ("runs/x.keras", Optional[str], "runs/x.keras"),
])
def test_from_text_reads_each_type(text, hint, value):
    got = from_text(text, hint)
    assert got == value and type(got) is type(value)


@pytest.mark.parametrize("text, hint, message", [
    ("abc", float, "must be a number, got 'abc'"),
    ("1.5", int, "must be a whole number, got '1.5'"),
    ("maybe", bool, "must be true or false, got 'maybe'"),
    ("[1, 2, 3]", Optional[PAIR], "must be none or two whole numbers, got '[1, 2, 3]'"),
    ("none", float, "must be a number, got 'none'"),
])
def test_from_text_refuses_a_value_that_does_not_fit(text, hint, message):
    with pytest.raises(ValueError) as caught:
        from_text(text, hint)
    assert str(caught.value) == message


@pytest.mark.parametrize("hint", [Tuple[int, ...], list, dict])
def test_a_hint_of_another_kind_is_a_type_error_not_a_pass(hint):
    """A setting of a new type must get its rule here, not be waved through."""
    with pytest.raises(TypeError, match="no rule"):
        conforms([1], hint)
    with pytest.raises(TypeError, match="no words"):
        describe(hint)


def test_a_literal_takes_its_words_beside_the_other_kinds():
    from typing import Literal, Union
    hint = Union[int, Literal["auto"]]  # batch_size
    assert conforms("auto", hint) and conforms(8, hint)
    assert not conforms("fast", hint) and not conforms(2.5, hint)
    assert describe(hint) == "a whole number or auto"
    assert from_text("auto", hint) == "auto" and from_text("16", hint) == 16
    with pytest.raises(ValueError, match="must be a whole number or auto, got '8.5'"):
        from_text("8.5", hint)
