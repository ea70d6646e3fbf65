"""The training configuration: every setting :func:`yolo3.training.train.train` takes, its default
and its rules, in six sections.

:class:`TrainConfig` holds :class:`DataSettings` (what to learn from), :class:`ModelSettings` (what
to train), :class:`RecipeSettings` (how), :class:`ScheduleSettings` (how long),
:class:`HardwareSettings` (where) and :class:`OutputSettings` (what it writes), plus the seed.
Every setting has one name, unique over the sections (``batch_size`` is
``config.hardware.batch_size``); ``yolo3 train``'s flags are those names (``--batch-size``) and read
their defaults here. :func:`check` refuses values that cannot work with a
:class:`~yolo3.core.errors.SettingError` naming the settings; the command line words them as its
flags.

Plain Python, no TensorFlow: ``yolo3 train --help`` stays fast.
"""
from __future__ import annotations

import dataclasses
import difflib
import math
import numbers
import os
import typing
from dataclasses import dataclass
from typing import (
    Any,
    Callable,
    Dict,
    List,
    Literal,
    Mapping,
    NamedTuple,
    Optional,
    Tuple,
    Union,
)

from yolo3.config.choices import (
    AUGMENT_PRESETS,
    AUTO_ANCHORS,
    AUTO_BATCH,
    AUTO_CLASS_WEIGHTS,
    AUTO_TILE,
    BOX_LOSSES,
    CLASS_WEIGHT_METHODS,
    JIT_CHOICES,
    OBJECTNESS_TARGETS,
    OPTIMIZERS,
    PIPELINES,
    IMAGE_CACHES,
    AUGMENT_SITES,
    DATA_FEEDS,
    SCHEDULES,
    STRATEGIES,
    TRACKERS,
    TRAINING_PRECISIONS,
)
from yolo3.config.specs import get_spec
from yolo3.core.errors import SettingError, Yolo3Error
from yolo3.core.extras import install_hint, installed
from yolo3.core.value_types import conforms, describe, from_text

__all__ = ["TrainConfig", "DataSettings", "ModelSettings", "RecipeSettings", "ScheduleSettings",
           "HardwareSettings", "OutputSettings", "SECTIONS", "default", "check", "Caution",
           "cautions", "parse_setting", "ANCHOR_HEAD_SETTINGS", "ConfigError", "check_value",
           "VALUE_RULES", "RANGES", "Range", "LOSS_RANGES", "canonical_setting", "setting_types",
           "CHOICES", "no_such_setting"]


@dataclass
class DataSettings:
    """What to learn from: annotations, classes, anchors, validation split and augmentation."""

    annotations: str = ""
    classes: str = ""  # optional with data_file (its names)
    # a data.yaml (Ultralytics) or obj.data (Darknet): the train and val sources and the class
    # names, in place of annotations, val_annotations and classes
    data_file: Optional[str] = None
    val_annotations: Optional[str] = None
    val_split: float = 0.1  # held out of ``annotations`` when ``val_annotations`` is not given
    anchors: Optional[str] = None  # a file; "auto": k-means on the training boxes; None: COCO's
    max_boxes: int = 100  # ground-truth boxes kept per image (the loss's static padding)
    strict: bool = False  # refuse invalid boxes instead of dropping them with a warning
    # AugmentConfig preset: full, light or none; light: best of the three on short runs of a few
    # hundred images (docs/benchmarks.md, "Run-to-run spread"); full for long runs
    augment: str = "light"
    mosaic: float = 0.0  # probability of a 4-image mosaic per training image
    multi_scale: Optional[Tuple[int, int]] = None  # (MIN, MAX): random multiple of the largest stride
    multi_scale_every: int = 10  # steps between two size changes
    # tiled training (yolo3.data.tiling): windows of this many pixels cut at native resolution
    # around objects, and sliced validation (yolo3.inference.tiled); "auto": the size yolo3
    # check suggests from the boxes (yolo3.ops.tiles.suggest_tile); None: whole images
    tile: Optional[Union[int, str]] = None
    tile_whole: float = 0.25  # share of training images kept whole
    tile_background: float = 0.1  # share of windows drawn anywhere, not around an object
    # objects of at least this side (px) at the whole-image resize train on, and are detected
    # from, the whole image (yolo3.data.planner.draw_tile_window, yolo3.inference.tiled);
    # 0: every object drawn gets a window (the recipe before issue 55); 6: yolo3.ops.tiles'
    # WHOLE_SEES
    tile_whole_from: float = 6.0
    tile_overlap: float = 0.2  # sliced validation: the share of a tile its neighbours overlap
    # repeat-factor sampling (LVIS): images with a class present in fewer than this share of the
    # images repeat, by sqrt(threshold / share); 0: every image once
    repeat_threshold: float = 0.0
    # the input pipeline (yolo3.training.datasets.pick_pipeline): auto (tf.data where TensorFlow
    # imports, else NumPy/OpenCV), tf or numpy; data_workers: the NumPy pipeline's threads (0: one
    # per core, at most 32)
    pipeline: str = "auto"
    data_workers: int = 0
    # who makes the numpy pipeline's training batches (yolo3.training.datasets.pick_feed): auto,
    # threads, or processes (shared memory, yolo3.data.feeds)
    data_feed: str = "auto"
    # the numpy pipeline's decoded-image cache: none, ram or disk (yolo3.data.image_cache), or
    # device (kept on the accelerator, placed and coloured there: yolo3.data.device_cache)
    cache: str = "none"
    # where the colours and the scaling to [0, 1] run (yolo3.training.datasets.pick_augment_site):
    # auto (the device where there is an accelerator and the numpy pipeline), host or device
    augment_on: str = "auto"


