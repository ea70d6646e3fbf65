"""Every reader bounded and every bad input named (issue 45): YAML aliases, oversized images,
class names, nc, label paths that are folders, image lists of paths that do not exist, damaged
resume files and exported models, numeric flags out of range, arguments refused before work.
Each case: the exit code, one message naming the file (line) or flag, no traceback, and every
input and every file around the output unchanged."""
from __future__ import annotations

import shutil
import struct
import time
import zlib
from pathlib import Path

import pytest
from cli_harness import assert_refused, run_cli, snapshot


def small_yolo_set(root: Path, world: dict, names_yaml: str, images: int = 2) -> Path:
    """``root/data.yaml`` (``names_yaml`` is its names part) with ``images`` images and labels."""
    for split in ("train", "val"):
        (root / "images" / split).mkdir(parents=True)
        (root / "labels" / split).mkdir(parents=True)
        for k, source in enumerate(sorted((world["data"] / "images").iterdir())[:images]):
            shutil.copy(source, root / "images" / split / f"{k}.png")
            (root / "labels" / split / f"{k}.txt").write_text("0 0.5 0.5 0.25 0.25\n")
    (root / "data.yaml").write_text(f"train: images/train\nval: images/val\n{names_yaml}",
                                    encoding="utf-8")
    return root / "data.yaml"


def png_header(width: int, height: int) -> bytes:
    """A PNG of a few bytes whose header claims ``width`` x ``height`` pixels."""
    def chunk(kind: bytes, data: bytes) -> bytes:
        return (struct.pack(">I", len(data)) + kind + data
                + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF))
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(b""))
            + chunk(b"IEND", b""))


def train_argv(world: dict, out: Path, *extra) -> list:
    d = world["data"]
    return ["train", "--annotations", d / "train.txt", "--val-annotations", d / "val.txt",
            "--classes", d / "classes.txt", "--variant", "tiny", "--input-size", "64",
            "--batch-size", "2", "--epochs", "2", "--freeze-epochs", "0", "--output", out,
            "--no-augment", "--quiet", "--eval-every", "0", "--anchors", world["anchors"], *extra]


# ------------------------------------------------------------------------------------- data.yaml


@pytest.mark.parametrize("names_yaml, reason", [
    ("names: {0.5: a, 1: b, 2: c}\n", "class ids 0, 1, ..., got 0.5"),
    ("names: {0: a, 2: b}\n", "missing [1]"),
    ("names: [a, [b, c]]\n", "class 1 is ['b', 'c'] (list)"),
    ("names: [a, null, c]\n", "class 1 is None (null)"),
    ("names: [a, b, a]\n", "repeats class 0"),
    ("names: [a, '', c]\n", "class 1 has an empty name"),
    ("names: [a, {x: 1}]\n", "(dict)"),
    ("names: [a, b, c]\nnc: '3'\n", "nc: the class count is a whole number, got '3' (str)"),
    ("names: [a, b, c]\nnc: 4\n", "nc is 4 but names has 3 entries"),
    ("names: 7\n", "expected a list or an {id: name} mapping, got 7"),
])
def test_class_names_are_checked_alike_in_a_data_yaml(trained_world, tmp_path, capsys,
                                                       names_yaml, reason):
    data = small_yolo_set(tmp_path / "set", trained_world, names_yaml)
    before = snapshot(tmp_path)
    for argv in (["check", "--data", data], ["annotations", "--data", data, "--to", "text",
                                             "--out", tmp_path / "out"]):
        code, err = run_cli(argv + ["--quiet"], capsys)
        assert_refused(code, err, data, reason)
    assert snapshot(tmp_path) == before


def test_darknet_names_files_follow_the_same_rule(trained_world, tmp_path, capsys):
    set_root = tmp_path / "set"
    data = small_yolo_set(set_root, trained_world, "names: [a]\n")
    (set_root / "obj.names").write_text("a\nb\n\na\n")
    (set_root / "obj.data").write_text("classes = 3\ntrain = images/train\nvalid = images/val\n"
                                       "names = obj.names\n")
    code, err = run_cli(["check", "--data", set_root / "obj.data", "--quiet"], capsys)
    assert_refused(code, err, f"{set_root / 'obj.names'}:4", "repeats line 1")
    assert data.exists()


