"""What a batch stream is, for either input pipeline: :class:`DatasetConfig` (input size, batch,
training or validation, augmentation, multi-scale, tiles) and :class:`TargetEncoding` (the
``y_true`` targets), and the :class:`~yolo3.data.planner.Planner` they make for a list of records.
No TensorFlow: tf.data (:mod:`yolo3.data.pipeline`) and the NumPy/OpenCV pipeline
(:mod:`yolo3.data.numpy_pipeline`) read the same objects.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, List, Optional, Sequence, Tuple

import numpy as np

from yolo3.data.annotations import Record
from yolo3.data.planner import AugmentConfig, MultiScale, Planner, TileSampling
from yolo3.data.images import probe_images
from yolo3.ops.targets import preprocess_true_boxes

__all__ = ["DatasetConfig", "TargetEncoding", "training_inputs", "record_geometry",
           "make_planner", "epoch_batches", "shard_range",
           "new_seed", "cache_longest_side"]


@dataclass(frozen=True)
class TargetEncoding:
    """What the ``y_true`` targets encode (:func:`yolo3.ops.targets.encode_targets`): ``anchors``
    ``(N, 2)`` pixels ``(w, h)`` at the network input, the class count, the masks (None: the
    default split) and ``assign_iou``, the extra-anchor threshold (1: only the best anchor).
    ``true_boxes``: the padded boxes ``(batch, max_boxes, 5)`` go last in the inputs too, for the
    training model's static ``true_boxes`` input. ``anchors`` None: no ``y_true`` at all, the
    inputs are ``(image, boxes)`` (an anchor-free head's training model). A head gives its own
    (:meth:`yolo3.heads.base.Head.target_encoding`)."""

    anchors: Any
    num_classes: int
    masks: Optional[Sequence[Sequence[int]]] = None
    assign_iou: float = 1.0
    true_boxes: bool = False


def training_inputs(targets: TargetEncoding, pixels: Tuple[np.ndarray, ...],
                    boxes: np.ndarray) -> Tuple[tuple, np.ndarray]:
    """One batch as ``fit`` takes it, the targets encoded in NumPy: ``(inputs, zeros (B,))``.
    ``pixels``: the images ``(B, H, W, 3)`` (and their colour plans); ``boxes`` ``(B, M, 5)``
    ``x1, y1, x2, y2, class`` input pixels. Inputs: ``(*pixels, boxes)`` without anchors, else
    ``(*pixels, *y_true, boxes)`` (``true_boxes``) or ``(*pixels, *y_true)``."""
    dummy = np.zeros(len(boxes), np.float32)
    if targets.anchors is None:  # the training model assigns the boxes itself
        return (*pixels, boxes), dummy
    y_true = preprocess_true_boxes(boxes, pixels[0].shape[1:3], targets.anchors,
                                   targets.num_classes, targets.masks, targets.assign_iou)
    inputs = (*pixels, *y_true, boxes) if targets.true_boxes else (*pixels, *y_true)
    return inputs, dummy


@dataclass(frozen=True)
class DatasetConfig:
    """How a pipeline batches: the input size ``(h, w)``, images per batch, training
    (augmentation, shuffling, dropping the last partial batch) or validation (letterbox), and the
    targets to encode (None: ``(image, boxes)`` batches).

    ``augment`` None: plain letterbox even when training. ``multi_scale``: the input size changes
    every N batches (training only). ``shuffle`` / ``drop_remainder`` default to ``training``.
    ``cache`` keeps decoded images in memory (uint8; validation order only). ``seed`` None draws
    a fresh seed. ``tiles``: tiled training (:mod:`yolo3.data.tiling`): each training image (each
    of a mosaic's four) is first cut to a window at its own resolution, drawn with a bias toward
    objects. ``num_parallel_calls``: tf.data's parallel calls (the NumPy pipeline has workers).
    The NumPy pipeline only: ``image_cache`` ``none``, ``ram`` or ``disk``
    (:mod:`yolo3.data.image_cache`: each image decoded once, no larger than
    :func:`cache_longest_side`); ``device_colour``: uint8 batches with each element's colour plan,
    the colours applied in the training step (:mod:`yolo3.modeling.pixel_input`);
    ``device_geometry``: the resampling there too: a ``(B, H, W, 0)`` uint8 array whose shape
    is the canvas's (no bytes), each element's windows cut from its images and their plans
    (:mod:`yolo3.data.window_pack`), then the colour plans; ``device_images``: the images kept whole on
    the device (``--cache device``), so only the canvas's size, the window plans (into the
    buffer's ``device_layout``, a :class:`yolo3.data.device_cache.DeviceLayout` holding these
    records, by default one of them alone: :attr:`BatchMaker.device_starts`) and the colour
    plans cross; ``shard``
    ``(index, count)``: this process's contiguous share of every batch of ``batch_size``, where
    several processes assemble one global batch (:func:`shard_range`). ``first_epoch``,
    ``first_batch``: where the batches begin, as the planner numbers them (the first pass is
    epoch ``first_epoch`` from its batch ``first_batch`` on, the passes after it whole): a
    resumed run, or a later stage, goes on with the batches an unbroken run would have had.
    """

    input_size: Tuple[int, int]
    batch_size: int
    training: bool
    targets: Optional[TargetEncoding] = None
    max_boxes: int = 100
    seed: Optional[int] = None
    augment: Optional[AugmentConfig] = AugmentConfig()
    multi_scale: Optional[MultiScale] = None
    shuffle: Optional[bool] = None
    drop_remainder: Optional[bool] = None
    cache: bool = False
    num_parallel_calls: int = -1
    tiles: Optional[TileSampling] = None
    image_cache: str = "none"
    device_colour: bool = False
    device_geometry: bool = False
    device_images: bool = False
    device_layout: Any = None
    shard: Tuple[int, int] = (0, 1)
    first_epoch: int = 0
    first_batch: int = 0

    @classmethod
    def from_arguments(cls, input_shape, anchors, num_classes: int, batch_size: int, *,
                       training: bool, anchor_mask=None, targets: bool = True,
                       true_boxes: bool = False, assign_iou: float = 1.0, **options
                       ) -> "DatasetConfig":
        """The config of ``make_dataset``'s earlier signature (``make_dataset(records,
        input_shape, anchors, num_classes, batch_size, training=..., ...)``)."""
        encoding = (TargetEncoding(anchors, num_classes, anchor_mask, assign_iou, true_boxes)
                    if targets else None)
        return cls(tuple(input_shape), batch_size, training, encoding, **options)

    @property
    def input_shape(self) -> Tuple[int, int]:
        """``input_size``'s name before yolo3 0.6 (read-only)."""
        return self.input_size

    @property
    def shuffles(self) -> bool:
        return self.training if self.shuffle is None else self.shuffle

    @property
    def drops_remainder(self) -> bool:
        return self.training if self.drop_remainder is None else self.drop_remainder