@dataclass
class ModelSettings:
    """What to train: the variant at its input size, the initial weights, how layers start."""

    variant: str = "yolov3"
    input_size: Union[int, Tuple[int, int]] = 416  # one side (square) or (height, width)
    weights: Optional[str] = None  # converted Darknet or a checkpoint; layers matched by name
    prior_bias: bool = True  # new output layers start at the data's objectness and class priors
    # output layers of another class count in ``weights`` lend their box and objectness channels:
    # fine-tuning gains (docs/benchmarks.md, "Output layers that keep COCO's box and objectness")
    head_transfer: bool = True
    freeze_bn: bool = False  # every batch norm frozen in inference mode
    bn_momentum: Optional[float] = None  # the batch norms' moving-average momentum; None: 0.99


@dataclass
class RecipeSettings:
    """How to train: optimiser, regularisation, loss, precision and XLA."""

    optimizer: str = "adam"  # adam or sgd (momentum 0.937, Nesterov)
    lr: Optional[float] = None  # None: the optimiser's default (recipe.DEFAULT_LR)
    weight_decay: float = 5e-4  # decoupled; never on batch-norm or biases
    ema: bool = True  # checkpoints and evaluation use the exponential moving average of the weights
    ema_momentum: Optional[float] = None  # None: from the run's length (recipe.auto_ema_momentum)
    box_loss: str = "ciou"  # mse (keras-yolo3's), giou, diou or ciou
    label_smoothing: float = 0.0
    # the confidence target of a positive: one (Darknet's, keras-yolo3's) or the IoU of its
    # predicted box with the true box (YOLOv5's): scores that rank detections by placement, better
    # or level on every set tried (docs/benchmarks.md, "Run-to-run spread")
    objectness: str = "iou"
    # weights of the box terms and the class term against the confidence term (1, 1: keras-yolo3's
    # balance)
    box_gain: float = 1.0
    class_gain: float = 1.0
    # rare classes: each positive's loss weighted by its class (yolo3.ops.class_balance): None
    # (off), a method computed from the training boxes (inverse, sqrt, effective; auto:
    # effective), or a file of weights
    class_weights: Optional[str] = None
    focal_gamma: float = 0.0  # the class loss's focal exponent (0: plain cross-entropy)
    # each box is also a positive on every other anchor whose shape IoU with it exceeds this
    # (Darknet's iou_thresh); 1: only its best anchor (keras-yolo3); 0.35: the best of the values
    # tried (docs/benchmarks.md, "Several anchors per box")
    assign_iou: float = 0.35
    # a prediction that is not a positive but overlaps a true box by more than this IoU is left
    # out of the confidence loss (Darknet's ignore_thresh; keras-yolo3's 0.5)
    ignore_iou: float = 0.5
    # batch-norm statistics recomputed with the evaluated weights over this many training images
    # before each validation and save (yolo3.training.bn_statistics); 0: Keras's moving averages
    bn_stats_images: int = 256
    precision: str = "auto"  # auto, float32, mixed_bfloat16 or mixed_float16
    jit: str = "auto"  # XLA for the training step: auto (GPUs), on or off


