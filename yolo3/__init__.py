"""yolo3: YOLOv3 and tiny YOLOv3 for TensorFlow 2 / Keras 3.

Importing ``yolo3`` registers its serializable Keras objects, so ``keras.models.load_model`` reads
yolo3 ``.keras`` files without ``safe_mode=False``.
"""
__version__ = "0.1.0"

from yolo3 import loss as _loss  # noqa: E402,F401  registers YoloLoss and identity_loss
