"""Shared fixtures and settings for the yolo3 test suite."""
from __future__ import annotations

import os
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np
import pytest
from locations import REPO as REPO_ROOT
from locations import shared


@pytest.fixture(scope="session", autouse=True)
def _private_user_cache(tmp_path_factory):
    """The suite's own user cache folder (image headers, engine conversions): nothing is read
    from or written to the caller's ``~/.cache/yolo3``; tests that need an empty one set theirs."""
    previous = os.environ.get("YOLO3_CACHE_DIR")
    os.environ["YOLO3_CACHE_DIR"] = str(tmp_path_factory.mktemp("user_cache"))
    yield
    if previous is None:
        os.environ.pop("YOLO3_CACHE_DIR", None)
    else:
        os.environ["YOLO3_CACHE_DIR"] = previous


@pytest.fixture(autouse=True)
def _release_keras_state_after_slow_tests(request):
    """After each slow test, Keras's global state released (its layers' names, the settings a
    run left, TensorFlow's graph and kernel caches) and garbage collected: a worker running the
    slow set's in-process trainings one after another grew to 10 GB and was killed for memory
    (the eleventh session). Keras is never imported here for it."""
    yield
    if request.node.get_closest_marker("slow") is None:
        return
    import sys
    keras = sys.modules.get("keras")
    if keras is not None:
        keras.backend.clear_session(free_memory=True)
    else:
        import gc
        gc.collect()


@pytest.fixture
def repo_root() -> Path:
    return REPO_ROOT


@pytest.fixture
def darknet_cfg_dir() -> Path:
    """The shared folder's ``darknet/`` (reference cfgs, class lists, the real tiny weights);
    a test that needs it is skipped, saying how to supply it, where it is absent (locations)."""
    return shared("darknet")


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng(1234)


@pytest.fixture(scope="session")
def line_image(tmp_path_factory):
    """A 160x120 PNG with a red square at x 40-100, y 30-90: the image of keras-yolo3 text rows
    (test_utils, test_keras_yolo3)."""
    from PIL import Image
    folder = tmp_path_factory.mktemp("grd")
    array = np.zeros((120, 160, 3), np.uint8)
    array[30:90, 40:100] = (250, 20, 20)
    path = folder / "red.png"
    Image.fromarray(array).save(path)
    return path


@pytest.fixture(scope="session")
def trained_world(tmp_path_factory):
    """A small synthetic set and one trained tiny run (64 px, one epoch) that command-line tests
    run commands on; tests copy what they change (tests/cli_harness.py)."""
    from cli_harness import make_trained_world
    return make_trained_world(tmp_path_factory.mktemp("world"))


def pytest_collection_modifyitems(config, items):
    """An ``extended`` test (beyond CI's time: ``YOLO3_SLOW=all``) is a slow one too, so the
    default suite never runs it."""
    loose = [item.nodeid for item in items
             if item.get_closest_marker("extended") and not item.get_closest_marker("slow")]
    if loose:
        raise pytest.UsageError(f"marked extended but not slow: {', '.join(loose)}")
