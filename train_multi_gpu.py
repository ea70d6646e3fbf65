"""Train YOLOv3 on several GPUs, logical CPUs or a cluster: see ``python train_multi_gpu.py --help``
(the same as ``yolo3 train``)."""
from yolo3.cli.train import main

raise SystemExit(main())
