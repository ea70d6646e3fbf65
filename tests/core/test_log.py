"""yolo3.core.log: the NOTICE level sits between INFO and WARNING, so ``--quiet`` keeps a run's
summary lines and drops its detail."""
from __future__ import annotations

import logging

from yolo3.cli.common import configure_logging
from yolo3.core.log import NOTICE


def test_notice_is_named_and_between_info_and_warning():
    assert logging.INFO < NOTICE < logging.WARNING
    assert logging.getLevelName(NOTICE) == "NOTICE"


def test_quiet_shows_notice_and_warnings_but_not_info(capsys):
    logger = logging.getLogger("yolo3.some_module")
    package = logging.getLogger("yolo3")
    handlers, level = list(package.handlers), package.level
    try:
        for quiet, shown in ((True, {"summary", "careful"}),
                             (False, {"detail", "summary", "careful"})):
            configure_logging("train", quiet=quiet)
            logger.info("detail")
            logger.log(NOTICE, "summary")
            logger.warning("careful")
            out = capsys.readouterr()
            text = out.out + out.err
            assert {w for w in ("detail", "summary", "careful") if w in text} == shown, text
    finally:
        package.handlers[:] = handlers
        package.setLevel(level)