@dataclass
class ScheduleSettings:
    """How long: epochs and stages, the learning-rate schedule, evaluation and early stopping."""

    epochs: int = 10  # in all, including the frozen stage
    freeze_epochs: int = 0  # stage 1: the backbone_* layers frozen
    schedule: str = "cosine"  # cosine (warm-up, then cosine decay per stage) or plateau
    warmup_epochs: float = 1.0
    steps_per_epoch: Optional[int] = None  # None: one pass over the data
    validation_steps: Optional[int] = None  # None: all of the validation set
    eval_every: Optional[int] = None  # epochs between mAP evaluations; None: auto; 0: never
    patience: int = 0  # stop after this many evaluations without a better mAP@0.5:0.95; 0: never


@dataclass
class HardwareSettings:
    """Where: images per replica, and the replicas (GPUs, logical CPUs) and how they cooperate."""

    # per replica; the global batch is this times the replicas. AUTO_BATCH ("auto"): the largest
    # on a ladder whose training step fits a share of the device's memory
    # (yolo3.training.batch_size), decided before training starts
    batch_size: Union[int, Literal["auto"]] = 8
    gpus: int = 0
    cpu_replicas: int = 0
    strategy: str = "wrapper"  # wrapper, mirrored or multiworker
    # JAX's wrapper: each replica normalises by its own slice (as TensorFlow's wrapper does) and
    # a step makes one flat all-reduce (yolo3.training.jax_parallel); False: the global batch's
    # statistics, exactly one device's on the same batch
    replica_batch_norm: bool = False
    # several processes on JAX (yolo3.training.jax_cluster): "" one process; "HOST:PORT" where
    # process 0 listens, with num_processes and process_id; "auto": what jax.distributed detects
    # (SLURM, Open MPI, Kubernetes ...)
    coordinator: str = ""
    num_processes: Optional[int] = None
    process_id: Optional[int] = None
    cluster_timeout: int = 300  # seconds the processes wait for each other to start


@dataclass
class OutputSettings:
    """What the run writes and says: its folder, resuming in it, progress bars, pictures."""

    output_dir: str = ""
    resume: bool = False
    # write into an output folder holding files yolo3 did not write (kept, never replaced)
    exist_ok: bool = False
    verbose: int = 1
    # labels.png, train_batch*.jpg, results.png and val_gallery.png in the run folder
    pictures: bool = True
    # an experiment tracker the run is also logged to (TRACKERS): settings, every epoch's values,
    # the pictures, report, history and final model
    tracker: str = "none"


SECTIONS = {"data": DataSettings, "model": ModelSettings, "recipe": RecipeSettings,
            "schedule": ScheduleSettings, "hardware": HardwareSettings, "output": OutputSettings}
# flat names that are not the setting's own: the output folder is ``--output``; ``model`` was the
# variant's name before 1.3 (``TrainConfig(model="tiny")`` still works)
_FLAT_ALIASES = {"output": "output_dir", "model": "variant", "data": "data_file"}


def _setting_sections() -> Dict[str, str]:
    return {f.name: section for section, cls in SECTIONS.items() for f in dataclasses.fields(cls)}


