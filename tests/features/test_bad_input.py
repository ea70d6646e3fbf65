"""Bad input across the commands: for each case the exit code, a message naming the path, no
traceback, and the output location byte-identical before and after (hashes)."""
from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Callable

import numpy as np
import pytest
from cli_harness import run_cli, snapshot
from locations import shared
from PIL import Image

from yolo3.cli import main as yolo3_main


@pytest.fixture(scope="module")
def world(trained_world):
    """A small dataset and one trained run (custom anchors, 64 px) to damage (copies only)."""
    return trained_world


def _train(world, out, *extra):
    d = world["data"]
    return ["train", "--annotations", d / "train.txt", "--val-annotations", d / "val.txt",
            "--classes", d / "classes.txt", "--variant", "tiny", "--input-size", "64",
            "--batch-size", "2", "--epochs", "1", "--freeze-epochs", "0", "--output", out,
            "--no-augment", "--quiet", "--anchors", world["anchors"], *extra]


def _copy_run(world, tmp_path) -> Path:
    out = tmp_path / "run"
    shutil.copytree(world["run"], out)
    return out


# Each case: (name, builder(world, tmp_path) -> (argv, watched paths), exit code, text in message)
Builder = Callable[[dict, Path], tuple]


def _five_classes(world, tmp_path):
    out = _copy_run(world, tmp_path)
    classes = tmp_path / "five.txt"
    classes.write_text("a\nb\nc\nd\ne\n")
    argv = _train(world, out, "--resume")
    argv[argv.index("--classes") + 1] = classes
    return argv, [out], str(out / "classes.txt")


def _big_batch(world, tmp_path):
    out = _copy_run(world, tmp_path)
    argv = _train(world, out)
    argv[argv.index("--batch-size") + 1] = "64"
    return argv, [out], "fewer than one global batch"


def _other_anchors_resume(world, tmp_path):
    out = _copy_run(world, tmp_path)
    argv = _train(world, out, "--resume")
    i = argv.index("--anchors")
    del argv[i:i + 2]  # the default anchors, not the run's
    return argv, [out], str(out / "anchors.txt")


def _corrupt_resume_json(world, tmp_path):
    out = _copy_run(world, tmp_path)
    (out / "resume.json").write_text("{not json")
    return _train(world, out, "--resume"), [out], str(out / "resume.json")


def _train_with_anchors(world, tmp_path, out: Path, text: str):
    anchors = tmp_path / "given_anchors.txt"
    anchors.write_text(text)
    argv = _train(world, out)
    argv[argv.index("--anchors") + 1] = anchors
    return argv, [out], str(anchors)


def _five_anchor_pairs(world, tmp_path):
    return _train_with_anchors(world, tmp_path, _copy_run(world, tmp_path),
                               "5,6, 9,10, 14,15, 20,22, 30,28\n")


def _tiny_with_nine(world, tmp_path):
    return _train_with_anchors(world, tmp_path, tmp_path / "new", "10,13, 16,30, 33,23, 30,61, "
                               "62,45, 59,119, 116,90, 156,198, 373,326\n")


def _weights_text(world, tmp_path):
    out = _copy_run(world, tmp_path)
    text = tmp_path / "weights.keras"
    text.write_text("this is not a model\n")
    return _train(world, out, "--weights", text), [out], str(text)


