"""The values yolo3's settings may take (training, inference engines), one owner per list.

Plain data on a low floor, so that the settings' rules (:mod:`yolo3.config.train_config`), the code
that acts on them (loss, recipe, precision, distribute) and the command line's ``choices=`` read the
same tuple.
"""
from __future__ import annotations

BOX_LOSSES = ("mse", "giou", "diou", "ciou")  # keras-yolo3's squared error, then the IoU family
OBJECTNESS_TARGETS = ("one", "iou")  # the confidence target of a positive: 1, or its box's IoU
OPTIMIZERS = ("adam", "sgd")
SCHEDULES = ("cosine", "plateau")
JIT_CHOICES = ("auto", "on", "off")
TRAINING_PRECISIONS = ("auto", "float32", "mixed_bfloat16", "mixed_float16")
STRATEGIES = ("wrapper", "mirrored", "multiworker")
AUGMENT_PRESETS = ("full", "light", "none")
# the input pipeline: tf.data where TensorFlow imports, else NumPy/OpenCV (auto); or either
PIPELINES = ("auto", "tf", "numpy")
# the decoded-image cache of the numpy pipeline: none (decode at every use), ram or disk (the
# host's), or device (every image kept on the accelerator, the pixel work done there)
HOST_IMAGE_CACHES = ("none", "ram", "disk")
IMAGE_CACHES = (*HOST_IMAGE_CACHES, "device")
# who makes the numpy pipeline's training batches: threads, worker processes writing into shared
# memory, or auto (processes from PROCESS_FEED_FROM workers: yolo3.training.datasets.pick_feed)
DATA_FEEDS = ("auto", "threads", "processes")
PROCESS_FEED_FROM = 4  # auto's threshold: threads would reach at most about 2.3x there (measured)
# where the colour distortion and the scaling to [0, 1] run: on the device in the training step
# where there is an accelerator and the numpy pipeline feeds it (auto), the host, or the device
AUGMENT_SITES = ("auto", "host", "device")
# where a run is also logged: nowhere else, MLflow (its local store or MLFLOW_TRACKING_URI), or
# Weights & Biases (online, or WANDB_MODE=offline)
TRACKERS = ("none", "mlflow", "wandb")
ANNOTATION_FORMATS = ("text", "coco", "voc", "yolo")  # the layouts yolo3 reads and writes
ENGINES = ("auto", "keras", "openvino", "onnxruntime")  # what a .keras detector runs on
SIZE_DISTRIBUTIONS = ("log", "uniform")  # how the photo-style synthetic set spreads object sizes
# what a photo-style box spans: the visible pixels of its object, or the whole object, hidden
# parts included
BOX_EXTENTS = ("visible", "full")
AUTO_ANCHORS = "auto"  # anchors: computed by k-means on the training boxes, in place of a file
AUTO_BATCH = "auto"  # batch_size: the largest on a ladder whose training step fits the device
AUTO_TILE = "auto"  # tile: the size yolo3 check suggests from the training boxes
AUTO_CLASS_WEIGHTS = "auto"  # class_weights: the effective number of samples, capped
# class_weights computed from the box counts (yolo3.ops.class_balance)
CLASS_WEIGHT_METHODS = ("inverse", "sqrt", "effective")

__all__ = ["BOX_LOSSES", "OPTIMIZERS", "SCHEDULES", "JIT_CHOICES", "TRAINING_PRECISIONS",
           "STRATEGIES", "AUGMENT_PRESETS", "PIPELINES", "IMAGE_CACHES", "HOST_IMAGE_CACHES", "AUGMENT_SITES", "DATA_FEEDS", "PROCESS_FEED_FROM", "AUTO_ANCHORS", "AUTO_TILE", "AUTO_CLASS_WEIGHTS", "CLASS_WEIGHT_METHODS", "ANNOTATION_FORMATS",
           "ENGINES", "SIZE_DISTRIBUTIONS", "BOX_EXTENTS", "OBJECTNESS_TARGETS"]