@dataclass(init=False)
class TrainConfig:
    """Everything :func:`yolo3.training.train.train` needs, in sections; :attr:`seed` seeds all.

    ``TrainConfig(data=DataSettings(...), model=ModelSettings(...), ...)``, or with the settings by
    name: ``TrainConfig(annotations=..., classes=..., output=..., batch_size=16)`` (each goes to its
    section; ``output`` is the output folder).
    """

    data: DataSettings
    model: ModelSettings
    recipe: RecipeSettings
    schedule: ScheduleSettings  # its setting ``schedule`` is config.schedule.schedule
    hardware: HardwareSettings
    output: OutputSettings
    seed: int = 0

    def __init__(self, data: Optional[DataSettings] = None, model: Any = None,
                 recipe: Optional[RecipeSettings] = None, schedule: Optional[ScheduleSettings] = None,
                 hardware: Optional[HardwareSettings] = None, output: Any = None, seed: int = 0,
                 **settings: Any):
        flat: Dict[str, Any] = dict(settings)
        given = {"data": data, "model": model, "recipe": recipe, "schedule": schedule,
                 "hardware": hardware, "output": output}
        for name, value in list(given.items()):
            # a setting that shares its name with a section (schedule) or spells one of its
            # settings (model: the variant, output: the output folder)
            if value is not None and not isinstance(value, SECTIONS[name]):
                flat[name], given[name] = value, None
        if isinstance(flat.get("output"), os.PathLike):
            flat["output"] = os.fspath(flat["output"])
        per_section: Dict[str, Dict[str, Any]] = {name: {} for name in SECTIONS}
        owners = _setting_sections()
        for name, value in flat.items():
            name = _FLAT_ALIASES.get(name, name)
            if name not in owners:
                raise TypeError(f"TrainConfig has no setting {name!r}")
            per_section[owners[name]][name] = value
        for name, cls in SECTIONS.items():
            section = given[name] if given[name] is not None else cls()
            if per_section[name]:
                section = dataclasses.replace(section, **per_section[name])
            setattr(self, name, section)
        self.seed = int(seed)

    def settings(self) -> Dict[str, Any]:
        """Every setting by its name (``{'batch_size': 8, ...}``), and ``seed``."""
        flat = {f.name: getattr(getattr(self, section), f.name)
                for section, cls in SECTIONS.items() for f in dataclasses.fields(cls)}
        flat["seed"] = self.seed
        return flat

    def replaced(self, **settings: Any) -> "TrainConfig":
        """A copy with ``settings`` (by name) changed."""
        return type(self).from_settings({**self.settings(), **settings})

    @classmethod
    def from_settings(cls, settings: Mapping[str, Any]) -> "TrainConfig":
        """A config from settings by name (the parsed command line's ``vars(args)``); names that are
        not settings (``quiet``, ``debug`` ...) are ignored."""
        owners = _setting_sections()
        known = {k: v for k, v in settings.items()
                 if _FLAT_ALIASES.get(k, k) in owners or k == "seed"}
        return cls(**known)


def default(name: str) -> Any:
    """The default of the setting ``name`` (``batch_size``, ``seed`` ...)."""
    if name == "seed":
        return 0
    name = _FLAT_ALIASES.get(name, name)
    owner = _setting_sections().get(name)
    if owner is None:
        raise KeyError(f"TrainConfig has no setting {name!r}")
    return next(f.default for f in dataclasses.fields(SECTIONS[owner]) if f.name == name)


def canonical_setting(name: str) -> str:
    """The setting's own name for ``name`` (``output`` -> ``output_dir``, ``model`` ->
    ``variant``)."""
    return _FLAT_ALIASES.get(name, name)


def setting_types() -> Dict[str, Any]:
    """Every setting's type hint by its name, and ``seed``'s."""
    return _type_hints()


def _type_hints() -> Dict[str, Any]:
    """Every setting's type hint by its name, and ``seed``'s."""
    hints: Dict[str, Any] = {"seed": int}
    for cls in SECTIONS.values():
        hints.update(typing.get_type_hints(cls))
    return hints


def no_such_setting(name: str) -> str:
    """The message for a name that is not a setting, with the closest one that is."""
    close = difflib.get_close_matches(name, list(_type_hints()), n=1)
    return f"no setting {name!r}" + (f" (did you mean {close[0]}?)" if close else "")


def parse_setting(name: str, text: str) -> Any:
    """The value of the setting ``name`` written as ``text`` (``parse_setting("ignore_iou", "0.7")``
    is 0.7; ``"true"``, ``"none"``, ``"[160, 224]"`` as the setting's type wants), for front ends
    that take settings as ``KEY=VALUE`` text. :class:`SettingError` for a name that is not a
    setting or a value that is not of its type."""
    hints = _type_hints()
    name = _FLAT_ALIASES.get(name, name)
    if name not in hints:
        raise SettingError(no_such_setting(name))
    try:
        return from_text(text, hints[name])
    except ValueError as e:
        raise SettingError(f"{name} {e}", name) from None


# ---------------------------------------------------------------------------------- the rules

class ConfigError(SettingError):
    """A training setting that cannot work: a missing file, a bad size, class ids beyond the list,
    a run folder that does not match ``resume`` (``settings`` names the settings concerned)."""


