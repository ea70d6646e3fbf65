"""The data step of training: class names, training and validation records, anchors (given,
the variant's, or k-means) and masks (:class:`TrainData`), and the images decoded once before
training (or named when training meets one it cannot decode)."""
from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import List, Optional, Tuple

import numpy as np

from yolo3.checkpoint.metadata import ModelInfo
from yolo3.config.choices import (
    AUTO_ANCHORS,
    AUTO_CLASS_WEIGHTS,
    AUTO_TILE,
    CLASS_WEIGHT_METHODS,
)
from yolo3.config.heads import Head as HeadFacts
from yolo3.config.specs import ModelSpec, get_spec
from yolo3.config.train_config import ConfigError, DataSettings, TrainConfig
from yolo3.core.errors import FileFormatError
from yolo3.core.log import NOTICE
from yolo3.data.annotations import (
    Sources,
    box_image_sizes,
    box_sizes,
    load_training_records,
    source_name,
)
from yolo3.data.class_names import read_classes
from yolo3.data.verify import check_decodable, listed, unchecked, verify_images
from yolo3.data.yolo_layout import read_data_file
from yolo3.heads.base import Head
from yolo3.heads.registry import as_head
from yolo3.ops.anchors import (
    BPR_THRESHOLD,
    anchor_fit,
    format_anchors,
    kmeans_anchors,
    read_anchors,
)
from yolo3.ops.class_balance import (
    WEIGHT_CAP,
    class_counts,
    class_weights,
    read_class_weights,
    repeat_factors,
    repeated_indices,
)
from yolo3.ops.tiles import Slicing, check_tile_count, suggest_tile

logger = logging.getLogger(__name__)


@dataclass
class TrainData:
    """What the data step decides: the variant, classes, anchors, masks and the two record sets."""

    spec: ModelSpec
    class_names: List[str]
    anchors: np.ndarray
    masks: List[List[int]]
    records: list
    val_records: list
    input_hw: Tuple[int, int]  # the network's input (h, w), checked against the strides
    tile: Optional[int] = None  # tiled training and sliced validation: the tile size in pixels
    class_weights: Optional[np.ndarray] = None  # (C,) each positive's loss weight by its class
    tile_overlap: float = 0.2  # sliced validation's overlap (and the model's default slicing)
    tile_whole_from: float = 0.0  # the tiles' hand-over to the whole image (TrainConfig's)

    @property
    def input_size(self) -> Tuple[int, int]:
        """``input_hw``'s name before this release (read-only)."""
        return self.input_hw

    @property
    def slicing(self) -> Optional[Slicing]:
        """How the run validates, and its model detects by default: None without tiles."""
        return (Slicing(self.tile, self.tile_overlap, whole_from=self.tile_whole_from)
                if self.tile else None)

    @property
    def num_classes(self) -> int:
        return len(self.class_names)

    @property
    def head(self) -> Head:
        """The run's detection head (:mod:`yolo3.heads`): the variant's anchor-free head, or the
        anchor head of the run's anchors and masks."""
        return as_head(self.head_facts)

    @property
    def head_facts(self) -> HeadFacts:
        """The run's head as data (:mod:`yolo3.config.heads`): the variant's, with the run's
        anchors and masks where it has anchors."""
        return self.spec.head.with_found_anchors(lambda: (self.anchors, self.masks))

    def info(self) -> ModelInfo:
        """The facts every saved body of this run carries."""
        return ModelInfo.of_head(self.head_facts, self.num_classes, class_names=self.class_names,
                                 variant=self.spec.name, input_size=self.input_hw,
                                 slicing=self.slicing)


def data_sources(settings: DataSettings) -> Tuple[List[str], Sources, Optional[Sources]]:
    """``(class names, training sources, validation sources or None)``: from ``data_file`` (its
    names unless ``classes`` is given, which must have as many), else from ``classes``,
    ``annotations`` and ``val_annotations``."""
    if not settings.data_file:
        return (read_classes(settings.classes), settings.annotations,
                settings.val_annotations or None)
    dataset = read_data_file(settings.data_file)
    names = dataset.names
    if settings.classes:
        names = read_classes(settings.classes)
        if len(names) != len(dataset.names):
            raise ConfigError(f"{settings.classes}: {len(names)} classes, but {dataset.path} "
                              f"names {len(dataset.names)}", "classes", "data_file")
    return names, dataset.sources("train"), dataset.sources("val")