def test_nested_yaml_aliases_are_refused_quickly_with_a_short_message(trained_world, tmp_path,
                                                                      capsys):
    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    for k in range(1, 9):
        prev = f"*a{k - 1}"
        lines.append(f"a{k}: &a{k} [{', '.join([prev] * 10)}]")
    data = small_yolo_set(tmp_path / "set", trained_world, "\n".join(lines) + "\nnames: *a8\n")
    assert data.stat().st_size < 1000
    start = time.perf_counter()
    code, err = run_cli(["check", "--data", data, "--quiet"], capsys)
    assert time.perf_counter() - start < 10  # expanded, depth 8 took 1.5 GB and 11 s
    assert_refused(code, err, data, "expands to more than")
    assert len(err) < 2000


def test_a_recursive_yaml_alias_is_refused(trained_world, tmp_path, capsys):
    data = small_yolo_set(tmp_path / "set", trained_world, "names: &n [a, *n]\n")
    code, err = run_cli(["check", "--data", data, "--quiet"], capsys)
    assert_refused(code, err, data)
    assert "recursive" in err or "not valid YAML" in err


def test_a_huge_value_is_cut_in_the_message(trained_world, tmp_path, capsys):
    names = "[" + ", ".join(f"name{k}" for k in range(50_000)) + "]"
    data = small_yolo_set(tmp_path / "set", trained_world, f"names: {names}\nnc: 3\n")
    code, err = run_cli(["check", "--data", data, "--quiet"], capsys)
    assert_refused(code, err, data, "nc is 3 but names has 50000 entries")
    assert len(err) < 2500


def test_error_messages_are_capped(capsys):
    from yolo3.cli.common import MAX_MESSAGE, error
    error("check", "x" * 3_000_000)
    err = capsys.readouterr().err
    assert len(err) < MAX_MESSAGE + 100 and "more characters" in err


# ------------------------------------------------------------------------- images and label paths


def test_an_oversized_image_header_is_a_named_problem_in_check_and_refused_by_train(
        trained_world, tmp_path, capsys):
    data = small_yolo_set(tmp_path / "set", trained_world, "names: [a, b, c]\n", images=3)
    bomb = tmp_path / "set" / "images" / "train" / "1.png"
    bomb.write_bytes(png_header(20000, 20000))
    before = snapshot(tmp_path / "set")
    code, err = run_cli(["check", "--data", data, "--quiet"], capsys)
    assert code == 1 and "Traceback" not in err and "unexpected" not in err, err
    out = capsys.readouterr().out + err
    assert str(bomb) in out or str(bomb) in err
    code, err = run_cli(["train", "--data", data, "--variant", "tiny", "--input-size", "64",
                         "--batch-size", "2", "--epochs", "1", "--output", tmp_path / "run",
                         "--quiet"], capsys)
    assert_refused(code, err, bomb, "over the limit")
    assert snapshot(tmp_path / "set") == before
    assert not (tmp_path / "run").exists()


def test_check_lists_every_problem_past_an_oversized_image(trained_world, tmp_path, capsys):
    from yolo3.data.annotations import scan_annotations
    data = small_yolo_set(tmp_path / "set", trained_world, "names: [a, b, c]\n", images=3)
    (tmp_path / "set" / "images" / "train" / "0.png").write_bytes(png_header(30000, 9000))
    (tmp_path / "set" / "labels" / "train" / "2.txt").write_text("9 0.5 0.5 0.1 0.1\n")
    result = scan_annotations(str(tmp_path / "set" / "images" / "train"), ["a", "b", "c"])
    problems = "\n".join(str(p) for p in result.problems)
    assert "0.png" in problems and "over the limit" in problems
    assert "2.txt:1" in problems  # the scan went on
    assert data.exists()


def test_a_label_path_that_is_a_folder_is_a_named_problem(trained_world, tmp_path, capsys):
    data = small_yolo_set(tmp_path / "set", trained_world, "names: [a, b, c]\n")
    label = tmp_path / "set" / "labels" / "train" / "1.txt"
    label.unlink()
    label.mkdir()
    code, err = run_cli(["check", "--data", data, "--quiet"], capsys)
    out = capsys.readouterr().out
    assert code == 1, err
    assert f"{label}: a folder, not a label file" in out + err
    assert "no problems" not in out


