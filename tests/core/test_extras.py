"""Optional packages in one place (yolo3.core.extras): the install hint of each, and a missing one
refused naming the feature and the command."""
from __future__ import annotations

import pytest

from yolo3.core.errors import ArgumentError
from yolo3.core.extras import EXTRAS, install_hint, installed, require


def test_each_optional_package_names_its_extra():
    assert install_hint("openvino") == "pip install 'yolo3[openvino]' (or openvino)"
    assert install_hint("ai_edge_litert") == "pip install 'yolo3[export]' (or ai-edge-litert)"
    assert install_hint("tensorboard") == "pip install tensorboard"
    assert install_hint("something_else") == "pip install something_else"
    setup = open(__import__("locations").REPO / "setup.py", encoding="utf-8").read()
    for extra, name in EXTRAS.values():
        assert name in setup, name  # every package named here is one setup.py installs


def test_require_imports_or_refuses_naming_the_feature(monkeypatch):
    assert require("json", "reading") is __import__("json")
    assert installed("json") and not installed("yolo3_no_such_package")
    with pytest.raises(ArgumentError) as caught:
        require("nncf_missing_for_this_test.sub", "OpenVINO int8 quantization")
    assert str(caught.value).startswith("OpenVINO int8 quantization needs nncf_missing_for_this_test")
    monkeypatch.setitem(EXTRAS, "nncf_missing_for_this_test", ("openvino", "nncf"))
    with pytest.raises(ArgumentError, match=r"needs nncf: pip install 'yolo3\[openvino\]'"):
        require("nncf_missing_for_this_test", "OpenVINO int8 quantization")
