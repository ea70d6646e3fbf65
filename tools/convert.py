"""Darknet <-> Keras conversion; see ``yolo3.cli.convert`` (also the ``yolo3-convert`` command)."""
from yolo3.cli.convert import main
raise SystemExit(main())
