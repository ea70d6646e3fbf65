"""tf.data pipeline: records -> ``((image, *y_true), dummy)`` or ``(image, boxes)`` batches.

Per element (parallel, deterministic order): read + decode JPEG/PNG (EXIF orientation applied),
augment (training) or letterbox (validation), pad boxes to ``max_boxes``. Per batch: encode
``y_true`` in the graph with :func:`yolo3.ops.targets.encode_targets`. Images are float32 RGB in
``[0, 1]`` ``(batch, h, w, 3)``; boxes are float32 ``(batch, max_boxes, 5)`` pixel ``x1, y1, x2, y2,
class`` in the network input, zero rows = padding.

Randomness: the shuffle order and a per-element random stream both come from ``seed`` and change every
epoch (each new iteration of the dataset), and the same seed gives the same batches.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional, Sequence, Tuple, Union

import numpy as np
import tensorflow as tf

from yolo3.data.annotations import Record
from yolo3.data.augment import AugmentConfig, letterbox, mosaic, random_augment
from yolo3.data.images import load_image, probe_images
from yolo3.data.tiling import TileSampling, random_tile
from yolo3.ops.targets import encode_targets

AUTOTUNE = tf.data.AUTOTUNE


@dataclass(frozen=True)
class MultiScale:
    """Multi-scale training: every ``every`` batches pick an input size ``(h, w)`` from ``sizes``."""

    sizes: Tuple[Tuple[int, int], ...] = tuple((s, s) for s in range(320, 609, 32))
    every: int = 10


def apply_orientation(image: tf.Tensor, orientation: tf.Tensor) -> tf.Tensor:
    """Apply EXIF ``orientation`` (1-8) to a decoded ``(h, w, c)`` image, like PIL's exif_transpose."""
    o = tf.cast(orientation, tf.int32)
    branches = [
        lambda: image,                                   # 1 (and anything unknown)
        lambda: tf.reverse(image, [1]),                  # 2 mirror horizontal
        lambda: tf.image.rot90(image, 2),                # 3 rotate 180
        lambda: tf.reverse(image, [0]),                  # 4 mirror vertical
        lambda: tf.transpose(image, [1, 0, 2]),          # 5 transpose
        lambda: tf.image.rot90(image, 3),                # 6 rotate 90 CW
        lambda: tf.image.rot90(tf.transpose(image, [1, 0, 2]), 2),  # 7 transverse
        lambda: tf.image.rot90(image, 1),                # 8 rotate 90 CCW
    ]
    idx = tf.where((o >= 1) & (o <= 8), o - 1, 0)
    return tf.switch_case(idx, branches)


def decode_image(path: tf.Tensor, orientation: tf.Tensor) -> tf.Tensor:
    """Read and decode a JPEG/PNG/BMP/GIF file -> ``(h, w, 3)`` float32 in ``[0, 1]``, EXIF-transposed."""
    data = tf.io.read_file(path)
    img = tf.io.decode_image(data, channels=3, expand_animations=False, dtype=tf.uint8)
    img = apply_orientation(img, orientation)
    return tf.cast(img, tf.float32) / 255.0


def pad_boxes(boxes: tf.Tensor, max_boxes: int) -> tf.Tensor:
    """``(n, 5)`` -> ``(max_boxes, 5)``: keep the first ``max_boxes``, pad with zero rows."""
    boxes = boxes[:max_boxes]
    out = tf.pad(boxes, [[0, max_boxes - tf.shape(boxes)[0]], [0, 0]])
    return tf.ensure_shape(out, [max_boxes, 5])


def _no_autograph(fn):
    return tf.autograph.experimental.do_not_convert(fn)


def _record_tensors(records: Sequence[Record]):
    """Paths (N,), orientations (N,), ragged boxes (N, None, 5)."""
    if not records:
        raise ValueError("make_dataset needs at least one record")
    missing = [i for i, r in enumerate(records) if r.orientation is None]
    orient = [r.orientation for r in records]
    if missing:
        probes = probe_images([records[i].path for i in missing])
        for i, (_, o) in zip(missing, probes):
            orient[i] = o
    paths = tf.constant([r.path for r in records])
    lengths = [len(r.boxes) for r in records]
    flat = np.concatenate([np.asarray(r.boxes, np.float32).reshape(-1, 5) for r in records], axis=0)
    boxes = tf.RaggedTensor.from_row_lengths(tf.constant(flat, tf.float32),
                                             tf.constant(lengths, tf.int64))
    return paths, tf.constant(orient, tf.int32), boxes


