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
max_boxes, 5)`` pixel ``x1, y1, x2, y2, class``, zero rows = padding. With the config's
``device_colour`` the image is the uint8 canvas followed by each element's colour plan
``(batch, 14)`` (:func:`yolo3.data.image_ops.colour_plan`): the training step scales it and
applies the colours (:mod:`yolo3.modeling.pixel_input`), a quarter of the bytes per batch.

Images come from :class:`yolo3.data.image_cache.DecodedImages` (the config's ``image_cache``:
decoded at every use, or once, in RAM or on disk, no larger than the recipe needs).

The feed: batches are made by a pool of ``workers`` threads that lives as long as the dataset,
``max_queue_size`` batches ahead of the one asked for, on into the next epoch (plans are pure
functions of seed, epoch and index), so an epoch's first step does not wait for workers to
start. Keras iterates it in order without its own enqueuer (``use_multiprocessing`` hands the
work to Keras's processes instead). :meth:`NumpyBatches.close` (or the dataset's collection)
cancels what is queued and lets the threads go.

Epochs: ``fit`` calls :meth:`NumpyBatches.on_epoch_end`, and the next pass is the next epoch's
plan; ``repeat`` makes one endless stream (``steps_per_epoch``) whose batch ``k`` belongs to epoch
``k // len(self)``. The same seed gives the same batches, whatever the workers.
"""
from __future__ import annotations

import threading
import weakref
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Dict, Iterator, List, Optional, Sequence, Tuple

import keras
import numpy as np

from yolo3.core.cpus import usable_cores
from yolo3.data.annotations import Record
from yolo3.data.dataset_config import (
    DatasetConfig,
    cache_longest_side,
    epoch_batches,
    make_planner,
    new_seed,
    record_geometry,
)
from yolo3.data.draws import ElementPlan, pad_boxes_np
from yolo3.data.image_cache import DecodedImages
from yolo3.data.image_ops import (
    augment_image_np,
    colour_plan,
    letterbox_image_np,
    letterbox_u8,
    mosaic_regions,
    place_image_u8,
)
from yolo3.ops.targets import preprocess_true_boxes

__all__ = ["NumpyBatches", "default_workers", "BatchFeed"]


def default_workers() -> int:
    """The cores this process may use (at most 32): the pipeline's default worker count."""
    return min(usable_cores(), 32)


class BatchFeed:
    """A pool of ``workers`` threads making batches ahead: :meth:`take` returns batch ``key``
    (made now if nobody asked for it before) and queues ``ahead`` (keys, in order) that are not
    queued yet; at most ``2 * depth`` batches wait, the oldest dropped first."""

    def __init__(self, make, workers: int, depth: int):
        self.make = make
        self.workers = max(1, int(workers))
        self.depth = max(1, int(depth))
        self._pool: Optional[ThreadPoolExecutor] = None
        self._pending: Dict[Tuple[int, int], Future] = {}
        self._lock = threading.Lock()

    def _executor(self) -> ThreadPoolExecutor:
        if self._pool is None:
            self._pool = ThreadPoolExecutor(self.workers, thread_name_prefix="yolo3-feed")
            weakref.finalize(self, self._pool.shutdown, wait=False, cancel_futures=True)
        return self._pool

    def take(self, key: Tuple[int, int], ahead: Sequence[Tuple[int, int]]):
        with self._lock:
            pool = self._executor()
            future = self._pending.pop(key, None)
            if future is None:
                future = pool.submit(self.make, *key)
            for other in ahead:
                if other not in self._pending:
                    self._pending[other] = pool.submit(self.make, *other)
            while len(self._pending) > 2 * self.depth:  # asked out of order: drop the oldest
                self._pending.pop(next(iter(self._pending))).cancel()
        return future.result()

    def close(self) -> None:
        """Cancel what is queued and let the threads end (the feed restarts if asked again)."""
        with self._lock:
            for future in self._pending.values():
                future.cancel()
            self._pending.clear()
            pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(wait=False, cancel_futures=True)


