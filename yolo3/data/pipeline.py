"""tf.data pipeline: records -> ``((image, *y_true), dummy)`` or ``(image, boxes)`` batches.

What each element is made of (sources, tile windows, augmentation draws, mosaic split, input size,
final boxes) comes from :class:`yolo3.data.planner.Planner`, in NumPy, the same plans the
NumPy/OpenCV pipeline (:mod:`yolo3.data.numpy_pipeline`) applies; a generator hands them to the
graph, and only the image operations run in TensorFlow (parallel, deterministic order): read +
decode JPEG/PNG (EXIF orientation applied), cut the tile window, augment (training) or letterbox
(validation). Per batch: encode ``y_true`` in the graph with
:func:`yolo3.ops.targets.encode_targets`. Images are float32 RGB in ``[0, 1]`` ``(batch, h, w,
3)``; boxes are float32 ``(batch, max_boxes, 5)`` pixel ``x1, y1, x2, y2, class`` in the network
input, zero rows = padding.

Randomness: each new iteration of the dataset is the next epoch's plan (shuffle order and draws),
and the same seed gives the same batches.
"""
from __future__ import annotations

from typing import Sequence, Union

import numpy as np
import tensorflow as tf

from yolo3.data.annotations import Record
from yolo3.data.augment import AugmentConfig, augment_image, mosaic_images
from yolo3.data.dataset_config import (
    DatasetConfig,
    TargetEncoding,
    epoch_batches,
    make_planner,
    new_seed,
    record_geometry,
)
from yolo3.data.planner import MultiScale, Planner, TileSampling, pad_boxes_np
from yolo3.data.images import load_image
from yolo3.ops.letterbox import letterbox_tf
from yolo3.ops.targets import encode_targets

AUTOTUNE = tf.data.AUTOTUNE


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
    """Read and decode a JPEG/PNG/BMP/GIF file -> ``(h, w, 3)`` float32 in ``[0, 1]``, EXIF-transposed.

    JPEGs with the accurate integer DCT (TensorFlow's default is the fast one): the pixels of
    libjpeg-turbo's default, which PIL (inference, :func:`yolo3.data.images.load_image`) and
    OpenCV (the NumPy pipeline) decode, exactly."""
    data = tf.io.read_file(path)
    img = tf.cond(
        tf.io.is_jpeg(data),
        lambda: tf.io.decode_jpeg(data, channels=3, dct_method="INTEGER_ACCURATE"),
        lambda: tf.io.decode_image(data, channels=3, expand_animations=False, dtype=tf.uint8))
    img = apply_orientation(img, orientation)
    return tf.cast(img, tf.float32) / 255.0


def pad_boxes(boxes: tf.Tensor, max_boxes: int) -> tf.Tensor:
    """``(n, 5)`` -> ``(max_boxes, 5)``: keep the first ``max_boxes``, pad with zero rows."""
    boxes = boxes[:max_boxes]
    out = tf.pad(boxes, [[0, max_boxes - tf.shape(boxes)[0]], [0, 0]])
    return tf.ensure_shape(out, [max_boxes, 5])


def _no_autograph(fn):
    return tf.autograph.experimental.do_not_convert(fn)


class EpochPlans:
    """A generator function for ``tf.data.Dataset.from_generator``: each call yields the next
    epoch's element plans (:meth:`yolo3.data.planner.ElementPlan.as_arrays`), from epoch
    ``first_epoch`` on; the first call from element ``first_element`` of it."""

    def __init__(self, planner: Planner, count: int, max_boxes: int, first_epoch: int = 0,
                 first_element: int = 0):
        self.planner = planner
        self.count = count
        self.max_boxes = max_boxes
        self.epoch = int(first_epoch)
        self.first_element = int(first_element)

    def __call__(self):
        epoch, self.epoch = self.epoch, self.epoch + 1
        first, self.first_element = self.first_element, 0
        for i in range(first, self.count):
            yield self.planner.element(epoch, i).as_arrays(self.max_boxes)

    def signature(self) -> dict:
        spec = tf.TensorSpec
        return dict(sources=spec((4,), tf.int32), count=spec((), tf.int32),
                    windows=spec((4, 4), tf.int32), new_hw=spec((4, 2), tf.int32),
                    offset_hw=spec((4, 2), tf.int32), flip=spec((4,), tf.bool),
                    hsv=spec((4, 3), tf.float32), split_yx=spec((2,), tf.int32),
                    input_hw=spec((2,), tf.int32), boxes=spec((self.max_boxes, 5), tf.float32))