@dataclass(frozen=True)
class TargetEncoding:
    """What the ``y_true`` targets encode (:func:`yolo3.ops.targets.encode_targets`): ``anchors``
    ``(N, 2)`` pixels ``(w, h)`` at the network input, the class count, the masks (None: the
    default split) and ``assign_iou``, the extra-anchor threshold (1: only the best anchor).
    ``true_boxes``: the padded boxes ``(batch, max_boxes, 5)`` go last in the inputs too, for the
    training model's static ``true_boxes`` input. ``anchors`` None: no ``y_true`` at all, the
    inputs are ``(image, boxes)`` (an anchor-free head's training model)."""

    anchors: Any
    num_classes: int
    masks: Optional[Sequence[Sequence[int]]] = None
    assign_iou: float = 1.0
    true_boxes: bool = False


@dataclass(frozen=True)
class DatasetConfig:
    """How :func:`make_dataset` batches: the input size ``(h, w)``, images per batch, training
    (augmentation, shuffling, dropping the last partial batch) or validation (letterbox), and the
    targets to encode (None: ``(image, boxes)`` batches).

    ``augment`` None: plain letterbox even when training. ``multi_scale``: the input size changes
    every N batches (training only). ``shuffle`` / ``drop_remainder`` default to ``training``.
    ``cache`` keeps decoded images in memory (uint8). ``seed`` None draws a fresh seed.
    ``tiles``: tiled training (:mod:`yolo3.data.tiling`): each training image (each of a mosaic's
    four) is first cut to a window at its own resolution, drawn with a bias toward objects.
    """

    input_shape: Tuple[int, int]
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
    num_parallel_calls: int = AUTOTUNE
    tiles: Optional[TileSampling] = None

    @classmethod
    def from_arguments(cls, input_shape, anchors, num_classes: int, batch_size: int, *,
                       training: bool, anchor_mask=None, targets: bool = True,
                       true_boxes: bool = False, assign_iou: float = 1.0, **options
                       ) -> "DatasetConfig":
        """The config of :func:`make_dataset`'s earlier signature (``make_dataset(records,
        input_shape, anchors, num_classes, batch_size, training=..., ...)``)."""
        encoding = (TargetEncoding(anchors, num_classes, anchor_mask, assign_iou, true_boxes)
                    if targets else None)
        return cls(tuple(input_shape), batch_size, training, encoding, **options)


class _Elements:
    """The per-element and per-batch functions of one :class:`DatasetConfig` (tf.data maps)."""

    def __init__(self, config: DatasetConfig, seed: int):
        self.config = config
        self.seed = seed
        self.augment = config.augment if config.training else None
        self.multi_scale = config.multi_scale if config.training else None
        self.use_mosaic = self.augment is not None and self.augment.mosaic > 0
        self.tiles = config.tiles if config.training else None
        self.fixed_hw = tf.constant(config.input_shape, tf.int32)
        self.sizes = (tf.constant(self.multi_scale.sizes, tf.int32)
                      if self.multi_scale is not None else None)
        if config.targets is not None and config.targets.anchors is not None:
            self.anchors = np.asarray(config.targets.anchors, np.float32).reshape(-1, 2)

    def load(self, item, seed_pair=None, k: int = 0):
        """A source element -> ``(image (h, w, 3) float32 in [0, 1], boxes (n, 5))``; training
        tiled: the window drawn for it (the ``k``-th source of ``seed_pair``'s element)."""
        if self.config.cache:
            image, b = item
            image = tf.cast(image, tf.float32) / 255.0
        else:
            p, o, b = item
            image = decode_image(p, o)
        if self.tiles is not None and seed_pair is not None:
            seed = tf.random.experimental.stateless_fold_in(seed_pair, 7001 + k)
            image, b = random_tile(image, b, seed, self.tiles)
        return image, b

    def input_hw(self, group_rand):
        if group_rand is None:
            return self.fixed_hw
        # Dataset.random values are poor modulo small numbers: use one as a stateless seed.
        idx = tf.random.stateless_uniform((), seed=tf.stack([group_rand, tf.constant(self.seed, tf.int64)]),
                                          maxval=len(self.multi_scale.sizes), dtype=tf.int32)
        return self.sizes[idx]

    def process(self, srcs, rand, group_rand=None):
        """One image: letterboxed, augmented or a mosaic of four; boxes padded to ``max_boxes``."""
        input_hw = self.input_hw(group_rand)
        seed_pair = tf.stack([rand, tf.constant(self.seed, tf.int64)])
        image, b = self.load(srcs[0], seed_pair)
        if self.augment is None:
            image, b = letterbox(image, b, input_hw)
        elif not self.use_mosaic:
            image, b = random_augment(image, b, input_hw, seed_pair, self.augment)
        else:
            image, b = self.maybe_mosaic(srcs, image, b, input_hw, seed_pair)
        image = tf.ensure_shape(image, [None, None, 3])
        return image, pad_boxes(b, self.config.max_boxes)

    def maybe_mosaic(self, srcs, image, b, input_hw, seed_pair):
        augment = self.augment
        seeds = tf.random.experimental.stateless_split(seed_pair, num=6)
        first = random_augment(image, b, input_hw, seeds[1], augment)

        def four():
            ims, bxs = [first[0]], [first[1]]
            for k, src in enumerate(srcs[1:], start=2):
                im_k, b_k = random_augment(*self.load(src, seed_pair, k), input_hw, seeds[k],
                                           augment)
                ims.append(im_k)
                bxs.append(b_k)
            return mosaic(ims, bxs, input_hw, seeds[5], augment.min_box_size)

        use = tf.random.stateless_uniform((), seed=seeds[0]) < augment.mosaic
        return tf.cond(use, four, lambda: first)

    def encode(self, image, b):
        """A batch -> ``((image, *y_true[, boxes]), dummy)`` (no anchors: ``((image, boxes),
        dummy)``)."""
        targets = self.config.targets
        dummy = tf.zeros(tf.shape(image)[:1], tf.float32)
        if targets.anchors is None:
            return (image, b), dummy
        hw = tf.shape(image)[1:3] if self.multi_scale is not None else tuple(self.config.input_shape)
        y_true = encode_targets(b, hw, self.anchors, targets.num_classes, targets.masks,
                                targets.assign_iou)
        return ((image, *y_true, b) if targets.true_boxes else (image, *y_true)), dummy


