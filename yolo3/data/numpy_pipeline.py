"""The input pipeline without TensorFlow: records -> the same batches as tf.data
(:mod:`yolo3.data.pipeline`), in NumPy and OpenCV, as a ``keras.utils.PyDataset`` that ``fit``
takes on every backend, its batches made by parallel workers.

Each element is what :class:`yolo3.data.planner.Planner` says (the plans tf.data applies too): the
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

The feed (:mod:`yolo3.data.feeds`): batches are made by ``workers`` threads, or worker
processes writing into shared memory (``feed="processes"``), that live as long as the dataset,
two batches per worker ahead of the one asked for (at most ``max_queue_size``), on into the next epoch (plans are pure
functions of seed, epoch and index), so an epoch's first step does not wait for workers to
start. Keras iterates it in order without its own enqueuer (``use_multiprocessing`` hands the
work to Keras's processes instead). :meth:`NumpyBatches.close` (or the dataset's collection)
ends the workers and frees what they hold.

Epochs: ``fit`` calls :meth:`NumpyBatches.on_epoch_end`, and the next pass is the next epoch's
plan; ``repeat`` makes one endless stream (``steps_per_epoch``) whose batch ``k`` belongs to epoch
``k // len(self)``. The same seed gives the same batches, whatever the workers.
"""
from __future__ import annotations

from typing import Iterator, List, Optional, Sequence, Tuple

import keras

from yolo3.core.cpus import usable_cores
from yolo3.data.annotations import Record
from yolo3.data.batch_maker import BatchMaker
from yolo3.data.dataset_config import DatasetConfig
from yolo3.data.feeds import FEED_KINDS, ProcessFeed, ThreadFeed

__all__ = ["NumpyBatches", "default_workers"]


def default_workers() -> int:
    """The cores this process may use (at most 32): the pipeline's default worker count."""
    return min(usable_cores(), 32)


class NumpyBatches(keras.utils.PyDataset):
    """Batches of ``records`` as ``config`` says (:class:`~yolo3.data.dataset_config.DatasetConfig`),
    made by :class:`~yolo3.data.batch_maker.BatchMaker` in ``workers`` threads or processes
    (``feed``: :mod:`yolo3.data.feeds`) that live across epochs (``workers=0``: each batch made
    when asked, in the calling thread, nothing ahead); ``use_multiprocessing``: Keras's own
    worker processes instead.

    ``repeat``: one endless stream of epochs (for ``steps_per_epoch``). The maker's attributes
    (``planner``, ``images``, ``paths``, ``seed``, ``per_epoch``, ``anchors``, ``image``,
    ``element``, ``batch``, ``encode`` ...) are read through this object."""

    def __init__(self, records: Sequence[Record], config: DatasetConfig, *,
                 workers: Optional[int] = None, use_multiprocessing: bool = False,
                 max_queue_size: int = 16, repeat: bool = False, feed: str = "threads"):
        if feed not in FEED_KINDS:
            raise ValueError(f"feed {feed!r}: expected one of {', '.join(FEED_KINDS)}")
        count = default_workers() if workers is None else int(workers)
        super().__init__(workers=max(count, 1) if use_multiprocessing else 1,
                         use_multiprocessing=use_multiprocessing, max_queue_size=max_queue_size)
        self.maker = BatchMaker(records, config)
        self.repeat = repeat
        self.start_at(config.first_epoch, config.first_batch)  # sets epoch and _offset
        self.feed_workers = count
        self.feed_kind = feed
        self._feed = None
        if not use_multiprocessing and count > 0:
            depth = max(1, min(int(max_queue_size), 2 * count))  # two ahead per worker
            self._feed = (ProcessFeed(self.maker, count, depth) if feed == "processes"
                          else ThreadFeed(self.maker.batch, count, depth))

    def __getattr__(self, name: str):
        if name == "maker" or name.startswith("__"):
            raise AttributeError(name)
        return getattr(self.maker, name)

    def __getstate__(self):  # Keras's worker processes: the feed stays here
        state = dict(self.__dict__)
        state["_feed"] = None
        return state

    def close(self) -> None:
        """Stop making batches ahead: threads end, worker processes end and their shared memory
        goes (asking again starts the feed again)."""
        if self._feed is not None:
            self._feed.close()

    @property
    def num_batches(self) -> Optional[int]:
        return None if self.repeat else self.per_epoch

    def __len__(self) -> int:
        return self.per_epoch

    def start_at(self, epoch: int, batch: int = 0) -> None:
        """Begin the next pass (``fit``'s next iteration) at the planner's epoch ``epoch``, and
        with ``repeat`` the stream at that epoch's batch ``batch``: a resumed run, or a later
        stage, goes on with the batches an unbroken run would have had. Batches made ahead for
        elsewhere are dropped as they age."""
        if batch and not self.repeat:
            raise ValueError("a pass begins at batch 0 (batch > 0 only for the repeat stream)")
        self.epoch = int(epoch)
        self._offset = int(epoch) * self.per_epoch + int(batch)

    def on_epoch_end(self) -> None:
        if not self.repeat:
            self.epoch += 1

    def __iter__(self) -> Iterator:
        """One epoch's batches in order (the current epoch; endless with ``repeat``)."""
        k = 0
        while self.repeat or k < self.per_epoch:
            yield self[k]
            k += 1

    def _key(self, k: int) -> Tuple[int, int]:
        if self.repeat:
            return divmod(self._offset + int(k), self.per_epoch)
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
            return self.maker.batch(epoch, k)
        return self._feed.take((epoch, k), self._ahead(epoch, k))