def prepare_data(config: TrainConfig) -> TrainData:
    """Classes, records, anchors (the variant's defaults without ``anchors``) and masks; the
    validation records are ``val_annotations`` (or the data file's val split), else a seeded
    ``val_split`` of the annotations. An anchor-free variant has no anchors or masks (an
    ``anchors`` setting is not used: :func:`yolo3.config.train_config.cautions` says so)."""
    settings = config.data
    class_names, train_source, val_source = data_sources(settings)
    spec = get_spec(config.model.variant)
    auto = settings.anchors == AUTO_ANCHORS
    given = bool(settings.anchors) and not auto

    def given_anchors(default: np.ndarray) -> np.ndarray:
        return read_anchors(settings.anchors) if given else default
    try:  # before the records: reading them probes every image
        head = as_head(spec.default_head()).refit_anchors(given_anchors)
    except FileFormatError:
        raise
    except ValueError as e:  # the anchors cannot be split over the outputs
        raise ConfigError(f"anchors {settings.anchors}: {e}", "anchors") from None
    records = load_training_records(train_source, class_names, settings.strict)
    if val_source:
        val_records = load_training_records(val_source, class_names, settings.strict)
    else:
        order = np.random.default_rng(config.seed).permutation(len(records))
        n_val = max(1, int(round(len(records) * settings.val_split)))
        if n_val >= len(records):
            raise ConfigError(f"{source_name(train_source)}: {len(records)} images are too few for "
                              f"val_split {settings.val_split}", "val_split")
        val_records = [records[i] for i in order[:n_val]]
        records = [records[i] for i in order[n_val:]]
    counts = [len(np.asarray(r.boxes).reshape(-1, 5)) for r in records + val_records]
    crowded = [(r, n) for r, n in zip(records + val_records, counts) if n > settings.max_boxes]
    if crowded:
        logger.warning("%d images have more than max_boxes=%d boxes (first: %s, %d); training "
                       "uses the first %d of each", len(crowded), settings.max_boxes,
                       crowded[0][0].path, crowded[0][1], settings.max_boxes,
                       extra={"settings": ("max_boxes",)})
    input_hw = spec.check_input_size(config.model.input_size)  # the one check
    head = head.refit_anchors(lambda anchors: anchors_for(records, anchors, auto, input_hw,
                                                          config.seed))
    tile = tile_for(records, settings.tile, input_hw)
    if tile:  # sliced validation: refused now if an image would need too many tiles
        check_tile_count([r.image_hw for r in val_records if r.image_hw is not None], tile,
                         settings.tile_overlap)
    weights = class_weights_for(records, config.recipe.class_weights, class_names)
    records = repeated_records(records, settings.repeat_threshold, len(class_names), config.seed)
    return TrainData(spec, class_names, head.anchor_array(), head.mask_lists(), records,
                     val_records, input_hw, tile,
                     weights, settings.tile_overlap, settings.tile_whole_from)


def repeated_records(records: list, threshold: float, num_classes: int, seed: int) -> list:
    """``records`` with repeat-factor sampling at ``threshold`` (0: as they are): images of rare
    classes repeated (:func:`yolo3.ops.class_balance.repeat_factors`; the fractional repeats
    drawn once, seeded), said in the log. An epoch is then one pass over the repeated list."""
    if not threshold:
        return records
    labels = [np.asarray(r.boxes).reshape(-1, 5)[:, 4] for r in records]
    factors = repeat_factors(labels, num_classes, threshold)
    order = repeated_indices(factors, seed)
    logger.log(NOTICE, "repeat-factor sampling at %g: %d of %d training images repeat (up to "
               "%.2fx); an epoch is %d images", threshold, int((factors > 1).sum()),
               len(records), float(factors.max()), len(order))
    return [records[i] for i in order]


def class_weights_for(records: list, setting: Optional[str], class_names: List[str]
                      ) -> Optional[np.ndarray]:
    """The run's class weights: None (off), read from a file, or computed from the training
    boxes by a method (``auto``: the effective number of samples), said in the log with the
    box count of each class."""
    if setting is None:
        return None
    counts = class_counts([np.asarray(r.boxes).reshape(-1, 5)[:, 4] for r in records],
                          len(class_names))
    if setting in (AUTO_CLASS_WEIGHTS, *CLASS_WEIGHT_METHODS):
        method = "effective" if setting == AUTO_CLASS_WEIGHTS else setting
        weights = class_weights(counts, method)
        source = f"{method}, from the training boxes, at most {WEIGHT_CAP:g}x apart"
    else:
        weights = read_class_weights(setting, class_names)
        source = setting
    logger.log(NOTICE, "class weights (%s): %s", source, ", ".join(
        f"{name} {w:.3g} ({n} boxes)" for name, w, n in zip(class_names, weights, counts)))
    return weights


