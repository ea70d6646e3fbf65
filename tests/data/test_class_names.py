"""One rule for class names in every layout (yolo3.data.class_names)."""
from __future__ import annotations

import pytest

from yolo3.core.errors import AnnotationError, FileFormatError
from yolo3.data.class_names import check_class_names, shown_value


def test_text_and_numbers_are_names():
    assert check_class_names(["cat", 1, 2.5, " padded "], "d.yaml") == ["cat", "1", "2.5",
                                                                       " padded "]


@pytest.mark.parametrize("names, reason", [
    (["cat", None], "class 1 is None (null)"),
    (["cat", ["a", "b"]], "(list): a class name is text"),
    ([{"a": 1}], "(dict)"),
    (["cat", True], "(bool)"),
    (["cat", ""], "class 1 has an empty name"),
    (["cat", "   "], "class 1 has an empty name"),
    (["two\nlines"], "spans several lines"),
    (["cat", "dog", "cat"], "repeats class 0"),
])
def test_what_is_not_a_name_is_refused_naming_the_file_and_the_entry(names, reason):
    with pytest.raises(FileFormatError) as caught:
        check_class_names(names, "data.yaml", "names")
    assert str(caught.value).startswith("data.yaml: names: ")
    assert reason in str(caught.value)


def test_line_numbers_where_the_names_came_from_lines():
    with pytest.raises(AnnotationError) as caught:
        check_class_names(["a", "b", "a"], "obj.names", error=AnnotationError, lines=[1, 3, 7])
    assert str(caught.value) == "obj.names:7: class name 'a' repeats line 1"


def test_a_huge_value_is_shown_cut():
    text = shown_value(list(range(10_000)))
    assert len(text) <= 63 and text.endswith("...")