def test_an_image_list_of_missing_images_says_so_and_windows_separators_are_read(
        trained_world, tmp_path, capsys):
    root = tmp_path / "darknet"
    (root / "data" / "obj").mkdir(parents=True)
    for k, source in enumerate(sorted((trained_world["data"] / "images").iterdir())[:2]):
        shutil.copy(source, root / "data" / "obj" / f"{k}.png")
        (root / "data" / "obj" / f"{k}.txt").write_text("0 0.5 0.5 0.25 0.25\n")
    (root / "data" / "obj.names").write_text("a\nb\nc\n")
    (root / "data" / "obj.data").write_text("classes = 3\ntrain = data/train.txt\nvalid = "
                                            "data/train.txt\nnames = data/obj.names\n")
    # as Darknet on Windows writes it: found once the separators are read as /
    (root / "data" / "train.txt").write_text("data\\obj\\0.png\ndata\\obj\\1.png\n")
    code, err = run_cli(["check", "--data", root / "data" / "obj.data", "--quiet"], capsys)
    assert code == 0, err
    # entries that exist under no spelling are named, with the list's line
    (root / "data" / "train.txt").write_text("# list\nC:\\darknet\\x\\0.png\nC:\\darknet\\x\\1.png\n")
    code, err = run_cli(["check", "--data", root / "data" / "obj.data", "--quiet"], capsys)
    assert_refused(code, err, f"{root / 'data' / 'train.txt'}:2", "none of the 2 images")
    assert "label files" not in err


# ----------------------------------------------------------------------------- damaged models


@pytest.mark.parametrize("name, content", [("garbage.onnx", b"garbage"),
                                           ("empty.onnx", b""),
                                           ("garbage.tflite", b"garbage")])
