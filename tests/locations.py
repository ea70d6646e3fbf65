"""Where the tests find things: the repository, the shared reference folder, and tests/fixtures.

The shared folder (``../shared`` beside the repository, or the folder named by ``YOLO3_SHARED``)
holds Darknet's reference cfgs and class lists, Darknet's real ``yolov3-tiny.weights`` and five
photographs. A public clone has none: the tests that need one of its files ask for it through
:func:`shared` (or the ``darknet_cfg_dir`` fixture) and are skipped, saying what is missing and
how to supply it; CI has the folder and runs them.
"""
import os
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent
REPO = TESTS.parent
SHARED = Path(os.environ.get("YOLO3_SHARED") or REPO.parent / "shared")
FIXTURES = TESTS / "fixtures"

WHAT_IS_SHARED = {
    "darknet": "Darknet's reference cfgs (yolov3.cfg, yolov3-tiny.cfg, darknet53.cfg), class lists "
               "and its real yolov3-tiny.weights",
    "images": "five real photographs (.jpg)",
}


def shared_missing(*parts: str) -> str:
    """Why a test that needs ``SHARED/<parts>`` cannot run, or '' when it is there."""
    path = SHARED.joinpath(*parts)
    if path.exists() and (not path.is_dir() or any(path.iterdir())):
        return ""
    what = WHAT_IS_SHARED.get(parts[0], "a reference file") if parts else "the shared folder"
    return (f"{path} not found ({what}): this test needs the shared reference folder, which a "
            "public clone does not have; set YOLO3_SHARED to a folder holding darknet/ and "
            "images/ (README: The two commands) to run it")


def shared(*parts: str) -> Path:
    """``SHARED/<parts>``; the calling test is skipped, with the reason, where it is absent."""
    reason = shared_missing(*parts)
    if reason:
        pytest.skip(reason)
    return SHARED.joinpath(*parts)


def needs_shared(*parts: str):
    """A ``skipif`` mark for a test (or, as ``pytestmark``, a module) that needs ``SHARED/<parts>``."""
    reason = shared_missing(*parts)
    return pytest.mark.skipif(bool(reason), reason=reason or "shared folder present")
