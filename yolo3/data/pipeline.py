"""tf.data pipeline: records -> ``((image, *y_true), dummy)`` or ``(image, boxes)`` batches.

Per element (parallel, deterministic order): read + decode JPEG/PNG (EXIF orientation applied),
augment (training) or letterbox (validation), pad boxes to ``max_boxes``. Per batch: encode
``y_true`` in the graph with :func:`yolo3.targets.encode_targets`. Images are float32 RGB in ``[0, 1]``
``(batch, h, w, 3)``; boxes are float32 ``(batch, max_boxes, 5)`` pixel ``x1, y1, x2, y2, class`` in the
network input, zero rows = padding.

Randomness: the shuffle order and a per-element random stream both come from ``seed`` and change every
epoch (each new iteration of the dataset), and the same seed gives the same batches.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Sequence, Tuple

import numpy as np
import tensorflow as tf

from yolo3.data.annotations import Record
from yolo3.data.augment import AugmentConfig, letterbox, mosaic, random_augment
from yolo3.data.images import load_image, probe_images
from yolo3.targets import encode_targets

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


def make_dataset(records: Sequence[Record], input_shape: Tuple[int, int], anchors, num_classes: int,
                 batch_size: int, *, training: bool, anchor_mask=None, max_boxes: int = 100,
                 seed: Optional[int] = None, augment: Optional[AugmentConfig] = AugmentConfig(),
                 multi_scale: Optional[MultiScale] = None, shuffle: Optional[bool] = None,
                 drop_remainder: Optional[bool] = None, cache: bool = False, targets: bool = True,
                 true_boxes: bool = False, assign_iou: float = 1.0,
                 num_parallel_calls=AUTOTUNE) -> tf.data.Dataset:
    """Batches for training (``training=True``: augmentation, shuffling) or validation (letterbox).

    Yields ``((image, *y_true), dummy)`` with image ``(batch, h, w, 3)`` float32 in ``[0, 1]``, y_true per
    scale largest stride first, dummy float32 zeros ``(batch,)`` (``true_boxes``: the padded boxes
    ``(batch, max_boxes, 5)`` too, last, for the training model's static ``true_boxes`` input);
    with ``targets=False`` yields ``(image, boxes)``. One pass over ``records`` per iteration.
    assign_iou: the targets' extra-anchor threshold (:func:`yolo3.targets.encode_targets`).

    augment: None = plain letterbox even when training. multi_scale: input size changes every N
    batches (training only). shuffle / drop_remainder default to ``training``. cache keeps decoded
    images in memory (uint8). ``seed=None`` draws a fresh seed.
    """
    if seed is None:
        seed = int(np.random.default_rng().integers(2 ** 31 - 1))
    shuffle = training if shuffle is None else shuffle
    drop_remainder = training if drop_remainder is None else drop_remainder
    if not training:
        multi_scale = None
    do_aug = training and augment is not None
    use_mosaic = do_aug and augment.mosaic > 0
    n_src = 4 if use_mosaic else 1
    anchors = np.asarray(anchors, np.float32).reshape(-1, 2)

    paths, orient, boxes = _record_tensors(records)
    n = len(records)
    base = tf.data.Dataset.from_tensor_slices((paths, orient, boxes))
    if cache:
        base = base.map(_no_autograph(lambda p, o, b: (tf.cast(decode_image(p, o) * 255.0 + 0.5, tf.uint8), b)),
                        num_parallel_calls=num_parallel_calls).cache()
    streams = []
    for k in range(n_src):
        s = base
        if shuffle or k > 0:
            s = s.shuffle(n, seed=seed + 7919 * k, reshuffle_each_iteration=True)
        streams.append(s)
    parts = [tuple(streams), tf.data.Dataset.random(seed=seed + 1, rerandomize_each_iteration=True)]
    if multi_scale is not None:
        sizes = tf.constant(multi_scale.sizes, tf.int32)
        group = batch_size * multi_scale.every
        group_rand = tf.data.Dataset.random(seed=seed + 2, rerandomize_each_iteration=True).flat_map(
            lambda r: tf.data.Dataset.from_tensors(r).repeat(group))
        parts.append(group_rand)
    ds = tf.data.Dataset.zip(tuple(parts))

    fixed_hw = tf.constant(input_shape, tf.int32)

    def load(item):
        if cache:
            image, b = item
            return tf.cast(image, tf.float32) / 255.0, b
        p, o, b = item
        return decode_image(p, o), b

    def process(srcs, rand, group_rand=None):
        if group_rand is not None:
            # Dataset.random values are poor modulo small numbers: use one as a stateless seed.
            idx = tf.random.stateless_uniform((), seed=tf.stack([group_rand, tf.constant(seed, tf.int64)]),
                                              maxval=len(multi_scale.sizes), dtype=tf.int32)
            input_hw = sizes[idx]
        else:
            input_hw = fixed_hw
        seed_pair = tf.stack([rand, tf.constant(seed, tf.int64)])
        image, b = load(srcs[0])
        if not do_aug:
            image, b = letterbox(image, b, input_hw)
        elif not use_mosaic:
            image, b = random_augment(image, b, input_hw, seed_pair, augment)
        else:
            seeds = tf.random.experimental.stateless_split(seed_pair, num=6)
            image, b = random_augment(image, b, input_hw, seeds[1], augment)
            first = (image, b)

            def four():
                ims, bxs = [first[0]], [first[1]]
                for k, src in enumerate(srcs[1:], start=2):
                    im_k, b_k = random_augment(*load(src), input_hw, seeds[k], augment)
                    ims.append(im_k)
                    bxs.append(b_k)
                return mosaic(ims, bxs, input_hw, seeds[5], augment.min_box_size)

            use = tf.random.stateless_uniform((), seed=seeds[0]) < augment.mosaic
            image, b = tf.cond(use, four, lambda: first)
        image = tf.ensure_shape(image, [None, None, 3])
        return image, pad_boxes(b, max_boxes)

    # No Python control flow depends on tensors here: skipping autograph saves seconds of tracing.
    ds = ds.map(_no_autograph(process), num_parallel_calls=num_parallel_calls, deterministic=True)
    ds = ds.batch(batch_size, drop_remainder=drop_remainder)
    if targets:

        def encode(image, b):
            hw = tf.shape(image)[1:3]
            y_true = encode_targets(b, hw if multi_scale is not None else tuple(input_shape),
                                    anchors, num_classes, anchor_mask, assign_iou)
            dummy = tf.zeros(tf.shape(image)[:1], tf.float32)
            return ((image, *y_true, b) if true_boxes else (image, *y_true)), dummy

        ds = ds.map(_no_autograph(encode), num_parallel_calls=num_parallel_calls, deterministic=True)
    if ds.cardinality() == tf.data.UNKNOWN_CARDINALITY:  # multi-scale's flat_map hides it
        batches = n // batch_size if drop_remainder else -(-n // batch_size)
        ds = ds.apply(tf.data.experimental.assert_cardinality(batches))
    return ds.prefetch(AUTOTUNE)


__all__ = ["make_dataset", "MultiScale", "AugmentConfig", "load_image",
           "decode_image", "apply_orientation", "pad_boxes"]