def test_a_damaged_exported_model_is_named(trained_world, tmp_path, capsys, name, content):
    model = tmp_path / name
    model.write_bytes(content)
    image = sorted((trained_world["data"] / "images").iterdir())[0]
    code, err = run_cli(["detect", "--model", model, "--input", image, "--output",
                         tmp_path / "out", "--quiet"], capsys)
    assert_refused(code, err, model)
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("damaged", ["model.weights.h5", "optimizer.npz"])
def test_resume_with_a_damaged_state_file_names_it_and_keeps_the_run(trained_world, tmp_path,
                                                                     capsys, damaged):
    run = tmp_path / "run"
    shutil.copytree(trained_world["run"], run)
    import json
    state = json.loads((run / "resume.json").read_text())
    path = run / state["dir"] / damaged
    raw = path.read_bytes()
    path.write_bytes(raw[:len(raw) // 2])
    before = snapshot(run)
    code, err = run_cli(train_argv(trained_world, run, "--resume"), capsys)
    assert_refused(code, err, path, "damaged", "the run folder is kept")
    assert snapshot(run) == before


# --------------------------------------------------------------------------------- flags


@pytest.mark.parametrize("command, flag, value", [
    ("detect", "--iou", "2"), ("detect", "--score", "1.5"), ("detect", "--score", "-0.1"),
    ("detect", "--score", "nan"), ("detect", "--iou", "inf"), ("detect", "--batch-size", "0"),
    ("detect", "--max-frames", "-1"), ("evaluate", "--score", "7"),
    ("evaluate", "--iou", "-1"), ("evaluate", "--max-dets", "0"),
    ("evaluate", "--confusion-score", "2"), ("export", "--score", "1.01"),
    ("export", "--iou", "nan"), ("export", "--tflite-batch", "0"),
    ("export", "--max-boxes", "-5"), ("kmeans", "--clusters", "0"),
    ("synth", "--val-fraction", "1.5"), ("synth", "--num-images", "0"),
    ("check", "--draw", "-1"), ("convert", "--width", "0"),
])
def test_numeric_flags_out_of_range_are_refused_naming_the_flag_before_any_work(
        trained_world, tmp_path, capsys, command, flag, value):
    model = trained_world["run"] / "final.keras"
    image = sorted((trained_world["data"] / "images").iterdir())[0]
    base = {
        "detect": ["--model", model, "--input", image, "--output", tmp_path / "out"],
        "evaluate": ["--model", model, "--annotations", trained_world["data"] / "val.txt",
                     "--out", tmp_path / "out.json"],
        "export": ["--model", model, "--onnx", tmp_path / "out.onnx"],
        "kmeans": ["--annotations", trained_world["data"] / "train.txt", "--out",
                   tmp_path / "out.txt"],
        "synth": ["--out", tmp_path / "out"],
        "check": ["--annotations", trained_world["data"] / "train.txt"],
        "convert": ["--export", model, tmp_path / "out.cfg", tmp_path / "out.weights"],
    }[command]
    before = snapshot(tmp_path, trained_world["data"])
    code, err = run_cli([command, *base, flag, value], capsys)  # argparse refuses: SystemExit(2)
    assert_refused(code, err, f"argument {flag}", value)
    assert snapshot(tmp_path, trained_world["data"]) == before


def test_an_input_size_the_model_cannot_take_names_the_flag(trained_world, tmp_path, capsys):
    code, err = run_cli(["detect", "--model", trained_world["run"] / "final.keras", "--input",
                         sorted((trained_world["data"] / "images").iterdir())[0], "--output",
                         tmp_path / "out", "--input-size", "100", "--quiet"], capsys)
    assert_refused(code, err, "--input-size", "a multiple of 32")
    assert not (tmp_path / "out").exists()


def test_benchmark_export_refuses_trained_without_its_held_out_set_before_any_work(
        trained_world, monkeypatch, capsys):
    import importlib
    real = importlib.import_module

    def no_benchmark(name, *args):
        assert name != "yolo3.benchmarks.export", "the benchmark started"
        return real(name, *args)
    monkeypatch.setattr("yolo3.cli.benchmark.importlib.import_module", no_benchmark)
    code, err = run_cli(["benchmark", "export", "--trained", trained_world["run"] / "final.keras",
                         "--quiet"], capsys)
    assert_refused(code, err, "--trained needs --annotations or --data")
    assert err.startswith("yolo3 benchmark export: error:")
    code, err = run_cli(["benchmark", "export", "--annotations",
                         trained_world["data"] / "val.txt", "--quiet"], capsys)
    assert_refused(code, err, "--annotations needs --trained")


@pytest.mark.parametrize("flag, value", [
    ("--warmup-epochs", "-1"), ("--warmup-epochs", "nan"), ("--steps-per-epoch", "0"),
    ("--validation-steps", "0"), ("--gpus", "-1"), ("--epochs", "0"), ("--lr", "nan"),
    ("--mosaic", "2"), ("--val-split", "1.5"), ("--max-boxes", "0"), ("--patience", "-1"),
])
def test_training_settings_out_of_range_are_refused_naming_the_flag(trained_world, tmp_path,
                                                                   capsys, flag, value):
    out = tmp_path / "run"
    argv = train_argv(trained_world, out)
    i = argv.index("--val-annotations")
    if flag == "--val-split":
        del argv[i:i + 2]
    code, err = run_cli(argv + [flag, value], capsys)
    assert_refused(code, err, flag, value)
    assert not out.exists()


# ------------------------------------------------- yolo3's own files, read back damaged (issue 66)

DAMAGE = {
    "binary": b"\x00\x9f\xff\xfe garbage \x81\x00" * 8,
    "cut": None,  # the file's own first half
}


@pytest.mark.parametrize("damage", DAMAGE)
@pytest.mark.parametrize("name", ["history.csv", "run.json", "diagnostics/diagnostics.json"])
def test_report_names_a_damaged_file_of_the_run(trained_world, tmp_path, capsys, name, damage):
    """Every file the report reads back: a binary or cut-short one is refused naming the file
    and the cause (exit 2), never an 'unexpected UnicodeDecodeError' or 'JSONDecodeError'."""
    run = tmp_path / "run"
    shutil.copytree(trained_world["run"], run)
    target = run / name
    if not target.exists():  # the run wrote no diagnostics (no box in its validation set)
        target.parent.mkdir(exist_ok=True)
        target.write_text('{"per_class": [], "epoch": 1}')
    whole = target.read_bytes()
    target.write_bytes(DAMAGE[damage] if DAMAGE[damage] is not None else whole[:len(whole) // 2])
    if damage == "cut" and name.endswith(".csv"):
        target.write_bytes(b"epoch,loss\n1,\x00\x00")  # a CSV cut inside a write
    before = snapshot(run)
    code, err = run_cli(["report", run], capsys)
    assert_refused(code, err, target)
    assert snapshot(run) == before


@pytest.mark.parametrize("command", ["report", "evaluate"])
def test_a_cut_json_of_yolo3s_is_named_with_its_line(trained_world, tmp_path, capsys, command):
    figures = tmp_path / "eval.json"
    figures.write_text('{\n "per_class": [\n  {"name": "a"')
    d = trained_world["data"]
    argv = (["report", figures] if command == "report" else
            ["evaluate", "--annotations", d / "val.txt", "--classes", d / "classes.txt",
             "--detections", figures, "--out", tmp_path / "o.json"])
    code, err = run_cli(argv, capsys)
    assert_refused(code, err, f"{figures}:3", "not valid JSON", "cut short or damaged")
    assert "('" not in err  # never a Python tuple


# -------------------------------------------------- sizes read from a file: bounded before use


@pytest.mark.parametrize("frame", ["10000000000", "2000000"])
def test_a_frame_number_beyond_the_limit_is_refused_at_its_line(tmp_path, capsys, frame):
    gt, tracks = tmp_path / "gt.txt", tmp_path / "tracks.txt"
    gt.write_text("1,1,10,10,20,20,1,1,1\n")
    tracks.write_text(f"1,1,10,10,20,20,0.9\n{frame},2,10,10,20,20,0.9\n")
    started = time.monotonic()
    code, err = run_cli(["evaluate-tracks", "--gt", gt, "--tracks", tracks], capsys)
    assert_refused(code, err, f"{tracks}:2", f"frame {frame} is beyond 200,000")
    assert time.monotonic() - started < 10


@pytest.mark.parametrize("option, value", [("filters", 10**9), ("width", 10**7), ("size", 10**5),
                                           ("classes", 10**8)])
def test_a_darknet_cfg_size_beyond_the_limit_is_refused_at_its_line(tmp_path, capsys, option,
                                                                     value):
    from yolo3.darknet.layout import layout_cfg_text
    text = layout_cfg_text("tiny")
    lines = text.splitlines()
    at = next(k for k, line in enumerate(lines) if line.startswith(f"{option}="))
    lines[at] = f"{option}={value}"
    cfg = tmp_path / "big.cfg"
    cfg.write_text("\n".join(lines) + "\n")
    (tmp_path / "w.weights").write_bytes(b"\0" * 64)
    code, err = run_cli(["convert", cfg, tmp_path / "w.weights", tmp_path / "m.keras"], capsys)
    assert_refused(code, err, f"{cfg}:{at + 1}", f"option {option} {value} is beyond")
    assert not (tmp_path / "m.keras").exists()


def test_evaluate_tracks_says_what_it_leaves_out(tmp_path, capsys):
    """A track beyond its sequence's length, a folder without ground truth and a tracks file of
    no sequence are each named on stderr, not dropped without a word."""
    gt_root, tracks = tmp_path / "gt", tmp_path / "tracks"
    seq = gt_root / "seq01"
    (seq / "gt").mkdir(parents=True)
    (seq / "gt" / "gt.txt").write_text("1,1,10,10,20,20,1,1,1\n2,1,12,10,20,20,1,1,1\n")
    (seq / "seqinfo.ini").write_text("[Sequence]\nname=seq01\nseqLength=2\n")
    (gt_root / "notes").mkdir()
    tracks.mkdir()
    (tracks / "seq01.txt").write_text("1,1,10,10,20,20,0.9\n2,1,12,10,20,20,0.9\n"
                                      "7,1,12,10,20,20,0.9\n")
    (tracks / "seq99.txt").write_text("1,1,10,10,20,20,0.9\n")
    code, err = run_cli(["evaluate-tracks", "--gt", gt_root, "--tracks", tracks], capsys)
    assert code == 0, err
    assert "1 boxes in frames after the sequence's 2 (seqinfo.ini of seq01) are not scored" in err
    assert "1 folders without gt/gt.txt are not scored (first: notes)" in err
    assert "1 tracks files of no sequence in --gt are not scored (first: seq99.txt)" in err


# ------------------------------------------------------------ a backend that is not installed


@pytest.mark.parametrize("command", ["detect", "track", "train"])
def test_a_backend_that_is_not_installed_is_named_with_its_install(trained_world, tmp_path,
                                                                   command):
    """KERAS_BACKEND=torch without PyTorch: exit 2 naming the backend and how to install it (it
    was 'unexpected ModuleNotFoundError', exit 1), in a fresh process (Keras picks its backend
    once)."""
    import importlib.util
    import os
    import subprocess
    import sys
    if importlib.util.find_spec("torch") is not None:
        pytest.skip("PyTorch is installed here: the missing-backend message cannot be shown")
    model, d = trained_world["run"] / "final.keras", trained_world["data"]
    image = sorted((d / "images").iterdir())[0]
    argv = {"detect": ["detect", "--model", model, "--input", image, "--output", tmp_path / "o"],
            "track": ["track", "--model", model, "--input", d / "images", "--output", tmp_path / "o"],
            "train": train_argv(trained_world, tmp_path / "run")}[command]
    done = subprocess.run([sys.executable, "-m", "yolo3", *map(str, argv)], capture_output=True,
                          text=True, timeout=300, env=dict(os.environ, KERAS_BACKEND="torch"))
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip().splitlines()[-1] == (
        f"yolo3 {command}: error: the Keras backend PyTorch is not installed (KERAS_BACKEND=torch): "
        "pip install torch, or set KERAS_BACKEND to one that is (tensorflow, jax, torch)")
    assert not (tmp_path / "o").exists() and not (tmp_path / "run").exists()


# ---------------------------------------------------------- errors name the user's words


def _small_video(path: Path, frames: int = 3) -> Path:
    import cv2
    import numpy as np
    writer = cv2.VideoWriter(str(path), cv2.VideoWriter_fourcc(*"MJPG"), 10.0, (64, 48))
    for k in range(frames):
        writer.write(np.full((48, 64, 3), 40 * k, np.uint8))
    writer.release()
    return path


@pytest.mark.parametrize("command", ["detect", "track"])
def test_a_codec_that_cannot_write_names_the_flag_and_the_output(trained_world, tmp_path, capsys,
                                                                  command):
    video = _small_video(tmp_path / "clip.avi")
    out = tmp_path / "out"
    code, err = run_cli([command, "--model", trained_world["run"] / "final.keras", "--input",
                         video, "--output", out, "--fourcc", "zzzz"], capsys)
    assert_refused(code, err, "--fourcc zzzz: OpenCV cannot write", out / "clip.mp4")
    assert ".tmp" not in err  # never the temporary file's name
    assert not any(p.is_file() and not p.name.startswith(".yolo3") for p in out.rglob("*")) \
        if out.exists() else True


@pytest.mark.parametrize("command", ["detect", "evaluate"])
def test_a_model_that_is_a_folder_is_called_a_folder(trained_world, tmp_path, capsys, command):
    folder = tmp_path / "models"
    folder.mkdir()
    d = trained_world["data"]
    argv = (["detect", "--model", folder, "--input", d / "images", "--output", tmp_path / "o"]
            if command == "detect" else
            ["evaluate", "--model", folder, "--annotations", d / "val.txt", "--out",
             tmp_path / "e.json"])
    code, err = run_cli(argv, capsys)
    assert_refused(code, err, folder, "a folder that holds no model yolo3 reads")
    assert "not found" not in err


def test_any_package_that_is_not_installed_is_named_with_its_install(monkeypatch, capsys):
    """Not only a backend: a module missing while a command runs is named with the package that
    brings it (its PyPI name where that differs), exit 2."""
    from yolo3.cli import common

    def run(args):
        raise ModuleNotFoundError("No module named 'cv2'", name="cv2")
    code = common.execute("detect", run, common.make_parser("detect", "").parse_args([]))
    assert code == 2
    assert capsys.readouterr().err.strip() == (
        "yolo3 detect: error: the package 'cv2' is not installed (pip install opencv-python)")