def check(config: TrainConfig) -> List[Caution]:
    """Refuse settings that cannot work (a missing file, a size the variant cannot take, a value
    out of range, two settings that contradict each other, a value of the wrong type):
    :class:`SettingError` naming them. Returns the :func:`cautions` of the settings it accepts, so
    one pass over ``config`` both refuses and cautions."""
    _check_types(config)
    _check_ranges(config)
    _check_data(config.data)
    _check_recipe(config.recipe)
    _check_schedule(config.schedule)
    _check_hardware(config.hardware)
    _check_output(config.output)
    _check_model(config.model, config.data)  # last: the only rule that asks the registry
    return cautions(config)


class Caution(NamedTuple):
    """A setting that is allowed but measured to ruin a run of this recipe, or that the run will
    not use: a message naming ``settings`` as the library knows them (a front end words them its
    own way, :func:`yolo3.core.errors.word_settings`)."""

    message: str
    settings: Tuple[str, ...]


# settings of the anchor head's loss and targets: an anchor-free variant does not use them
ANCHOR_HEAD_SETTINGS = ("anchors", "box_loss", "objectness", "assign_iou", "ignore_iou",
                        "label_smoothing")


def cautions(config: TrainConfig) -> List[Caution]:
    """The settings of ``config`` that are allowed but measured to ruin a run of this recipe, or
    that its variant does not use, for the caller to warn with; empty when there are none."""
    found = []
    settings = config.settings()
    unused = [name for name in ANCHOR_HEAD_SETTINGS
              if settings[name] != default(name)] if _anchor_free(config) else []
    if unused:
        found.append(Caution(
            f"{', '.join(unused)}: variant {config.model.variant} has an anchor-free head; "
            f"{'this setting is' if len(unused) == 1 else 'these settings are'} the anchor "
            "head's and not used", (*unused, "variant")))
    if config.model.freeze_bn:
        found.append(Caution(
            "freeze_bn: every batch norm stays frozen, so the network trains unnormalised; with "
            "this recipe every measured run diverged or learned a fraction of what it learns "
            "with batch norm, from scratch and fine-tuned, at every learning rate tried "
            "(docs/benchmarks.md: Frozen batch norm). Replicas need no frozen batch norm: each normalises its own "
            "slice, and the statistics are recomputed before every evaluation and save "
            "(bn_stats_images)", ("freeze_bn", "bn_stats_images")))
    if config.recipe.bn_stats_images == 0:
        found.append(Caution(
            "bn_stats_images=0: the evaluated and saved models normalise with the batch norms' "
            "moving averages, which lag behind the weights; measured on realistic sets: mAP near "
            "0 at global batch 16 and above in 10-epoch runs (docs/benchmarks.md: Batch size "
            "on realistic data)", ("bn_stats_images",)))
    return found


def _anchor_free(config: TrainConfig) -> bool:
    try:
        return get_spec(config.model.variant).anchor_free
    except Yolo3Error:  # check() names an unknown variant
        return False


def _check_types(config: TrainConfig) -> None:
    hints = _type_hints()
    for name, value in config.settings().items():
        _need(conforms(value, hints[name]),
              f"{name} must be {describe(hints[name])}, got {value!r}", name)


def _finite(value: Any) -> bool:
    """A finite real number (NumPy's too), not a bool."""
    return (isinstance(value, numbers.Real) and not isinstance(value, bool)
            and math.isfinite(float(value)))


@dataclass(frozen=True)
class Range:
    """A numeric setting's range, declared once: the settings check (:data:`VALUE_RULES`) and
    the command line's flag (``yolo3.cli.flags.Number.within``) both read it."""

    lo: float
    hi: float
    lo_open: bool = False
    hi_open: bool = False
    note: str = ""  # what a value means, said with the rule
    kind: type = float  # int: a whole number
    words: Tuple[str, ...] = ()  # literal words taken beside the numbers ("auto")

    def holds(self, value: Any) -> bool:
        if not _finite(value) or (self.kind is int and value != int(value)):
            return False
        above = value > self.lo if self.lo_open else value >= self.lo
        below = value < self.hi if self.hi_open else value <= self.hi
        return above and below

    def describe(self) -> str:
        def shown(v: float) -> str:
            return str(int(v)) if float(v).is_integer() else f"{v:g}"
        if self.lo_open and self.lo == 0 and not self.hi_open and self.hi >= 100:
            text = f"must be a positive number up to {shown(self.hi)}"
        else:
            text = (f"must be in {'(' if self.lo_open else '['}{shown(self.lo)}, {shown(self.hi)}"
                    f"{')' if self.hi_open else ']'}")
        if self.words:
            text += f" or {' or '.join(self.words)}"
        return f"{text} ({self.note})" if self.note else text