def _weak_batch(dataset: "NumpyBatches"):
    """``dataset.batch`` without a reference to ``dataset``: a dropped dataset is freed at once,
    and its feed's threads end with it."""
    ref = weakref.ref(dataset)

    def batch(epoch: int, k: int):
        owner = ref()
        if owner is None:
            raise RuntimeError("the dataset is gone")
        return owner.batch(epoch, k)
    return batch


class NumpyBatches(keras.utils.PyDataset):
    """Batches of ``records`` as ``config`` says (:class:`~yolo3.data.dataset_config.DatasetConfig`),
    made by ``workers`` threads of a pool that lives across epochs (``use_multiprocessing``:
    Keras's worker processes instead).

    ``repeat``: one endless stream of epochs (for ``steps_per_epoch``)."""

    def __init__(self, records: Sequence[Record], config: DatasetConfig, *,
                 workers: Optional[int] = None, use_multiprocessing: bool = False,
                 max_queue_size: int = 16, repeat: bool = False):
        threads = default_workers() if workers is None else int(workers)
        super().__init__(workers=threads if use_multiprocessing else 1,
                         use_multiprocessing=use_multiprocessing, max_queue_size=max_queue_size)
        self.config = config
        self.seed = new_seed() if config.seed is None else int(config.seed)
        image_hws, self.orientations = record_geometry(records)
        self.planner = make_planner(records, config, self.seed, image_hws)
        self.paths = [r.path for r in records]
        self.repeat = repeat
        self.epoch = 0
        self.per_epoch = epoch_batches(len(records), config)
        kind = config.image_cache if config.image_cache != "none" else (
            "ram" if config.cache else "none")
        self.images = DecodedImages(
            self.paths, self.orientations, image_hws, kind,
            longest=cache_longest_side(config) if config.image_cache != "none" else None)
        self.feed_workers = threads
        self._feed = None if use_multiprocessing else BatchFeed(_weak_batch(self), threads,
                                                                max_queue_size)
        targets = config.targets
        self.anchors = (None if targets is None or targets.anchors is None else
                        np.asarray(targets.anchors, np.float32).reshape(-1, 2))

    def __getstate__(self):  # Keras's worker processes: the thread pool stays here
        state = dict(self.__dict__)
        state["_feed"] = None
        return state

    def close(self) -> None:
        """Stop making batches ahead (the threads end; asking again starts them again)."""
        if self._feed is not None:
            self._feed.close()

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
        """Record ``index``'s image, uint8 ``(h, w, 3)`` (:class:`DecodedImages`: no larger than
        the recipe needs where cached; read-only)."""
        return self.images.get(index)

    def _source(self, plan: ElementPlan, k: int) -> Tuple[np.ndarray, Tuple[int, int]]:
        """Source ``k`` of ``plan`` cut to its window, and the displayed size its geometry is
        drawn for (a cached copy may be smaller: tiles keep the full resolution)."""
        index = plan.sources[k]
        image = self.decoded(index)
        if plan.windows is not None:
            x1, y1, x2, y2 = plan.windows[k]
            return image[y1:y2, x1:x2], (y2 - y1, x2 - x1)
        return image, self.planner.image_hws[index]

    def image_u8(self, plan: ElementPlan) -> Tuple[np.ndarray, np.ndarray]:
        """The uint8 ``(h, w, 3)`` canvas of one element's plan, without its colours, and its
        colour plan ``(14,)`` (module docstring): ``canvas / 255`` with the plan's colours is
        :meth:`image`."""
        H, W = plan.input_hw
        if plan.draws is None:
            image, hw = self._source(plan, 0)
            return letterbox_u8(image, (H, W), hw), colour_plan(None, None, (H, W))
        out = np.empty((H, W, 3), np.uint8)
        regions = ((0, H, 0, W),) if plan.split_yx is None else mosaic_regions(plan.split_yx,
                                                                                (H, W))
        for k, (y1, y2, x1, x2) in enumerate(regions):
            if y2 <= y1 or x2 <= x1:
                continue  # this source does not show
            image, _ = self._source(plan, k)
            place_image_u8(image, plan.draws[k], (H, W), (y1, y2, x1, x2),
                           out=out[y1:y2, x1:x2])
        return out, colour_plan(plan.draws, plan.split_yx, (H, W),
                                self.planner.augment.colours)

    def image(self, plan: ElementPlan) -> np.ndarray:
        """The float32 ``(h, w, 3)`` image of one element's plan (a mosaic's sources augmented
        only where they show)."""
        H, W = plan.input_hw
        regions = (None,) if plan.split_yx is None else mosaic_regions(plan.split_yx, (H, W))
        out = np.empty((H, W, 3), np.float32) if plan.split_yx is not None else None
        for k in range(len(plan.sources)):
            region = regions[k] if out is not None else None
            if region is not None and (region[1] <= region[0] or region[3] <= region[2]):
                continue  # this source does not show
            image, hw = self._source(plan, k)
            if plan.draws is None:
                canvas = letterbox_image_np(image, plan.input_hw, hw)
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
        """Element ``index`` of ``epoch``: ``(image, padded boxes)``; with ``device_colour``
        ``(uint8 canvas, padded boxes, colour plan)``."""
        plan = self.planner.element(epoch, index)
        boxes = pad_boxes_np(plan.boxes, self.config.max_boxes)
        if self.config.device_colour:
            canvas, colours = self.image_u8(plan)
            return canvas, boxes, colours
        return self.image(plan), boxes

    def _key(self, k: int) -> Tuple[int, int]:
        if self.repeat:
            return divmod(int(k), self.per_epoch)
        if not 0 <= k < self.per_epoch:
            raise IndexError(f"batch {k} of {self.per_epoch}")
        return self.epoch, int(k)

    def _ahead(self, epoch: int, k: int) -> List[Tuple[int, int]]:
        """The batches after ``(epoch, k)``, into the next epoch where the order goes on there
        (training; the stream)."""
        on = self.repeat or self.config.training
        ahead = []
        for step in range(1, self._feed.depth + 1):
            e, j = divmod(epoch * self.per_epoch + k + step, self.per_epoch)
            if e != epoch and not on:
                break
            ahead.append((e, j))
        return ahead

    def __getitem__(self, k: int):
        epoch, k = self._key(k)
        if self._feed is None:
            return self.batch(epoch, k)
        return self._feed.take((epoch, k), self._ahead(epoch, k))

    def batch(self, epoch: int, k: int):
        """Batch ``k`` of ``epoch``, made in this thread."""
        size = self.config.batch_size
        indices = range(k * size, min((k + 1) * size, len(self.paths)))
        parts = [self.element(epoch, i) for i in indices]
        images = np.stack([p[0] for p in parts])
        boxes = np.stack([p[1] for p in parts])
        if self.config.device_colour:
            return self.encode(images, boxes, np.stack([p[2] for p in parts]))
        return self.encode(images, boxes)

    def encode(self, images: np.ndarray, boxes: np.ndarray,
               colours: Optional[np.ndarray] = None):
        """A batch -> what ``fit`` takes (module docstring); ``colours``: the elements' colour
        plans, after the uint8 images."""
        targets = self.config.targets
        pixels = (images,) if colours is None else (images, colours)
        if targets is None:
            return (*pixels, boxes)
        dummy = np.zeros(len(images), np.float32)
        if self.anchors is None:
            return (*pixels, boxes), dummy
        y_true = preprocess_true_boxes(boxes, images.shape[1:3], self.anchors, targets.num_classes,
                                       targets.masks, targets.assign_iou)
        inputs = (*pixels, *y_true, boxes) if targets.true_boxes else (*pixels, *y_true)
        return inputs, dummy

