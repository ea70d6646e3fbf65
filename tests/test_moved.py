"""Every module path and name of yolo3 before its folders (tests/fixtures/release_0_2/
public_names.json, read off commit fef8968) still imports, for one release: a moved module with a
DeprecationWarning naming its new path, each of its names the very object at its new home; a
module that stayed keeps its names. yolo3's own code imports no old path."""
from __future__ import annotations

import importlib
import json
import subprocess
import sys
import warnings

import pytest
from locations import FIXTURES, REPO

from yolo3.moved import EVALUATION_MODULE, MOVED, new_home

OLD = json.loads((FIXTURES / "release_0_2" / "public_names.json").read_text(encoding="utf-8"))
MOVED_OLD = sorted(m for m in OLD if m in MOVED)
STAYED = sorted(m for m in OLD if m not in MOVED and m != "yolo3.evaluation")


def test_the_table_covers_every_module_that_is_gone():
    gone = []
    for module in OLD:
        if module in MOVED or module == "yolo3.evaluation":
            continue
        try:
            importlib.import_module(module)
        except ImportError:
            gone.append(module)
    assert not gone, f"old modules neither kept nor in yolo3.moved.MOVED: {gone}"
    # no entry for a module that never was (RENAMED_LATER: moved after 0.2, tested below)
    assert set(MOVED) <= set(OLD) | {"yolo3.schedules"} | set(RENAMED_LATER)


# modules renamed after release 0.2 -> names users may import from them
RENAMED_LATER = {"yolo3.evaluation.tracking": ["TRACK_METRICS", "track_metrics",
                                               "score_sequences", "combine_track_metrics",
                                               "sequence_data"],
                 "yolo3.data.draws": ["AugmentConfig", "AugmentDraw", "MultiScale",
                                      "TileSampling", "ElementPlan", "Planner", "draw_augment",
                                      "draw_tile_window", "window_boxes", "augment_boxes",
                                      "mosaic_boxes", "letterbox_boxes", "keep_larger_than",
                                      "pad_boxes_np"],
                 "yolo3.core.ownership": ["MARKER", "JOURNAL", "EXIST_OK", "OutputFolder",
                                          "check_output_folder", "as_output_folder",
                                          "write_output_folder", "folder_files",
                                          "written_by_yolo3", "check_side_files", "claim"],
                 # each head kind builds its own training model now (yolo3.heads)
                 "yolo3.modeling.heads": ["training_model"]}


@pytest.mark.parametrize("module", sorted(RENAMED_LATER))
def test_a_module_renamed_later_imports_with_a_warning_and_gives_the_same_objects(module):
    sys.modules.pop(module, None)
    with pytest.warns(DeprecationWarning, match=rf"{module} is now {new_home(module)}"):
        old = importlib.import_module(module)
    home = importlib.import_module(new_home(module))
    for name in RENAMED_LATER[module]:
        assert getattr(old, name) is getattr(home, name), f"{module}.{name}"


@pytest.mark.parametrize("module", MOVED_OLD)
def test_a_moved_module_imports_with_a_warning_and_gives_the_same_objects(module):
    sys.modules.pop(module, None)
    with pytest.warns(DeprecationWarning, match=rf"{module} is now {new_home(module)}"):
        old = importlib.import_module(module)
    homes = [importlib.import_module(m) for m in MOVED[module]]
    for name in OLD[module]:
        found = [getattr(home, name) for home in homes if hasattr(home, name)]
        assert found, f"{module}.{name} is nowhere now"
        assert getattr(old, name) is found[0], f"{module}.{name}"


def test_from_an_old_path_import_works_as_before():
    for module in ("yolo3.train", "yolo3.runtimes"):
        sys.modules.pop(module, None)
    with pytest.warns(DeprecationWarning):
        from yolo3.runtimes import ExportedDetector, load_detector  # noqa: F401
        from yolo3.train import TrainConfig, prepare_data, train  # noqa: F401
    from yolo3.inference.detector import load_detector as new
    assert load_detector is new and train.__module__ == "yolo3.training.train"
    assert prepare_data.__module__ == "yolo3.training.data_step"


def test_the_old_metrics_module_is_served_by_its_folder():
    metrics = importlib.import_module(EVALUATION_MODULE)
    import yolo3.evaluation as folder
    for name in OLD["yolo3.evaluation"]:
        with pytest.warns(DeprecationWarning, match=f"yolo3.evaluation.{name} is now"):
            assert getattr(folder, name) is getattr(metrics, name)


@pytest.mark.parametrize("module", STAYED)
def test_a_module_that_stayed_keeps_its_names(module):
    target = importlib.import_module(module)
    missing = [name for name in OLD[module] if not hasattr(target, name)]
    assert not missing, f"{module} lost {missing}"


def test_yolo3_itself_imports_no_old_path():
    """Importing every module of the package, the command line and its help, with every
    DeprecationWarning an error, in a fresh interpreter."""
    code = ("import importlib, pkgutil, warnings\n"
            "warnings.simplefilter('error', DeprecationWarning)\n"
            "import yolo3\n"
            "for m in pkgutil.walk_packages(yolo3.__path__, 'yolo3.'):\n"
            "    if not m.name.endswith('__main__'):\n"
            "        importlib.import_module(m.name)\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]


def test_the_finder_never_shadows_a_real_module():
    with warnings.catch_warnings():
        warnings.simplefilter("error", DeprecationWarning)
        import yolo3.data.annotations  # a real module: found by the normal finders first
        import yolo3.training.train  # noqa: F401
