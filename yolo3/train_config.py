"""The training configuration: every setting :func:`yolo3.train.train` takes, with its default.

The one owner of the defaults: ``yolo3 train``'s flags read them from here (``--freeze-epochs``
is ``freeze_epochs``). Plain Python, no TensorFlow: ``yolo3 train --help`` stays fast.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Optional, Tuple

__all__ = ["TrainConfig", "default"]


@dataclass
class TrainConfig:
    """Everything :func:`train` needs; the CLI flags map one to one (``--freeze-epochs`` ...)."""

    annotations: str
    classes: str
    output: str
    val_annotations: Optional[str] = None
    val_split: float = 0.1
    anchors: Optional[str] = None
    model: str = "yolov3"
    input_size: int = 416
    weights: Optional[str] = None
    freeze_epochs: int = 0
    epochs: int = 10
    batch_size: int = 8
    gpus: int = 0
    cpu_replicas: int = 0
    strategy: str = "wrapper"
    lr: Optional[float] = None  # None: the optimiser's default (recipe.DEFAULT_LR: Adam 3e-3, SGD 1e-2)
    schedule: str = "cosine"
    warmup_epochs: float = 1.0
    optimizer: str = "adam"  # adam or sgd (momentum 0.937, Nesterov)
    weight_decay: float = 5e-4  # decoupled; never on batch-norm or biases
    ema: bool = True  # checkpoints and evaluation use the exponential moving average of the weights
    ema_momentum: Optional[float] = None  # None: from the run's length (recipe.auto_ema_momentum)
    prior_bias: bool = True  # new output layers start at the data's objectness and class priors
    box_loss: str = "ciou"  # mse (keras-yolo3's), giou, diou or ciou
    label_smoothing: float = 0.0
    # each box is also a positive on every other anchor whose shape IoU with it exceeds this
    # (Darknet's iou_thresh); 1: only its best anchor (keras-yolo3). 0.35 measured best of 0.1,
    # 0.213 (Darknet's YOLOv4 value), 0.35 and 0.5 on two realistic sets at global batch 16
    assign_iou: float = 0.35
    mosaic: float = 0.0  # probability of a 4-image mosaic per training image
    multi_scale: Optional[Tuple[int, int]] = None  # (MIN, MAX): random multiple of 32 in between
    multi_scale_every: int = 10  # steps between two size changes
    eval_every: Optional[int] = None  # epochs between mAP evaluations; None: auto; 0: never
    patience: int = 0  # stop after this many evaluations without a better mAP@0.5:0.95; 0: never
    precision: str = "auto"  # auto, float32, mixed_bfloat16 or mixed_float16
    jit: str = "auto"  # XLA for the training step: auto (GPUs), on or off
    resume: bool = False
    seed: int = 0
    steps_per_epoch: Optional[int] = None
    validation_steps: Optional[int] = None
    max_boxes: int = 100
    # AugmentConfig preset: full, light or none. light measured better on 10-epoch runs of a few
    # hundred images (three synthetic sets, from scratch and fine-tuned); full for long runs
    augment: str = "light"
    freeze_bn: bool = False
    # batch-norm statistics recomputed with the evaluated weights over this many training images
    # before each validation and save (yolo3.bn_statistics); 0: Keras's moving averages
    bn_stats_images: int = 256
    bn_momentum: Optional[float] = None  # the batch norms' moving-average momentum; None: 0.99
    strict: bool = False  # refuse invalid boxes instead of dropping them with a warning
    verbose: int = 1


def default(name: str) -> Any:
    """The default of the :class:`TrainConfig` field ``name``."""
    for f in dataclasses.fields(TrainConfig):
        if f.name == name:
            if f.default is dataclasses.MISSING:
                raise KeyError(f"{name} has no default: it is required")
            return f.default
    raise KeyError(f"TrainConfig has no field {name!r}")
