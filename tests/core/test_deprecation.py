"""yolo3.core.deprecation and the old spellings it keeps working: model_type= is variant= now."""
from __future__ import annotations

import warnings

import pytest

from yolo3.core.deprecation import renamed_keyword


def test_renamed_keyword():
    assert renamed_keyword("variant", "tiny", "model_type", None) == "tiny"
    with pytest.warns(DeprecationWarning, match="model_type= is now variant="):
        assert renamed_keyword("variant", None, "model_type", "tiny") == "tiny"
    with pytest.raises(TypeError, match="give variant= only"):
        renamed_keyword("variant", "tiny", "model_type", "yolov3")


def test_load_weights_by_name_takes_the_old_keyword(tmp_path):
    from yolo3.checkpoint.saving import atomic_save_weights
    from yolo3.checkpoint.weights import load_weights_by_name
    from yolo3.modeling.bodies import build_body
    src = build_body("tiny", 2, input_shape=(64, 64))
    path = atomic_save_weights(src, tmp_path / "w.weights.h5")
    dst = build_body("tiny", 2, input_shape=(64, 64))
    with pytest.warns(DeprecationWarning):
        old = load_weights_by_name(dst, path, model_type="tiny", verbose=False)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        new = load_weights_by_name(dst, path, variant="tiny", verbose=False)
    assert old.loaded == new.loaded and len(new.loaded) > 10


def test_accepts_old_keywords_maps_the_old_name_and_warns():
    from yolo3.core.deprecation import accepts_old_keywords

    @accepts_old_keywords(model_type="variant")
    def load(path, variant=None):
        """Docstring kept."""
        return path, variant

    assert load.__doc__ == "Docstring kept." and load.__name__ == "load"
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert load("a", variant="tiny") == ("a", "tiny")
    with pytest.warns(DeprecationWarning, match="model_type= is now variant="):
        assert load("a", model_type="tiny") == ("a", "tiny")
    with pytest.raises(TypeError, match="give variant= only"):
        load("a", variant="tiny", model_type="yolov3")