def new_seed() -> int:
    """A fresh seed for a config whose ``seed`` is None."""
    return int(np.random.default_rng().integers(2 ** 31 - 1))


def record_geometry(records: Sequence[Record]) -> Tuple[List[Tuple[int, int]], List[int]]:
    """Each record's displayed ``(h, w)`` and EXIF orientation, read from the image headers where
    the record does not hold them (cached: :func:`yolo3.data.images.probe_images`)."""
    if not records:
        raise ValueError("a dataset needs at least one record")
    missing = [i for i, r in enumerate(records) if r.image_hw is None or r.orientation is None]
    hws = [r.image_hw for r in records]
    orientations = [r.orientation for r in records]
    if missing:
        for i, (hw, o) in zip(missing, probe_images([records[i].path for i in missing])):
            hws[i], orientations[i] = hw, o
    return [(int(h), int(w)) for h, w in hws], [int(o) for o in orientations]


def make_planner(records: Sequence[Record], config: DatasetConfig, seed: int,
                 image_hws: Sequence[Tuple[int, int]]) -> Planner:
    """The :class:`~yolo3.data.planner.Planner` of ``config`` over ``records``."""
    if config.cache and (config.shuffles or (config.training and (
            config.augment is not None or config.tiles is not None))):
        raise ValueError("cache keeps decoded images in the records' order: only for "
                         "unshuffled, unaugmented batches")
    return Planner(image_hws, [r.boxes for r in records], config.input_size, seed,
                   training=config.training, shuffle=config.shuffles,
                   batch_size=config.batch_size, augment=config.augment,
                   multi_scale=config.multi_scale, tiles=config.tiles)


def shard_range(size: int, shard: Tuple[int, int]) -> range:
    """The positions ``shard = (index, count)`` takes of a batch of ``size``: its contiguous
    ``1/count`` (the processes of one global batch, in order). ValueError unless ``count``
    divides ``size`` (every process must give the same number of elements)."""
    index, count = int(shard[0]), int(shard[1])
    if count < 1 or not 0 <= index < count:
        raise ValueError(f"shard {shard}: expected (index, count) with 0 <= index < count")
    if size % count:
        raise ValueError(f"a batch of {size} cannot be split evenly over {count} processes")
    part = size // count
    return range(index * part, (index + 1) * part)


def epoch_batches(count: int, config: DatasetConfig) -> int:
    """Batches in one pass over ``count`` records."""
    if config.drops_remainder:
        return count // config.batch_size
    return -(-count // config.batch_size)


def cache_longest_side(config: DatasetConfig) -> Optional[int]:
    """The longest side a cached image needs for ``config``: the largest input side (every
    multi-scale size) times the augmentation's largest scale (training), rounded up; None with
    tiles (windows are cut at the image's own resolution)."""
    if config.training and config.tiles is not None:
        return None
    sides = [max(config.input_size)]
    if config.training and config.multi_scale is not None:
        sides += [max(hw) for hw in config.multi_scale.sizes]
    scale = 1.0
    if config.training and config.augment is not None:
        scale = max(1.0, float(config.augment.scale[1]))
    return int(np.ceil(max(sides) * scale))