_EPOCHS, _STEPS = 100_000, 10_000_000
# the numeric settings' ranges, one declaration each: check() refuses a value outside (None:
# the setting's default), and each setting's flag (yolo3.cli.flags.Number.within) parses by it.
# What depends on another setting (freeze_epochs <= epochs, val_split without val_annotations,
# the input size's multiple) stays a rule of check().
RANGES: Dict[str, Range] = {
    # the loss's and the target encoding's own (VALUE_RULES)
    "assign_iou": Range(0, 1, lo_open=True, note="1: only the best anchor"),
    "ignore_iou": Range(0, 1, lo_open=True),
    "box_gain": Range(0, 1000, lo_open=True),
    "class_gain": Range(0, 1000, lo_open=True),
    "label_smoothing": Range(0, 1, hi_open=True),
    "focal_gamma": Range(0, 5, note="0: plain cross-entropy"),
    # data
    "val_split": Range(0, 1, hi_open=True),
    "max_boxes": Range(1, 10_000, kind=int),
    "mosaic": Range(0, 1, note="a probability"),
    "data_workers": Range(0, 256, note="0: one per core", kind=int),
    "multi_scale_every": Range(1, _STEPS, kind=int),
    "tile_whole": Range(0, 1),
    "tile_background": Range(0, 1),
    "tile_whole_from": Range(0, 16_384, note="pixels at the input"),
    "tile_overlap": Range(0, 0.75),
    "repeat_threshold": Range(0, 1, note="0: off"),
    # recipe
    "lr": Range(0, 10, lo_open=True),
    "weight_decay": Range(0, 1),
    "ema_momentum": Range(0, 1, lo_open=True, hi_open=True),
    "bn_stats_images": Range(0, _STEPS, note="0: the moving averages", kind=int),
    "bn_momentum": Range(0, 1, hi_open=True),
    # schedule
    "epochs": Range(1, _EPOCHS, kind=int),
    "freeze_epochs": Range(0, _EPOCHS, kind=int),
    "warmup_epochs": Range(0, _EPOCHS),
    "steps_per_epoch": Range(1, _STEPS, note="default: all", kind=int),
    "validation_steps": Range(1, _STEPS, note="default: all", kind=int),
    "eval_every": Range(0, _EPOCHS, note="0: no evaluation", kind=int),
    "patience": Range(0, _EPOCHS, note="0: none", kind=int),
    "seed": Range(0, 2**32 - 1, kind=int),
    # hardware
    "batch_size": Range(1, 4096, kind=int, words=(AUTO_BATCH,)),
    "gpus": Range(0, 1024, kind=int),
    "num_processes": Range(1, 65_536, kind=int),
    "process_id": Range(0, 65_535, kind=int),
    "cluster_timeout": Range(1, 86_400, note="seconds", kind=int),
}
LOSS_RANGES = ("assign_iou", "ignore_iou", "box_gain", "class_gain", "label_smoothing",
               "focal_gamma")

# the rules of the settings the loss and the target encoding take themselves (the one owner: the
# settings check, YoloLoss, AnchorFreeLoss and the target encoding all ask check_value)
VALUE_RULES: Dict[str, Tuple[Callable[[Any], bool], str]] = {
    "box_loss": (lambda v: v in BOX_LOSSES, f"must be one of {', '.join(BOX_LOSSES)}"),
    "objectness": (lambda v: v in OBJECTNESS_TARGETS,
                   f"must be one of {', '.join(OBJECTNESS_TARGETS)}"),
    **{name: (RANGES[name].holds, RANGES[name].describe()) for name in LOSS_RANGES},
}


def check_value(setting: str, value: Any) -> Any:
    """``value`` when :data:`VALUE_RULES` allows it for ``setting``, else a SettingError naming
    the setting, the rule and the value; returns ``value``."""
    allowed, rule = VALUE_RULES[setting]
    if not allowed(value):
        shown = repr(value) if isinstance(value, str) else value
        raise SettingError(f"{setting} {rule}, got {shown}", setting)
    return value