def tile_for(records: list, tile, hw: Tuple[int, int]) -> Optional[int]:
    """The run's tile size: ``tile`` in pixels, or with ``auto`` the size
    :func:`yolo3.ops.tiles.suggest_tile` finds for the training boxes at ``hw`` (None: whole
    images), said in the log."""
    if tile != AUTO_TILE:
        return tile
    known = [r for r in records if r.image_hw is not None]
    tip = suggest_tile(box_sizes(known), box_image_sizes(known), hw)
    if tip.size is None:
        logger.log(NOTICE, "tile auto: whole images (%s)", tip.reason)
    else:
        logger.log(NOTICE, "tile auto: %d px (%s)", tip.size, tip.reason)
    return tip.size


ANCHOR_SAMPLE = 20000  # training images whose boxes measure (and k-means fits) the anchors


def anchors_for(records: list, anchors: np.ndarray, auto: bool, hw: Tuple[int, int], seed: int
                 ) -> np.ndarray:
    """The run's anchors: ``anchors``, or with ``auto`` as many computed by k-means on the training
    boxes letterboxed into the input ``hw`` (of at most ``ANCHOR_SAMPLE`` images, a seeded
    sample); logs how they fit those boxes (and warns when badly)."""
    if len(records) > ANCHOR_SAMPLE:  # a seeded sample measures as well, in a fraction of the time
        pick = np.random.default_rng(seed).choice(len(records), ANCHOR_SAMPLE, replace=False)
        records = [records[i] for i in np.sort(pick)]
    box_wh = box_sizes(records, hw)
    size = size_text(hw)
    if auto:
        try:
            anchors, _ = kmeans_anchors(box_wh, len(anchors), seed=seed)
        except ValueError as e:
            raise ConfigError(f"anchors auto: {e}", "anchors") from None
        logger.log(NOTICE, "anchors (k-means on %d training boxes at %s): %s", len(box_wh),
                   size, format_anchors(anchors).strip())
    if not len(box_wh):
        return anchors
    fit = anchor_fit(box_wh, anchors)
    logger.log(NOTICE, "anchors fit the training boxes at %s: %s", size, fit)
    if not fit.fits:
        logger.warning("the anchors fit the training boxes badly (best possible recall %.3f < "
                       "%.2f): anchors auto computes anchors for them (or yolo3 kmeans, with "
                       "--input-size %d %d --clusters %d)", fit.best_possible_recall,
                       BPR_THRESHOLD, hw[0], hw[1], len(anchors))
    return anchors


def size_text(hw: Tuple[int, int]) -> str:
    return f"{hw[0]}x{hw[1]}" if hw[0] == hw[1] else f"{hw[0]}x{hw[1]} (height x width)"


class ImageDecodeFailed(Exception):
    """The pipeline met an image it cannot decode (its TensorFlow message; not the file)."""


UPFRONT_DECODE_LIMIT = 5000  # images decoded before training; beyond, named when met


def check_images_up_front(paths: List[str], progress: bool = True) -> None:
    """Decode, before training, the images not known to decode from an earlier run
    (:func:`yolo3.data.verify.check_decodable`), when they are at most
    ``UPFRONT_DECODE_LIMIT``; more (a first run over a COCO-sized set) would delay the first step
    by minutes for a check the first epoch makes anyway, so a file the pipeline cannot decode is
    then named when training meets it (:func:`name_undecodable`)."""
    todo = unchecked(paths)
    if not todo:  # all known to decode: nothing to do (not even reading the cache again)
        return
    if len(todo) <= UPFRONT_DECODE_LIMIT:
        check_decodable(todo, progress=progress)
        return
    logger.log(NOTICE, "%d images are not yet known to decode (more than %d): training starts "
               "without decoding them first, and names a file the pipeline cannot decode when it "
               "meets one ('yolo3 check' decodes them all)", len(todo), UPFRONT_DECODE_LIMIT)


def name_undecodable(paths: List[str], reason: str, check_args: str, progress: bool) -> str:
    """The message for a decode failure met while training: the files that fail (found by
    decoding those not known to decode), or TensorFlow's reason when none does now."""
    failures = verify_images(paths, progress=progress)
    if failures:
        return (f"training met an image it cannot decode; {len(failures)} images cannot be used "
                f"(remove them, then --resume):{listed(failures)}")
    return (f"an image could not be decoded during training although every image decodes now "
            f"(did a file change?); 'yolo3 check {check_args}' names it. TensorFlow: {reason}")


def check_args(config: TrainConfig) -> str:
    """The ``yolo3 check`` arguments that read this run's data."""
    if config.data.data_file:
        return f"--data {config.data.data_file}"
    return f"--annotations {config.data.annotations}"
