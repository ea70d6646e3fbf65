"""The input pipeline without TensorFlow: records -> the same batches as tf.data
(:mod:`yolo3.data.pipeline`), in NumPy and OpenCV, as a ``keras.utils.PyDataset`` that ``fit``
takes on every backend, its batches made by parallel workers.

Each element is what :class:`yolo3.data.draws.Planner` says (the plans tf.data applies too): the
sources decoded (EXIF orientation applied), cut to their tile windows, augmented
(:mod:`yolo3.data.image_ops`) or letterboxed, four of them joined in a mosaic. Per batch the
``y_true`` targets are encoded by :func:`yolo3.ops.targets.preprocess_true_boxes` (bit for bit
tf.data's :func:`~yolo3.ops.targets.encode_targets`). Batches: ``((image, *y_true[, boxes]),
dummy)``, ``((image, boxes), dummy)`` for an anchor-free head, ``(image, boxes)`` without
targets; images float32 RGB ``(batch, h, w, 3)`` in ``[0, 1]``, boxes float32 ``(batch,
max_boxes, 5)`` pixel ``x1, y1, x2, y2, class``, zero rows = padding.

Epochs: ``fit`` calls :meth:`NumpyBatches.on_epoch_end`, and the next pass is the next epoch's
plan; ``repeat`` makes one endless stream (``steps_per_epoch``) whose batch ``k`` belongs to epoch
``k // len(self)``. The same seed gives the same batches, whatever the workers.
"""
from __future__ import annotations

from typing import Dict, Iterator, Optional, Sequence

import keras
import numpy as np

from yolo3.core.cpus import usable_cores
from yolo3.data.annotations import Record
from yolo3.data.dataset_config import (
    DatasetConfig,
    epoch_batches,
    make_planner,
    new_seed,
    record_geometry,
)
from yolo3.data.draws import ElementPlan, pad_boxes_np
from yolo3.data.image_ops import (
    augment_image_np,
    decode_image_np,
    letterbox_image_np,
    mosaic_regions,
)
from yolo3.ops.targets import preprocess_true_boxes

__all__ = ["NumpyBatches", "default_workers"]


def default_workers() -> int:
    """The cores this process may use (at most 32): the pipeline's default worker count."""
    return min(usable_cores(), 32)


class NumpyBatches(keras.utils.PyDataset):
    """Batches of ``records`` as ``config`` says (:class:`~yolo3.data.dataset_config.DatasetConfig`),
    made by ``workers`` threads (``use_multiprocessing``: processes).

    ``repeat``: one endless stream of epochs (for ``steps_per_epoch``)."""

    def __init__(self, records: Sequence[Record], config: DatasetConfig, *,
                 workers: Optional[int] = None, use_multiprocessing: bool = False,
                 max_queue_size: int = 16, repeat: bool = False):
        super().__init__(workers=default_workers() if workers is None else int(workers),
                         use_multiprocessing=use_multiprocessing, max_queue_size=max_queue_size)
        self.config = config
        self.seed = new_seed() if config.seed is None else int(config.seed)
        image_hws, self.orientations = record_geometry(records)
        self.planner = make_planner(records, config, self.seed, image_hws)
        self.paths = [r.path for r in records]
        self.repeat = repeat
        self.epoch = 0
        self.per_epoch = epoch_batches(len(records), config)
        self._cache: Optional[Dict[int, np.ndarray]] = {} if config.cache else None
        targets = config.targets
        self.anchors = (None if targets is None or targets.anchors is None else
                        np.asarray(targets.anchors, np.float32).reshape(-1, 2))

    @property
    def num_batches(self) -> Optional[int]:
        return None if self.repeat else self.per_epoch

    def __len__(self) -> int:
        return self.per_epoch

    def on_epoch_end(self) -> None:
        if not self.repeat:
            self.epoch += 1

    def __iter__(self) -> Iterator:
        """One epoch's batches in order, in this thread (the current epoch; endless with
        ``repeat``)."""
        k = 0
        while self.repeat or k < self.per_epoch:
            yield self[k]
            k += 1

    def decoded(self, index: int) -> np.ndarray:
        """Record ``index``'s image, uint8 ``(h, w, 3)`` (kept in memory with ``cache``)."""
        if self._cache is not None and index in self._cache:
            return self._cache[index]
        image = decode_image_np(self.paths[index], self.orientations[index])
        if self._cache is not None:
            self._cache[index] = image
        return image

    def image(self, plan: ElementPlan) -> np.ndarray:
        """The float32 ``(h, w, 3)`` image of one element's plan (a mosaic's sources augmented
        only where they show)."""
        H, W = plan.input_hw
        regions = (None,) if plan.split_yx is None else mosaic_regions(plan.split_yx, (H, W))
        out = np.empty((H, W, 3), np.float32) if plan.split_yx is not None else None
        for k, index in enumerate(plan.sources):
            region = regions[k] if out is not None else None
            if region is not None and (region[1] <= region[0] or region[3] <= region[2]):
                continue  # this source does not show
            image = self.decoded(index)
            if plan.windows is not None:
                x1, y1, x2, y2 = plan.windows[k]
                image = image[y1:y2, x1:x2]
            if plan.draws is None:
                canvas = letterbox_image_np(image, plan.input_hw)
                if region is not None:
                    canvas = canvas[region[0]:region[1], region[2]:region[3]]
            else:
                colours = self.planner.augment.colours
                canvas = augment_image_np(image, plan.draws[k], plan.input_hw, colours, region)
            if out is None:
                return canvas
            out[region[0]:region[1], region[2]:region[3]] = canvas
        return out

    def element(self, epoch: int, index: int):
        """Element ``index`` of ``epoch``: ``(image, padded boxes)``."""
        plan = self.planner.element(epoch, index)
        return self.image(plan), pad_boxes_np(plan.boxes, self.config.max_boxes)

    def __getitem__(self, k: int):
        if self.repeat:
            epoch, k = divmod(int(k), self.per_epoch)
        else:
            epoch = self.epoch
        if not 0 <= k < self.per_epoch:
            raise IndexError(f"batch {k} of {self.per_epoch}")
        size = self.config.batch_size
        indices = range(k * size, min((k + 1) * size, len(self.paths)))
        pairs = [self.element(epoch, i) for i in indices]
        images = np.stack([p[0] for p in pairs])
        boxes = np.stack([p[1] for p in pairs])
        return self.encode(images, boxes)

    def encode(self, images: np.ndarray, boxes: np.ndarray):
        """A batch -> what ``fit`` takes (module docstring)."""
        targets = self.config.targets
        if targets is None:
            return images, boxes
        dummy = np.zeros(len(images), np.float32)
        if self.anchors is None:
            return (images, boxes), dummy
        y_true = preprocess_true_boxes(boxes, images.shape[1:3], self.anchors, targets.num_classes,
                                       targets.masks, targets.assign_iou)
        inputs = (images, *y_true, boxes) if targets.true_boxes else (images, *y_true)
        return inputs, dummy