def _need(condition: bool, message: str, *settings: str) -> None:
    if not condition:
        raise SettingError(message, *settings)


# the settings that take one of a list of words, declared once: check() and the search space
# (yolo3.config.settings_file) read it
CHOICES: Dict[str, Tuple[str, ...]] = {
    "augment": AUGMENT_PRESETS, "pipeline": PIPELINES, "optimizer": OPTIMIZERS,
    "precision": TRAINING_PRECISIONS, "jit": JIT_CHOICES, "schedule": SCHEDULES,
    "tracker": TRACKERS, "strategy": STRATEGIES, "box_loss": BOX_LOSSES,
    "objectness": OBJECTNESS_TARGETS, "cache": IMAGE_CACHES, "augment_on": AUGMENT_SITES,
    "data_feed": DATA_FEEDS,
}


def _one_of(value: Any, allowed: Tuple[str, ...], setting: str) -> None:
    _need(value in allowed, f"{setting} must be one of {', '.join(allowed)}, got {value!r}", setting)


def _check_ranges(config: TrainConfig) -> None:
    """Every setting of :data:`RANGES` inside its range (None: its default, decided later)."""
    settings = config.settings()
    for name, r in RANGES.items():
        value = settings[name]
        _need(value is None or value in r.words or r.holds(value),
              f"{name} {r.describe()}, got {value!r}", name)


def _exists(path: Optional[str], setting: str) -> None:
    _need(path is None or os.path.exists(path), f"{setting} not found: {path}", setting)


def _check_data(data: DataSettings) -> None:
    _need(bool(data.annotations) or bool(data.data_file),
          "nothing to train on: give annotations, or a data_file (data.yaml / obj.data)",
          "annotations", "data_file")
    _need(not (data.data_file and (data.annotations or data.val_annotations)),
          "data_file names the train and val sources: give it without annotations and "
          "val_annotations", "data_file", "annotations", "val_annotations")
    _need(bool(data.classes) or bool(data.data_file),
          "classes is needed with annotations (a data_file brings its names)", "classes",
          "annotations", "data_file")
    for setting in ("annotations", "val_annotations", "classes", "anchors", "data_file"):
        value = getattr(data, setting) or None
        _exists(None if setting == "anchors" and value == AUTO_ANCHORS else value, setting)
    _need(bool(data.val_annotations) or bool(data.data_file) or 0 < data.val_split < 1,
          f"val_split must be in (0, 1) without val_annotations, got {data.val_split}",
          "val_split", "val_annotations")
    _one_of(data.augment, CHOICES["augment"], "augment")
    _need(not (data.mosaic and data.augment == "none"),
          "mosaic needs augmentation: it cannot go with augment none", "mosaic", "augment")
    _one_of(data.pipeline, CHOICES["pipeline"], "pipeline")
    _one_of(data.cache, CHOICES["cache"], "cache")
    _one_of(data.data_feed, CHOICES["data_feed"], "data_feed")
    _one_of(data.augment_on, CHOICES["augment_on"], "augment_on")
    _need(data.tile is None or data.tile == AUTO_TILE
          or (isinstance(data.tile, int) and not isinstance(data.tile, bool) and data.tile >= 32),
          f"tile must be a size in pixels >= 32 or {AUTO_TILE}, got {data.tile!r}", "tile")


def _check_model(model: ModelSettings, data: DataSettings) -> None:
    _exists(model.weights, "weights")
    try:
        spec = get_spec(model.variant)
    except Yolo3Error as e:
        raise SettingError(f"variant: {e}", "variant") from None
    try:
        hw = spec.check_input_size(model.input_size)
    except Yolo3Error as e:
        raise SettingError(f"input_size: {e}", "input_size") from None
    if data.multi_scale:  # its shapes are multiples of the largest stride by construction
        try:
            spec.multi_scale_shapes(*data.multi_scale, hw)
        except Yolo3Error as e:
            raise SettingError(f"multi_scale: {e}", "multi_scale") from None


