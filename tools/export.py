"""Export a detector to SavedModel / TFLite with decoding and NMS inside; see ``yolo3.cli.export``."""
from yolo3.cli.export import main
raise SystemExit(main())