def _weights_half_written(world, tmp_path):
    out = tmp_path / "new"
    half = tmp_path / "half.keras"
    data = (world["run"] / "final.keras").read_bytes()
    half.write_bytes(data[:len(data) // 2])
    return _train(world, out, "--weights", half), [out], str(half)


def _output_is_file(world, tmp_path):
    out = tmp_path / "afile"
    out.write_text("keep me\n")
    return _train(world, out), [out], str(out)


def _numpy_multi_scale_on_tensorflow(world, tmp_path):
    runs = tmp_path / "runs"
    runs.mkdir()  # the new run's folder is never made
    return (_train(world, runs / "new", "--pipeline", "numpy", "--multi-scale", "64", "128"),
            [runs], "--pipeline numpy with --multi-scale on the TensorFlow backend")


def _bad_image(kind: str) -> Builder:
    def build(world, tmp_path):
        data = tmp_path / "data"
        shutil.copytree(world["data"], data)
        first = (data / "train.txt").read_text().splitlines()[0].split()[0]
        image = data / first
        if kind == "truncated":
            raw = image.read_bytes()
            image.write_bytes(raw[:len(raw) // 3])
        else:  # a TIFF under the annotated name's stem
            tiff = image.with_suffix(".tif")
            Image.open(image).save(tiff)
            text = (data / "train.txt").read_text().replace(
                first, str(Path(first).with_suffix(".tif")), 1)
            (data / "train.txt").write_text(text)
            image = tiff
        out = tmp_path / "new"
        argv = _train(world, out)
        argv[argv.index("--annotations") + 1] = data / "train.txt"
        return argv, [out], str(image)
    return build


def _detect_into_input_folder(world, tmp_path):
    images = tmp_path / "photos"
    images.mkdir()
    for p in sorted(world["data"].glob("images/*"))[:2]:
        shutil.copy(p, images)
    return (["detect", "--model", world["run"] / "final.keras", "--input", images, "--output",
             images], [images], str(images))


def _detect_output_is_file(world, tmp_path):
    out = tmp_path / "out.jpg"
    out.write_text("x")
    image = sorted(world["data"].glob("images/*"))[0]
    return (["detect", "--model", world["run"] / "final.keras", "--input", image, "--output", out],
            [out], str(out))


def _detect_json_is_input(world, tmp_path):
    image = tmp_path / "one.jpg"
    shutil.copy(sorted(world["data"].glob("images/*"))[0], image)
    return (["detect", "--model", world["run"] / "final.keras", "--input", image, "--output",
             tmp_path / "o", "--json", image], [image, tmp_path / "o"], str(image))


def _detect_anchors_do_not_fit(world, tmp_path):
    five = tmp_path / "five.txt"
    five.write_text("5,6, 9,10, 14,15, 20,22, 30,28\n")
    image = sorted(world["data"].glob("images/*"))[0]
    return (["detect", "--model", world["run"] / "final.keras", "--anchors", five, "--input", image,
             "--output", tmp_path / "o"], [tmp_path / "o"], str(five))


def _evaluate_out_is_annotations(world, tmp_path):
    ann = tmp_path / "val.txt"
    shutil.copy(world["data"] / "val.txt", ann)
    text = ann.read_text()
    ann.write_text(text.replace("images/", str(world["data"] / "images") + "/"))
    return (["evaluate", "--annotations", ann, "--model", world["run"] / "final.keras", "--out", ann],
            [ann], str(ann))


def _detections(tmp_path, entries) -> Path:
    path = tmp_path / "dets.json"
    path.write_text(json.dumps(entries))
    return path


def _evaluate_nan_scores(world, tmp_path):
    image = str(world["data"] / (world["data"] / "val.txt").read_text().split()[0])
    dets = _detections(tmp_path, [{"image": image, "boxes": [[1, 1, 20, 20]], "scores": [float("nan")],
                                   "classes": [0]}])
    return (["evaluate", "--annotations", world["data"] / "val.txt", "--classes",
             world["data"] / "classes.txt", "--detections", dets, "--out", tmp_path / "e.json"],
            [tmp_path / "e.json"], str(dets))


def _evaluate_nothing_matches(world, tmp_path):
    dets = _detections(tmp_path, [{"image": "elsewhere/x.jpg", "boxes": [[1, 1, 20, 20]],
                                   "scores": [0.9], "classes": [0]}])
    return (["evaluate", "--annotations", world["data"] / "val.txt", "--classes",
             world["data"] / "classes.txt", "--detections", dets, "--out", tmp_path / "e.json"],
            [tmp_path / "e.json"], str(dets))


def _evaluate_out_is_folder(world, tmp_path):
    out = tmp_path / "folder"
    out.mkdir()
    return (["evaluate", "--annotations", world["data"] / "val.txt", "--model",
             world["run"] / "final.keras", "--out", out], [out], str(out))


def _export_over_model(world, tmp_path):
    model = tmp_path / "m.keras"
    shutil.copy(world["run"] / "final.keras", model)
    return ["export", "--model", model, "--tflite", model], [model], str(model)


def _export_saved_model_is_file(world, tmp_path):
    out = tmp_path / "sm"
    out.write_text("x")
    return (["export", "--model", world["run"] / "final.keras", "--saved-model", out], [out],
            str(out))


def _kmeans_zero_clusters(world, tmp_path):
    return (["kmeans", "--annotations", world["data"] / "train.txt", "--clusters", "0", "--out",
             tmp_path / "a.txt"], [tmp_path / "a.txt"], "--clusters")


def _kmeans_out_is_folder(world, tmp_path):
    return (["kmeans", "--annotations", world["data"] / "train.txt", "--clusters", "3", "--out",
             tmp_path], [tmp_path], str(tmp_path))


def _coco_duplicate_names(world, tmp_path):
    coco = tmp_path / "coco.json"
    coco.write_text(json.dumps({"images": [], "annotations": [], "categories": [
        {"id": 1, "name": "car"}, {"id": 2, "name": "bus"}, {"id": 3, "name": "car"}]}))
    return (["coco", "--annotations", coco, "--images", tmp_path, "--out", tmp_path / "ann.txt",
             "--classes-out",
             tmp_path / "classes.txt"], [tmp_path / "ann.txt", tmp_path / "classes.txt"], str(coco))


def _coco_out_is_folder(world, tmp_path):
    coco = tmp_path / "coco.json"
    coco.write_text(json.dumps({"images": [], "annotations": [], "categories": [{"id": 1, "name": "a"}]}))
    return (["coco", "--annotations", coco, "--images", tmp_path, "--out", tmp_path], [tmp_path],
            str(tmp_path))


def _check_draw_dir_is_file(world, tmp_path):
    out = tmp_path / "drawn"
    out.write_text("x")
    return (["check", "--annotations", world["data"] / "train.txt", "--classes",
             world["data"] / "classes.txt", "--draw", "2", "--draw-dir", out], [out], str(out))


def _check_truncated(world, tmp_path):
    argv, _, image = _bad_image("truncated")(world, tmp_path)
    ann = argv[argv.index("--annotations") + 1]
    return (["check", "--annotations", ann, "--classes", world["data"] / "classes.txt"],
            [tmp_path / "data"], image)


def _convert_cfg_is_folder(world, tmp_path):
    return (["convert", world["run"] / "final.keras", tmp_path, tmp_path / "x.weights"], [tmp_path],
            str(tmp_path))


def _convert_over_the_weights(world, tmp_path):
    darknet = shared("darknet")
    weights = tmp_path / "yolov3-tiny.weights"
    weights.write_bytes(b"\0" * 64)
    return (["convert", darknet / "yolov3-tiny.cfg", weights, weights], [weights], str(weights))


def _plot_over_history(world, tmp_path):
    history = tmp_path / "history.csv"
    shutil.copy(world["run"] / "history.csv", history)
    return ["plot", "--history", history, "--out", history], [history], str(history)


def _synth_out_is_file(world, tmp_path):
    out = tmp_path / "data"
    out.write_text("x")
    return ["synth", "--out", out, "--num-images", "2"], [out], str(out)


CASES = [
    ("train: --resume with another class list", _five_classes, 2),
    ("train: batch larger than the data", _big_batch, 2),
    ("train: --resume with other anchors", _other_anchors_resume, 2),
    ("train: corrupt resume.json", _corrupt_resume_json, 2),
    ("train: 5 anchor pairs", _five_anchor_pairs, 2),
    ("train: tiny with 9 anchors", _tiny_with_nine, 2),
    ("train: --weights is text", _weights_text, 2),
    ("train: --weights half-written", _weights_half_written, 2),
    ("train: --output is a file", _output_is_file, 2),
    ("train: --pipeline numpy with --multi-scale on TensorFlow", _numpy_multi_scale_on_tensorflow,
     2),
    ("train: truncated JPEG", _bad_image("truncated"), 2),
    ("train: TIFF image", _bad_image("tiff"), 2),
    ("detect: --output is the input folder", _detect_into_input_folder, 2),
    ("detect: --output is a file", _detect_output_is_file, 2),
    ("detect: --json is an input", _detect_json_is_input, 2),
    ("detect: anchors do not fit the model", _detect_anchors_do_not_fit, 2),
    ("evaluate: --out is the annotations", _evaluate_out_is_annotations, 2),
    ("evaluate: NaN scores", _evaluate_nan_scores, 2),
    ("evaluate: no detection matches an image", _evaluate_nothing_matches, 1),
    ("evaluate: --out is a folder", _evaluate_out_is_folder, 2),
    ("export: --tflite over the model", _export_over_model, 2),
    ("export: --saved-model is a file", _export_saved_model_is_file, 2),
    ("kmeans: --clusters 0", _kmeans_zero_clusters, 2),
    ("kmeans: --out is a folder", _kmeans_out_is_folder, 2),
    ("coco: repeated category names", _coco_duplicate_names, 2),
    ("coco: --out is a folder", _coco_out_is_folder, 2),
    ("check: --draw-dir is a file", _check_draw_dir_is_file, 2),
    ("check: truncated JPEG", _check_truncated, 1),
    ("convert: OUT.cfg is a folder", _convert_cfg_is_folder, 2),
    ("convert: OUT is the weights", _convert_over_the_weights, 2),
    ("plot: --out is the history", _plot_over_history, 2),
    ("synth: --out is a file", _synth_out_is_file, 2),
]


@pytest.mark.parametrize("name,build,expected", CASES, ids=[c[0] for c in CASES])
def test_bad_input_is_refused_and_nothing_changes(world, tmp_path, capsys, monkeypatch, name, build,
                                                  expected):
    monkeypatch.setenv("YOLO3_CACHE_DIR", str(tmp_path / "cache"))
    argv, watched, named = build(world, tmp_path)
    before = snapshot(*watched)
    inputs_before = snapshot(world["run"], world["data"])
    code, err = run_cli(argv, capsys)
    assert code == expected, err
    assert f"yolo3 {argv[0]}: error: " in err and "Traceback" not in err, err
    assert named in err, err
    assert snapshot(*watched) == before
    assert snapshot(world["run"], world["data"]) == inputs_before


@pytest.mark.slow  # CI runs it (.ci/run); moved out of the default suite (15 minutes) when issue 67's tests came in: 12 s; tests/training/test_callbacks.py keeps the NaN epochs
def test_nan_without_a_good_checkpoint_writes_no_final_model(world, tmp_path, capsys):
    """Weights that are not finite (a damaged checkpoint) give a NaN loss at the first batch:
    training stops, and no final or best model is written."""
    import numpy as np

    from yolo3.checkpoint.saving import atomic_save_weights, load_keras_model
    body, _ = load_keras_model(world["run"] / "final.keras")
    layer = next(l for l in body.layers if l.get_weights())
    weights = layer.get_weights()
    weights[0] = np.full_like(weights[0], np.inf)
    layer.set_weights(weights)
    broken = atomic_save_weights(body, tmp_path / "broken.weights.h5")
    out = tmp_path / "nan"
    code, err = run_cli(_train(world, out, "--weights", broken, "--eval-every", "0"), capsys)
    assert code == 1 and "no good checkpoint" in err and str(out) in err
    assert not list(out.glob("final.*")) and not list(out.glob("best.*"))


def test_resume_without_state_says_it_starts_over(world, tmp_path, capsys):
    from yolo3.config.train_config import TrainConfig
    from yolo3.training.data_step import prepare_data
    from yolo3.training.run_folder import check_run_folder
    d = world["data"]
    config = TrainConfig(annotations=str(d / "train.txt"), classes=str(d / "classes.txt"),
                         output=str(tmp_path / "empty"), model="tiny", input_size=64, resume=True,
                         val_annotations=str(d / "val.txt"), verbose=0)
    check_run_folder(config, prepare_data(config))
    assert "has no saved state" in capsys.readouterr().err
    assert not (tmp_path / "empty").exists()


def test_darknet_export_of_a_run_carries_its_anchors_and_size(world, tmp_path, capsys):
    from yolo3.darknet.cfg import parse_cfg
    cfg = tmp_path / "run.cfg"
    code, err = run_cli(["convert", world["run"] / "final.keras", cfg, tmp_path / "run.weights"],
                        capsys)
    assert code == 0, err
    text = cfg.read_text()
    assert "width=64" in text and "height=64" in text
    parsed = parse_cfg(cfg)
    yolos = [l.spec for l in parsed.layers if l.kind == "yolo"]
    np.testing.assert_allclose(np.asarray(yolos[0].anchors).reshape(-1, 2),
                               [[5, 6], [9, 10], [14, 15], [20, 22], [30, 28], [40, 44]])


def test_debug_shows_the_traceback(capsys):
    from yolo3.cli.common import execute

    class Args:
        debug = True

    def boom(args):
        raise RuntimeError("a bug")
    with pytest.raises(RuntimeError):
        execute("detect", boom, Args())


# ------------------------------------------------------------------------------ input hygiene

def test_byte_order_marks_are_not_part_of_names(tmp_path):
    from yolo3.data.annotations import parse_text_annotations
    from yolo3.data.class_names import read_classes
    from yolo3.ops.anchors import read_anchors
    classes = tmp_path / "classes.txt"
    classes.write_bytes("\ufeffcar\nbus\n".encode("utf-8"))
    assert read_classes(classes) == ["car", "bus"]
    anchors = tmp_path / "anchors.txt"
    anchors.write_bytes("\ufeff10,13, 16,30\n".encode("utf-8"))
    np.testing.assert_allclose(read_anchors(anchors), [[10, 13], [16, 30]])
    ann = tmp_path / "ann.txt"
    ann.write_bytes("\ufeffa.jpg 1,2,30,40,0\n".encode("utf-8"))
    from yolo3.data.annotations import _read_text
    rows = parse_text_annotations(_read_text(ann), ann)
    assert rows[0][0] == str(tmp_path / "a.jpg")


def test_a_tab_separates_the_path_only_before_the_first_box(tmp_path):
    from yolo3.data.annotations import parse_text_annotations
    text = ("a b.jpg\t1,2,30,40,0 5,6,20,22,1\n"       # a path with a space, then boxes
            "c.jpg 1,2,30,40,0\t5,6,20,22,1\t\n")      # tabs between and after the boxes
    rows = parse_text_annotations(text, tmp_path / "ann.txt")
    assert [os.path.basename(r[0]) for r in rows] == ["a b.jpg", "c.jpg"]
    for _, boxes, _ in rows:
        np.testing.assert_array_equal(boxes[:, 4], [0, 1])


def test_repeated_class_names_are_refused_where_they_are_written(tmp_path):
    from yolo3.core.errors import FileFormatError
    from yolo3.data.class_names import write_classes
    with pytest.raises(FileFormatError, match="repeats"):
        write_classes(tmp_path / "c.txt", ["car", "bus", "car"])
    assert not (tmp_path / "c.txt").exists()


def test_crowded_images_are_reported(world, tmp_path, caplog):
    from yolo3.config.train_config import TrainConfig
    from yolo3.training.data_step import prepare_data
    d = world["data"]
    config = TrainConfig(annotations=str(d / "train.txt"), classes=str(d / "classes.txt"),
                         output=str(tmp_path / "o"), model="tiny", input_size=64, max_boxes=1,
                         val_annotations=str(d / "val.txt"), verbose=0)
    prepare_data(config)
    assert "more than max_boxes=1 boxes" in caplog.text
    # the record names its setting, so the command line says --max-boxes (as for cautions)
    assert any(getattr(r, "settings", ()) == ("max_boxes",) for r in caplog.records)


def test_evaluate_counts_unreadable_images_and_exits_1(world, tmp_path, capsys):
    data = tmp_path / "data"
    shutil.copytree(world["data"], data)
    first = (data / "val.txt").read_text().split()[0]
    Image.open(data / first).save(data / first, format="PNG")  # readable header, other format
    raw = (data / first).read_bytes()
    (data / first).write_bytes(raw[:len(raw) // 2])  # header intact, pixels cut
    code, err = run_cli(["evaluate", "--annotations", data / "val.txt", "--model",
                         world["run"] / "final.keras", "--out", tmp_path / "e.json", "--no-plot"],
                        capsys)
    assert code == 1 and "1 of 3 images could not be read" in err, err
    assert (tmp_path / "e.json").exists()


def test_a_decode_failure_inside_the_pipeline_names_the_file(world, tmp_path, capsys, monkeypatch):
    """More images than are decoded up front (here: any): training starts at once, and the
    truncated file is named when the pipeline meets it (exit 1, no traceback)."""
    import yolo3.training.data_step
    monkeypatch.setenv("YOLO3_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(yolo3.training.data_step, "UPFRONT_DECODE_LIMIT", 0)
    argv, _, image = _bad_image("truncated")(world, tmp_path)
    code = yolo3_main([str(a) for a in argv + ["--eval-every", "0"]])
    out, err = capsys.readouterr()
    assert code == 1 and "Traceback" not in err, err
    assert "training met an image it cannot decode" in err and image in err, err
    assert "are not yet known to decode (more than 0): training starts" in out + err


def test_a_file_that_decodes_again_when_searched_is_still_explained(tmp_path, monkeypatch):
    """The pipeline failed, but every image decodes when searched (a file changed back): the
    message says so and points to yolo3 check, with TensorFlow's reason."""
    from yolo3.training.data_step import name_undecodable
    monkeypatch.setenv("YOLO3_CACHE_DIR", str(tmp_path / "cache"))
    good = tmp_path / "good.png"
    Image.fromarray(np.zeros((8, 8, 3), np.uint8)).save(good)
    message = name_undecodable([str(good)], "Invalid JPEG data", "--annotations a.txt", False)
    assert "could not be decoded during training" in message
    assert "'yolo3 check --annotations a.txt'" in message and "Invalid JPEG data" in message


def test_a_ram_cache_that_cannot_fit_is_refused_before_any_work(world, tmp_path, capsys,
                                                                monkeypatch):
    """``--cache ram`` larger than half the memory available: exit 2 with both figures, and
    nothing written (no run folder, no cache)."""
    from yolo3.data import image_cache
    monkeypatch.setattr(image_cache, "available_memory", lambda: 20_000)
    monkeypatch.setenv("YOLO3_CACHE_DIR", str(tmp_path / "cache"))
    out = tmp_path / "run"
    code, err = run_cli(_train(world, out, "--cache", "ram", "--pipeline", "numpy"), capsys)
    assert code == 2, err
    assert "yolo3 train: error: --cache ram: the" in err and "decoded images need" in err
    assert "0.0 GB of memory available" in err and "Traceback" not in err
    assert not out.exists() and not (tmp_path / "cache" / "decoded").exists()


@pytest.mark.parametrize("extra, names", [
    (("--tile", "32"), ("--cache device with --tile", "use --cache ram")),
    (("--augment-on", "host"), ("--cache device with --augment-on host",)),
    (("--pipeline", "tf"), ("--cache does nothing with --pipeline tf",)),
    ((), ("--cache device: the", "decoded images need", "0.0 GB of memory available")),
], ids=["tiles", "augment on the host", "tf.data", "cannot fit"])
def test_images_kept_on_the_device_that_cannot_work_are_refused_before_any_work(
        world, tmp_path, capsys, monkeypatch, extra, names):
    """``--cache device`` where it cannot work yet, or would not fit (here a CPU's memory):
    exit 2 naming the flags or the figures, and nothing written (several replicas:
    tests/training/test_datasets.py, a process cannot make CPU devices after TensorFlow
    starts)."""
    from yolo3.data import image_cache
    if not extra:
        monkeypatch.setattr(image_cache, "available_memory", lambda: 20_000)
    out = tmp_path / "run"
    code, err = run_cli(_train(world, out, "--cache", "device", *extra), capsys)
    assert code == 2, err
    assert "yolo3 train: error: " in err and "Traceback" not in err
    for name in names:
        assert name in err, err
    assert not out.exists()