class _Elements:
    """The per-element and per-batch functions of one :class:`DatasetConfig` (tf.data maps)."""

    def __init__(self, config: DatasetConfig, planner: Planner, paths, orientations):
        self.config = config
        self.planner = planner
        self.paths = tf.constant(paths)
        self.orientations = tf.constant(orientations, tf.int32)
        self.augment = planner.augment
        self.fixed_input_hw = tuple(config.input_size) if planner.multi_scale is None else None
        if config.targets is not None and config.targets.anchors is not None:
            self.anchors = np.asarray(config.targets.anchors, np.float32).reshape(-1, 2)

    def input_hw_of(self, plan) -> tf.Tensor:
        """The element's network input ``(h, w)``: fixed, or its multi-scale size."""
        return plan["input_hw"] if self.fixed_input_hw is None else tf.constant(self.fixed_input_hw)

    def source(self, plan, k: int, image=None) -> tf.Tensor:
        """Source ``k`` of an element's plan, decoded (or ``image``, cached), cut to its window,
        augmented or letterboxed."""
        if image is None:
            index = plan["sources"][k]
            image = decode_image(tf.gather(self.paths, index), tf.gather(self.orientations, index))
        if self.planner.tiles is not None:
            w = plan["windows"][k]
            image = image[w[1]:w[3], w[0]:w[2]]
        input_hw = self.input_hw_of(plan)
        if self.augment is None:
            return letterbox_tf(image, input_hw)
        return augment_image(image, plan["new_hw"][k], plan["offset_hw"][k], plan["flip"][k],
                             plan["hsv"][k], input_hw, self.augment.colours)

    def process(self, plan, cached=None):
        """One element: its image ``(h, w, 3)`` and its padded boxes from the plan."""
        if self.augment is not None and self.planner.mosaic:
            input_hw = self.input_hw_of(plan)
            image = tf.cond(plan["count"] == 4,
                            lambda: mosaic_images([self.source(plan, k) for k in range(4)],
                                                  plan["split_yx"], input_hw),
                            lambda: self.source(plan, 0))
        else:
            image = self.source(plan, 0, cached)
        shape = [None, None, 3] if self.fixed_input_hw is None else [*self.fixed_input_hw, 3]
        return tf.ensure_shape(image, shape), plan["boxes"]

    def encode(self, image, b):
        """A batch -> ``((image, *y_true[, boxes]), dummy)`` (no anchors: ``((image, boxes),
        dummy)``)."""
        targets = self.config.targets
        dummy = tf.zeros(tf.shape(image)[:1], tf.float32)
        if targets.anchors is None:
            return (image, b), dummy
        hw = tf.shape(image)[1:3] if self.fixed_input_hw is None else self.fixed_input_hw
        y_true = encode_targets(b, hw, self.anchors, targets.num_classes, targets.masks,
                                targets.assign_iou)
        return ((image, *y_true, b) if targets.true_boxes else (image, *y_true)), dummy


def make_dataset(records: Sequence[Record], config: Union[DatasetConfig, tuple],
                 *args, **kwargs) -> tf.data.Dataset:
    """Batches of ``records`` as ``config`` says (:class:`DatasetConfig`).

    Yields ``((image, *y_true), dummy)`` with image ``(batch, h, w, 3)`` float32 in ``[0, 1]``, y_true
    per scale largest stride first, dummy float32 zeros ``(batch,)`` (with ``true_boxes``, the
    padded boxes ``(batch, max_boxes, 5)`` last in the inputs); without targets yields
    ``(image, boxes)``. One pass over ``records`` per iteration, the first being the planner's
    epoch ``config.first_epoch`` from its batch ``config.first_batch`` on (that first pass is
    shorter, so repeat it for a stream: Keras then asks for ``steps_per_epoch``).

    The earlier call ``make_dataset(records, input_shape, anchors, num_classes, batch_size,
    training=..., ...)`` still works (:meth:`DatasetConfig.from_arguments`).
    """
    if not isinstance(config, DatasetConfig):
        config = DatasetConfig.from_arguments(config, *args, **kwargs)
    elif args or kwargs:
        raise TypeError("make_dataset(records, config) takes no other arguments")
    seed = new_seed() if config.seed is None else config.seed
    image_hws, orientations = record_geometry(records)
    planner = make_planner(records, config, seed, image_hws)
    elements = _Elements(config, planner, [r.path for r in records], orientations)
    calls = AUTOTUNE if config.num_parallel_calls in (None, -1) else config.num_parallel_calls

    plans = EpochPlans(planner, len(records), config.max_boxes, config.first_epoch,
                        config.first_batch * config.batch_size)
    ds = tf.data.Dataset.from_generator(plans, output_signature=plans.signature())
    if config.cache:
        decoded = tf.data.Dataset.from_tensor_slices((elements.paths, elements.orientations))
        decoded = decoded.map(_no_autograph(
            lambda p, o: tf.cast(decode_image(p, o) * 255.0 + 0.5, tf.uint8)),
            num_parallel_calls=calls).cache()
        ds = tf.data.Dataset.zip((ds, decoded)).map(_no_autograph(
            lambda plan, image: elements.process(plan, tf.cast(image, tf.float32) / 255.0)),
            num_parallel_calls=calls, deterministic=True)
    else:
        # No Python control flow depends on tensors here: skipping autograph saves seconds of tracing.
        ds = ds.map(_no_autograph(elements.process), num_parallel_calls=calls, deterministic=True)
    ds = ds.batch(config.batch_size, drop_remainder=config.drops_remainder)
    if config.targets is not None:
        ds = ds.map(_no_autograph(elements.encode), num_parallel_calls=calls, deterministic=True)
    if not config.first_batch:  # a shorter first pass has no fixed length
        ds = ds.apply(tf.data.experimental.assert_cardinality(epoch_batches(len(records), config)))
    return ds.prefetch(AUTOTUNE)


__all__ = ["make_dataset", "DatasetConfig", "TargetEncoding", "MultiScale", "AugmentConfig", "load_image",
           "decode_image", "apply_orientation", "pad_boxes", "pad_boxes_np", "TileSampling",
           "EpochPlans"]
