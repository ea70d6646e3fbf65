"""Shared fixtures and settings for the yolo3 test suite."""
from __future__ import annotations

import os
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np
import pytest

REPO_ROOT = Path(__file__).resolve().parent.parent
SHARED_DIR = REPO_ROOT.parent / "shared"


@pytest.fixture
def repo_root() -> Path:
    return REPO_ROOT


@pytest.fixture
def darknet_cfg_dir() -> Path:
    """``../shared/darknet`` (reference cfgs and class lists); tests that need it fail loudly if absent."""
    path = SHARED_DIR / "darknet"
    if not path.is_dir():
        pytest.fail(f"reference Darknet cfgs not found at {path} (the shared/ folder beside the repo)")
    return path


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng(1234)
