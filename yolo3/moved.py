"""The module paths of yolo3 0.3 and earlier, before its folders: each still imports, for one
release, with a DeprecationWarning naming the new path. A face: nothing inside yolo3 imports it but the package
itself, which installs :class:`OldPathFinder` (no TensorFlow: the new module loads when a name is
first asked for).

``from yolo3.train import train`` gives :func:`yolo3.training.train.train`; a module that was
split (``yolo3.train``, ``yolo3.runtimes``, ``yolo3.anchors``) finds each old name in the module
that now holds it (:data:`MOVED` lists them, the first being the module's new home).
"""
from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import sys
import types
import warnings
from typing import Dict, Tuple

_FOLDERS = {
    "core": "errors fileio paths log deprecation value_types file_cache",
    "config": "specs architectures choices train_config precision masks",
    "ops": "boxes box_ops letterbox decode targets anchor_free",
    "modeling": "blocks bodies loss anchor_free_loss batch_norm graph_surgery keras_compat "
                "schedules",
    "checkpoint": "metadata saving loading weights weight_names head_transfer tflite_metadata",
    "training": "callbacks recipe parallel distribute bn_statistics resume history",
    "inference": "detector engines video keras_yolo3_args",
    "evaluation": "diagnostics visualize",
    "compat": "keras_yolo3",
}
_TRAINING_STEPS = tuple(f"yolo3.training.{m}" for m in (
    "train", "data_step", "datasets", "placement", "run_folder", "models", "stages"))

# old module -> the modules holding its names now (the first is its new home)
MOVED: Dict[str, Tuple[str, ...]] = {
    **{f"yolo3.{name}": (f"yolo3.{folder}.{name}",)
       for folder, names in _FOLDERS.items() for name in names.split()},
    # the output priors went to the heads that give them; the gains' check to the options
    "yolo3.recipe": ("yolo3.training.recipe", "yolo3.config.anchor_free_head",
                     "yolo3.config.heads"),
    "yolo3.loss": ("yolo3.modeling.loss", "yolo3.config.loss_options"),
    "yolo3.ownership": ("yolo3.core.output_folder",),
    # each head kind owns its training model (yolo3.heads): 0.6's function is in the registry
    "yolo3.modeling.heads": ("yolo3.heads.registry",),
    # its TensorFlow twin wh_iou_tf went to the tf.data pipeline's target encoding
    "yolo3.box_ops": ("yolo3.ops.box_ops", "yolo3.ops.targets"),
    "yolo3.class_names": ("yolo3.data.class_names",),
    "yolo3.anchors": ("yolo3.ops.anchors", "yolo3.data.class_names"),
    "yolo3.schedules": ("yolo3.modeling.schedules",),
    "yolo3.train": (*_TRAINING_STEPS, "yolo3.config.train_config", "yolo3.modeling.schedules"),
    "yolo3.runtimes": ("yolo3.inference.runners", "yolo3.inference.exported",
                       "yolo3.inference.engines", "yolo3.inference.detector"),
    "yolo3.darknet.convert": ("yolo3.checkpoint.darknet_convert",),
    "yolo3.darknet.export": ("yolo3.export.darknet",),
    # two modules were named tracking.py: the scores took the name that says what they hold
    "yolo3.evaluation.tracking": ("yolo3.evaluation.track_scores",),
    # the planner of every training element (its draws, windows and boxes), named for its role
    "yolo3.data.draws": ("yolo3.data.planner",),
    # the output folder under the ownership rule (OutputFolder, check_output_folder ...)
    "yolo3.core.ownership": ("yolo3.core.output_folder",),
}
# yolo3.evaluation was a module and is now a folder: its __init__ serves the old names
EVALUATION_MODULE = "yolo3.evaluation.metrics"

__all__ = ["MOVED", "OldPathFinder", "OldModule", "install", "new_home", "EVALUATION_MODULE"]


def new_home(old: str) -> str:
    """Where the module ``old`` lives now."""
    return MOVED[old][0]


class OldModule(types.ModuleType):
    """An old module path: each name is looked up in the modules that hold it now."""

    def __getattr__(self, name: str):
        if name.startswith("__"):
            raise AttributeError(name)
        for module in MOVED[self.__name__]:
            target = importlib.import_module(module)
            if hasattr(target, name):
                return getattr(target, name)
        raise AttributeError(f"module {self.__name__!r} (now {new_home(self.__name__)}) has no "
                             f"attribute {name!r}")

    def __dir__(self):
        names = set()
        for module in MOVED[self.__name__]:
            names.update(dir(importlib.import_module(module)))
        return sorted(names)


class OldPathFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Finds the old module paths (after the real ones: a path that exists is never shadowed)."""

    def find_spec(self, fullname, path=None, target=None):
        if fullname not in MOVED:
            return None
        return importlib.util.spec_from_loader(fullname, self)

    def create_module(self, spec):
        return OldModule(spec.name)

    def exec_module(self, module) -> None:
        warnings.warn(f"{module.__name__} is now {new_home(module.__name__)}; the old path works "
                      "until the next release", DeprecationWarning, stacklevel=2)


def install() -> None:
    """Put one :class:`OldPathFinder` at the end of ``sys.meta_path``."""
    if not any(isinstance(finder, OldPathFinder) for finder in sys.meta_path):
        sys.meta_path.append(OldPathFinder())