def _check_recipe(recipe: RecipeSettings) -> None:
    _one_of(recipe.optimizer, CHOICES["optimizer"], "optimizer")
    _one_of(recipe.precision, CHOICES["precision"], "precision")
    _one_of(recipe.jit, CHOICES["jit"], "jit")
    for setting in VALUE_RULES:
        check_value(setting, getattr(recipe, setting))
    weights = recipe.class_weights
    _need(weights is None or weights in (AUTO_CLASS_WEIGHTS, *CLASS_WEIGHT_METHODS)
          or os.path.isfile(weights),
          f"class_weights must be {AUTO_CLASS_WEIGHTS}, one of {', '.join(CLASS_WEIGHT_METHODS)} or a "
          f"file of weights, got {weights!r} (no such file)", "class_weights")


def _check_schedule(schedule: ScheduleSettings) -> None:
    _need(schedule.freeze_epochs <= schedule.epochs,
          f"need freeze_epochs ({schedule.freeze_epochs}) <= epochs ({schedule.epochs})",
          "freeze_epochs", "epochs")
    _one_of(schedule.schedule, CHOICES["schedule"], "schedule")
    _need(not (schedule.patience and schedule.eval_every == 0),
          "patience counts evaluations: it needs eval_every above 0", "patience", "eval_every")


def _check_output(output: OutputSettings) -> None:
    _one_of(output.tracker, CHOICES["tracker"], "tracker")
    if output.tracker != "none" and not installed(output.tracker):
        raise SettingError(f"tracker {output.tracker}: the package is not installed "
                           f"({install_hint(output.tracker)})", "tracker")


def _check_hardware(hardware: HardwareSettings) -> None:
    # each worker would measure its own device and could choose another batch than the others
    _need(not (hardware.batch_size == AUTO_BATCH and hardware.strategy == "multiworker"),
          "batch_size auto cannot go with strategy multiworker (each worker would choose on its "
          "own): give a number", "batch_size", "strategy")
    _need(hardware.cpu_replicas >= 0, f"cpu_replicas must be >= 0, got {hardware.cpu_replicas}",
          "cpu_replicas")
    _need(not (hardware.gpus and hardware.cpu_replicas),
          "give either gpus or cpu_replicas, not both", "gpus", "cpu_replicas")
    _one_of(hardware.strategy, CHOICES["strategy"], "strategy")
    _check_cluster(hardware)


def coordinator_address(coordinator: str) -> Tuple[str, int]:
    """``HOST:PORT`` (an IPv6 host in brackets) -> ``(host, port)``; SettingError naming
    ``coordinator`` for anything else."""
    host, _, port = coordinator.rpartition(":")
    _need(bool(host) and port.isdigit() and 0 < int(port) < 65536,
          f"coordinator must be HOST:PORT (e.g. 10.0.0.1:12355) or auto, got {coordinator!r}",
          "coordinator")
    return host.strip("[]"), int(port)


def _check_cluster(hardware: HardwareSettings) -> None:
    """The JAX cluster's settings: ``coordinator`` HOST:PORT with ``num_processes`` and a
    ``process_id`` below it, or ``auto`` (either may then be given); neither without it."""
    given = [n for n in ("num_processes", "process_id") if getattr(hardware, n) is not None]
    coordinator = hardware.coordinator
    if not coordinator:
        _need(not given, f"{' and '.join(given)} place this process in a cluster: they need "
              "coordinator (HOST:PORT, or auto)", *given, "coordinator")
        return
    _need(hardware.strategy == "wrapper", f"coordinator with strategy {hardware.strategy}: "
          "several processes on JAX split each batch with the wrapper (Keras's DataParallel); "
          "on TensorFlow use strategy multiworker with TF_CONFIG instead", "coordinator",
          "strategy")
    _need(hardware.batch_size != AUTO_BATCH, "batch_size auto cannot go with coordinator (each "
          "process would choose on its own): give a number", "batch_size", "coordinator")
    if coordinator == "auto":
        return
    coordinator_address(coordinator)
    missing = [n for n in ("num_processes", "process_id") if n not in given]
    _need(not missing, f"coordinator {coordinator} needs {' and '.join(missing)} (or "
          "coordinator auto, where the cluster's environment says them)", "coordinator", *missing)
    _need(hardware.process_id < hardware.num_processes,
          f"process_id {hardware.process_id} must be below num_processes "
          f"{hardware.num_processes} (processes count from 0)", "process_id", "num_processes")
