"""The library's one logging addition: the NOTICE level, between INFO and WARNING.

Modules log through ``logging.getLogger(__name__)``; the command line decides what shows
(:func:`yolo3.cli.common.configure_logging`). NOTICE is for the few summary lines a run should
show even with ``--quiet`` (which hides INFO): each training stage's setup, where a resumed run
starts, and the best score. A message that names settings as the library knows them
(``max_boxes``) passes them as ``extra={"settings": ("max_boxes",)}``, so that a front end can
word them its own way (the command line: ``--max-boxes``), as it words a ``SettingError``.
"""
from __future__ import annotations

import logging

NOTICE = 25
logging.addLevelName(NOTICE, "NOTICE")

__all__ = ["NOTICE"]
