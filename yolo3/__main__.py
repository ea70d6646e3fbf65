"""``python -m yolo3 <command> ...``: the same as the ``yolo3`` command."""
from yolo3.cli import main

raise SystemExit(main())