def make_dataset(records: Sequence[Record], config: Union[DatasetConfig, Tuple[int, int]],
                 *args, **kwargs) -> tf.data.Dataset:
    """Batches of ``records`` as ``config`` says (:class:`DatasetConfig`).

    Yields ``((image, *y_true), dummy)`` with image ``(batch, h, w, 3)`` float32 in ``[0, 1]``, y_true
    per scale largest stride first, dummy float32 zeros ``(batch,)`` (with ``true_boxes``, the
    padded boxes ``(batch, max_boxes, 5)`` last in the inputs); without targets yields
    ``(image, boxes)``. One pass over ``records`` per iteration.

    The earlier call ``make_dataset(records, input_shape, anchors, num_classes, batch_size,
    training=..., ...)`` still works (:meth:`DatasetConfig.from_arguments`).
    """
    if not isinstance(config, DatasetConfig):
        config = DatasetConfig.from_arguments(config, *args, **kwargs)
    elif args or kwargs:
        raise TypeError("make_dataset(records, config) takes no other arguments")
    seed = config.seed
    if seed is None:
        seed = int(np.random.default_rng().integers(2 ** 31 - 1))
    shuffle = config.training if config.shuffle is None else config.shuffle
    drop_remainder = config.training if config.drop_remainder is None else config.drop_remainder
    elements = _Elements(config, seed)
    calls = config.num_parallel_calls

    paths, orient, boxes = _record_tensors(records)
    n = len(records)
    base = tf.data.Dataset.from_tensor_slices((paths, orient, boxes))
    if config.cache:
        base = base.map(_no_autograph(lambda p, o, b: (tf.cast(decode_image(p, o) * 255.0 + 0.5, tf.uint8), b)),
                        num_parallel_calls=calls).cache()
    streams = []
    for k in range(4 if elements.use_mosaic else 1):
        s = base
        if shuffle or k > 0:
            s = s.shuffle(n, seed=seed + 7919 * k, reshuffle_each_iteration=True)
        streams.append(s)
    parts = [tuple(streams), tf.data.Dataset.random(seed=seed + 1, rerandomize_each_iteration=True)]
    if elements.multi_scale is not None:
        group = config.batch_size * elements.multi_scale.every
        group_rand = tf.data.Dataset.random(seed=seed + 2, rerandomize_each_iteration=True).flat_map(
            lambda r: tf.data.Dataset.from_tensors(r).repeat(group))
        parts.append(group_rand)
    ds = tf.data.Dataset.zip(tuple(parts))
    # No Python control flow depends on tensors here: skipping autograph saves seconds of tracing.
    ds = ds.map(_no_autograph(elements.process), num_parallel_calls=calls, deterministic=True)
    ds = ds.batch(config.batch_size, drop_remainder=drop_remainder)
    if config.targets is not None:
        ds = ds.map(_no_autograph(elements.encode), num_parallel_calls=calls, deterministic=True)
    if ds.cardinality() == tf.data.UNKNOWN_CARDINALITY:  # multi-scale's flat_map hides it
        batches = n // config.batch_size if drop_remainder else -(-n // config.batch_size)
        ds = ds.apply(tf.data.experimental.assert_cardinality(batches))
    return ds.prefetch(AUTOTUNE)


__all__ = ["make_dataset", "DatasetConfig", "TargetEncoding", "MultiScale", "AugmentConfig", "load_image",
           "decode_image", "apply_orientation", "pad_boxes", "TileSampling"]
