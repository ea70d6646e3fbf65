"""One version string: setup.py reads yolo3/core/version.py, which yolo3 and ``yolo3 --version``
show."""
from __future__ import annotations

import re

from locations import REPO

import yolo3
from yolo3.cli import main
from yolo3.core.version import __version__


def test_the_package_the_command_and_setup_say_one_version(capsys):
    assert yolo3.__version__ == __version__ and re.fullmatch(r"\d+\.\d+\.\d+", __version__)
    setup = (REPO / "setup.py").read_text(encoding="utf-8")
    assert '"yolo3" / "core" / "version.py"' in setup
    try:
        main(["--version"])
    except SystemExit:
        pass
    assert __version__ in capsys.readouterr().out
