"""Detect objects in images, folders, globs, videos or a webcam (also ``yolo3-detect``); see ``yolo3.cli.detect``."""
from yolo3.cli.detect import main
raise SystemExit(main())
