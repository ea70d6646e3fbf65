"""VOC and COCO mAP of a model or a detection JSON; see ``yolo3.cli.evaluate``."""
from yolo3.cli.evaluate import main
raise SystemExit(main())
