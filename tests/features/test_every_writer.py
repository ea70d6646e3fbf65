"""Every writer under the per-file ownership rule (issue 53): each command that writes runs once,
then the user's files are planted at every depth of what it wrote (and beside a named output
file), and one of yolo3's own files is changed by hand. Run again without ``--exist-ok`` a folder
writer is refused (exit 2, naming a planted file) and nothing changes; with ``--exist-ok`` it runs,
and every planted and changed file keeps its hash. A changed file at a path the writer writes is
refused even with ``--exist-ok``. Named output files (``--json``, ``--out FILE``) are the user's
word: they are replaced, and only they."""
from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Callable, Dict, List, Optional

import pytest
from cli_harness import assert_refused, run_cli, snapshot

PLANTED = "planted-by-the-user.txt"


def _hash(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def plant_everywhere(root: Path) -> Dict[Path, str]:
    """A file of the user's in ``root`` and in every folder under it; returns path -> hash."""
    planted = {}
    folders = [root] + sorted(p for p in root.rglob("*") if p.is_dir() and not p.is_symlink())
    for k, folder in enumerate(folders):
        path = folder / PLANTED
        path.write_text(f"the user's own file number {k} in {folder.name}\n")
        planted[path] = _hash(path)
    return planted


def change_one_of_yolo3s_files(root: Path) -> Optional[Path]:
    """Append to the deepest file yolo3 wrote and recorded by its hash under ``root`` (it is the
    user's from now on)."""
    from yolo3.core.manifest import read_manifest
    from yolo3.core.output_folder import read_contents
    recorded = read_manifest(root).files
    ours = sorted((rel for rel in read_contents(root).ours if rel in recorded),
                  key=lambda rel: (rel.count("/"), rel))
    if not ours:
        return None
    path = root / ours[-1]
    if path.is_symlink():
        return None
    with open(path, "ab") as f:
        f.write(b"\n# changed by the user\n")
    return path


def _unchanged(before: Dict[str, str], after: Dict[str, str], keep: List[Path]) -> None:
    for path in keep:
        assert after.get(str(path)) == before[str(path)], f"{path} changed"


class Writer:
    """A command that writes ``out`` (a folder, or a file with things beside it)."""

    def __init__(self, name: str, argv: Callable[[dict, Path], list], folder: bool = True,
                 exist_ok: bool = True):
        self.name, self.argv, self.folder, self.exist_ok = name, argv, folder, exist_ok

    def __repr__(self) -> str:
        return self.name


def _image(world) -> Path:
    return sorted((world["data"] / "images").iterdir())[0]


def _images(world, tmp: Path) -> Path:
    folder = tmp / "photos"
    if not folder.exists():
        folder.mkdir()
        for path in sorted((world["data"] / "images").iterdir())[:3]:
            (folder / path.name).write_bytes(path.read_bytes())
    return folder


WRITERS = [
    Writer("detect --output --save-txt", lambda w, out: [
        "detect", "--model", w["run"] / "final.keras", "--input", _images(w, out.parent),
        "--output", out, "--save-txt", out / "labels", "--score", "0.01"]),
    Writer("annotations --to yolo", lambda w, out: [
        "annotations", "--annotations", w["data"] / "train.txt", "--classes",
        w["data"] / "classes.txt", "--to", "yolo", "--out", out]),
    Writer("annotations --to voc", lambda w, out: [
        "annotations", "--annotations", w["data"] / "train.txt", "--classes",
        w["data"] / "classes.txt", "--to", "voc", "--out", out]),
    Writer("synth", lambda w, out: ["synth", "--out", out, "--num-images", "3", "--size", "48",
                                    "--val-fraction", "0.34"]),
    Writer("synth --video", lambda w, out: ["synth", "--video", "3", "--sequences", "2",
                                            "--size", "32", "48", "--out", out]),
    Writer("track --output", lambda w, out: [
        "track", "--model", w["run"] / "final.keras", "--input", _images(w, out.parent),
        "--output", out, "--score", "0.01"]),
    Writer("check --plots", lambda w, out: [
        "check", "--annotations", w["data"] / "train.txt", "--classes",
        w["data"] / "classes.txt", "--plots", out, "--batches", "1"]),
    Writer("check --draw-dir", lambda w, out: [
        "check", "--annotations", w["data"] / "train.txt", "--classes",
        w["data"] / "classes.txt", "--draw", "2", "--draw-dir", out]),
    Writer("evaluate --out FILE", lambda w, out: [
        "evaluate", "--model", w["run"] / "final.keras", "--annotations",
        w["data"] / "val.txt", "--out", out / "e.json", "--save-detections", out / "d.json"],
        folder=False),
    Writer("report RUN --out FILE", lambda w, out: [
        "report", w["run"], "--out", out / "page.html"], folder=False),
    Writer("kmeans --out FILE", lambda w, out: [
        "kmeans", "--annotations", w["data"] / "train.txt", "--classes",
        w["data"] / "classes.txt", "--clusters", "3", "--out", out / "anchors.txt"],
        folder=False),
    Writer("plot --out FILE", lambda w, out: [
        "plot", "--history", w["run"] / "history.csv", "--out", out / "curves.png"],
        folder=False),
]
SLOW_WRITERS = [
    Writer("evaluate --report", lambda w, out: [  # evaluate --out FILE's walk, and the page
        "evaluate", "--model", w["run"] / "final.keras", "--annotations",
        w["data"] / "val.txt", "--out", out / "e.json", "--report"], folder=False),
    Writer("export --openvino --saved-model", lambda w, out: [
        "export", "--model", w["run"] / "final.keras", "--openvino", out / "ir",
        "--saved-model", out / "sm"]),
    Writer("tune --output", lambda w, out: [  # one trial; the reruns go on with the study
        "tune", "--annotations", w["data"] / "train.txt", "--val-annotations",
        w["data"] / "val.txt", "--classes", w["data"] / "classes.txt", "--variant", "tiny",
        "--input-size", "64", "--batch-size", "2", "--epochs", "1", "--freeze-epochs", "0",
        "--anchors", w["anchors"], "--output", out, "--trials", "1"]),
    Writer("train --output", lambda w, out: [
        "train", "--annotations", w["data"] / "train.txt", "--val-annotations",
        w["data"] / "val.txt", "--classes", w["data"] / "classes.txt", "--variant", "tiny",
        "--input-size", "64", "--batch-size", "2", "--epochs", "1", "--freeze-epochs", "0",
        "--anchors", w["anchors"], "--output", out, "--no-augment", "--eval-every", "1"]),
    Writer("convert --> OUT.keras and its side files", lambda w, out: [
        "convert", w["cfg"], w["weights"], out / "tiny.weights.h5"], folder=False,
        exist_ok=False),
    Writer("benchmark backends --json FILE", lambda w, out: [
        "benchmark", "backends", "--dry-run", "--backends", "tensorflow", "--variants", "tiny",
        "--no-detect", "--json", out / "rows.json"], folder=False, exist_ok=False),
]

# Output folders whose rule is checked in their own test file, where the walk above would run a
# long job three times: ``benchmark track --train-output`` trains through ``yolo3 train`` into a
# run folder per detector (the ``train --output`` walk's rule); its test keeps the user's files at
# two depths with ``--exist-ok`` and is refused without it (about 450 s of CI saved).
COVERED_ELSEWHERE = {
    ("benchmark track", "--train-output"): "tests/features/test_track_behind.py",
}


@pytest.fixture(scope="module")
def world(trained_world, tmp_path_factory):
    from yolo3.darknet.layout import layout_cfg_text
    from yolo3.darknet.random_weights import write_random_weights
    folder = tmp_path_factory.mktemp("darknet")
    cfg = folder / "tiny.cfg"
    cfg.write_text(layout_cfg_text("tiny"), encoding="utf-8")
    write_random_weights(cfg, folder / "tiny.weights", seed=0)
    return {**trained_world, "cfg": cfg, "weights": folder / "tiny.weights"}


def _run_ok(argv: list, capsys) -> None:
    code, err = run_cli([*argv, "--quiet"], capsys)
    assert code == 0, err


def _check_writer(writer: Writer, world: dict, tmp_path: Path, capsys) -> None:
    out = tmp_path / "out"
    argv = writer.argv(world, out)
    _run_ok(argv, capsys)
    _run_ok(argv, capsys)  # again into its own output: no flag needed
    if not writer.folder:
        return _check_named_file_writer(writer, argv, out, capsys)
    planted = plant_everywhere(out)
    assert len(planted) >= 2 or writer.name.startswith(("check", "track")), planted  # flat
    changed = change_one_of_yolo3s_files(out)
    before = snapshot(tmp_path)
    code, err = run_cli([*argv, "--quiet"], capsys)
    assert_refused(code, err, "--exist-ok")
    assert snapshot(tmp_path) == before  # refused: nothing changed, not even yolo3's own files
    keep = list(planted) + ([changed] if changed else [])
    if changed is not None:  # the changed file lies where the writer writes: refused, even so
        code, err = run_cli([*argv, "--exist-ok", "--quiet"], capsys)
        assert_refused(code, err, changed.name)
        assert snapshot(tmp_path) == before
        changed.rename(changed.with_name(changed.name + ".mine"))
        keep = list(planted) + [changed.with_name(changed.name + ".mine")]
        before = snapshot(tmp_path)
    if writer.exist_ok:
        _run_ok([*argv, "--exist-ok"], capsys)
        _unchanged(before, snapshot(tmp_path), keep)


def _check_named_file_writer(writer: Writer, argv: list, out: Path, capsys) -> None:
    """A named output file is replaced (the user named it); every other file beside it, the
    user's, keeps its hash."""
    planted = plant_everywhere(out)
    named = [Path(a) for a in argv if isinstance(a, Path) and out in Path(a).parents]
    keep = [p for p in out.rglob("*") if p.is_file() and p not in named]
    before = snapshot(out.parent)
    _run_ok(argv, capsys)
    _unchanged(before, snapshot(out.parent), keep)
    assert all(p.exists() for p in planted)


@pytest.mark.parametrize("writer", WRITERS, ids=repr)
def test_a_rerun_keeps_every_file_of_the_users_at_every_depth(writer, world, tmp_path, capsys):
    _check_writer(writer, world, tmp_path, capsys)


@pytest.mark.parametrize("writer", [w for w in WRITERS if w.folder], ids=repr)
def test_a_first_run_into_a_folder_holding_a_users_file_is_refused(writer, world, tmp_path,
                                                                    capsys):
    """The same rule for every folder writer from its first run (synth --video wrote beside a
    user's file where synth refused): refused before any work, naming the file and --exist-ok."""
    out = tmp_path / "out"
    out.mkdir()
    (out / PLANTED).write_text("the user's\n")
    argv = writer.argv(world, out)  # (which may lay out its inputs first)
    before = snapshot(tmp_path)
    code, err = run_cli([*argv, "--quiet"], capsys)
    assert_refused(code, err, PLANTED, "--exist-ok")
    assert snapshot(tmp_path) == before


def test_a_refusal_advises_exist_ok_only_where_it_would_help(world, tmp_path, capsys):
    """A file of the user's at a path the command writes is refused, with or without
    --exist-ok, by one message that says --exist-ok would not help."""
    argv = ["synth", "--out", tmp_path / "out", "--num-images", "3", "--size", "48",
            "--val-fraction", "0.34"]
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "classes.txt").write_text("mine\n")
    for extra in ([], ["--exist-ok"]):
        code, err = run_cli([*argv, *extra, "--quiet"], capsys)
        assert_refused(code, err, "classes.txt", "not even with --exist-ok")
        assert "give --exist-ok" not in err


@pytest.mark.slow  # an export, a training run, a conversion and a benchmark: CI runs the slow set
@pytest.mark.parametrize("writer", SLOW_WRITERS, ids=repr)
def test_a_rerun_of_a_long_writer_keeps_every_file_of_the_users(writer, world, tmp_path,
                                                                 capsys):
    _check_writer(writer, world, tmp_path, capsys)


def test_a_side_file_of_the_users_beside_a_converted_model_is_never_replaced(world, tmp_path,
                                                                            capsys):
    out = tmp_path / "tiny.weights.h5"
    mine = tmp_path / "tiny.anchors.txt"
    mine.write_text("10,13, 16,30, 33,23\n")  # the user's own anchors, named as a side file
    before = snapshot(tmp_path)
    code, err = run_cli(["convert", world["cfg"], world["weights"], out, "--quiet"], capsys)
    assert_refused(code, err, mine, "OUT")
    assert snapshot(tmp_path) == before and not out.exists()


def test_evaluate_never_writes_over_an_image_it_reads(world, tmp_path, capsys):
    data = tmp_path / "data"
    images = data / "images"
    images.mkdir(parents=True)
    rows = []
    for line in (world["data"] / "val.txt").read_text().splitlines():
        name, boxes = line.split(" ", 1)
        source = world["data"] / name
        (images / source.name).write_bytes(source.read_bytes())
        rows.append(f"images/{source.name} {boxes}")
    (data / "val.txt").write_text("\n".join(rows) + "\n")
    target = sorted(images.iterdir())[0]
    before = snapshot(tmp_path)
    for flag in ("--out", "--save-detections"):
        argv = ["evaluate", "--model", world["run"] / "final.keras", "--annotations",
                data / "val.txt", "--classes", world["data"] / "classes.txt",
                "--out", tmp_path / "e.json", "--no-plot", "--quiet"]
        argv[argv.index("--out") + 1] = target if flag == "--out" else tmp_path / "e.json"
        if flag == "--save-detections":
            argv += ["--save-detections", target]
        code, err = run_cli(argv, capsys)
        assert_refused(code, err, target, flag)
        assert snapshot(tmp_path) == before


def test_train_never_rewrites_an_input_inside_its_output(world, tmp_path, capsys):
    run = tmp_path / "run"
    run.mkdir()
    anchors = run / "anchors.txt"
    anchors.write_text(world["anchors"].read_text())
    before = snapshot(tmp_path)
    for extra in ([], ["--exist-ok"]):
        code, err = run_cli(["train", "--annotations", world["data"] / "train.txt",
                             "--classes", world["data"] / "classes.txt", "--variant", "tiny",
                             "--input-size", "64", "--anchors", anchors, "--output", run,
                             "--quiet", *extra], capsys)
        assert_refused(code, err, anchors, "--output")
        assert snapshot(tmp_path) == before


def test_detect_goes_on_past_an_unreadable_image_and_counts_it(world, tmp_path, capsys):
    images = _images(world, tmp_path)
    good = sorted(images.iterdir())
    (images / "broken.jpg").write_bytes(good[0].read_bytes()[:200])
    (images / "text.png").write_text("not an image")
    out = tmp_path / "drawn"
    code, err = run_cli(["detect", "--model", world["run"] / "final.keras", "--input", images,
                         "--output", out, "--save-txt", tmp_path / "labels", "--json",
                         tmp_path / "d.json", "--quiet"], capsys)
    assert code == 1, err
    assert "broken.jpg" in err and "text.png" in err and f"{len(good)} images processed, 2 " \
        "failed" in err
    assert sorted(p.name for p in out.iterdir() if not p.name.startswith(".")) == \
        sorted(p.name for p in good)
    assert not [p for p in tmp_path.rglob("*") if p.name.startswith(".yolo3-tmp-")]
    assert sorted(os.listdir(tmp_path / "labels"))[1:] == sorted(p.stem + ".txt" for p in good)


def test_every_output_folder_flag_has_its_writer_here(world, tmp_path):
    """Each flag declared as an output folder, in every command, is exercised above: a new one
    fails here until it joins WRITERS."""
    import argparse

    from yolo3.cli import build_parser
    from yolo3.cli.flags import OutputPath

    def walk(parser, words=()):
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, sub in action.choices.items():
                    yield from walk(sub, words + (name,))
            elif isinstance(action.type, OutputPath) and action.type.kind == "folder":
                yield " ".join(words), action.option_strings[0]
    declared = set(walk(build_parser()))
    covered = set()
    for writer in WRITERS + SLOW_WRITERS:
        argv = [str(a) for a in writer.argv(world, tmp_path / "out")]
        words = " ".join(a for a in argv[:2] if not a.startswith("-") and "/" not in a)
        covered |= {(c, f) for c, f in declared if f in argv and words.startswith(c)}
    covered |= set(COVERED_ELSEWHERE)
    assert declared and declared <= covered, sorted(declared - covered)


def test_a_named_output_of_another_kind_is_never_replaced(world, tmp_path, capsys):
    """``benchmark backends --json`` (like every JSON, PNG, model or text output) given a model
    or an annotation file is refused before any work: it exists and is not of the kind written."""
    model = tmp_path / "final.keras"
    model.write_bytes((world["run"] / "final.keras").read_bytes())
    rows = tmp_path / "val.txt"
    rows.write_text((world["data"] / "val.txt").read_text())
    before = snapshot(tmp_path)
    for target in (model, rows):
        code, err = run_cli(["benchmark", "backends", "--dry-run", "--json", target], capsys)
        assert_refused(code, err, "argument --json", "is not a JSON file")
        code, err = run_cli(["detect", "--model", world["run"] / "final.keras", "--input",
                             _image(world), "--output", tmp_path / "o", "--json", target],
                            capsys)
        assert_refused(code, err, "argument --json")
    assert snapshot(tmp_path) == before


def test_a_bad_environment_variable_is_named_before_any_work(world, tmp_path, capsys,
                                                             monkeypatch):
    monkeypatch.setenv("KERAS_BACKEND", "bogus")
    code, err = run_cli(["detect", "--model", world["run"] / "final.keras", "--input",
                         _image(world), "--output", tmp_path / "o"], capsys)
    assert_refused(code, err, "KERAS_BACKEND=bogus", "tensorflow, jax, torch")
    assert not (tmp_path / "o").exists()


def test_check_reports_an_image_list_written_with_windows_separators(world, tmp_path, capsys):
    from yolo3.data.yolo_layout import read_data_file  # noqa: F401  (the layout's own reader)
    root = tmp_path / "set"
    (root / "obj").mkdir(parents=True)
    for k, image in enumerate(sorted((world["data"] / "images").iterdir())[:2]):
        (root / "obj" / f"{k}.png").write_bytes(image.read_bytes())
        (root / "obj" / f"{k}.txt").write_text("0 0.5 0.5 0.2 0.2\n")
    (root / "train.txt").write_text("obj\\0.png\nobj/1.png\n")
    code, err = run_cli(["check", "--annotations", root / "train.txt", "--classes",
                         world["data"] / "classes.txt", "--quiet"], capsys)
    assert code == 1, err
    assert f"{root / 'train.txt'}:1: 1 lines name their image with Windows separators" in err
    (root / "train.txt").write_text("obj/0.png\nobj/1.png\n")
    code, err = run_cli(["check", "--annotations", root / "train.txt", "--classes",
                         world["data"] / "classes.txt", "--quiet"], capsys)
    assert code == 0, err


def test_an_output_that_is_an_input_of_its_own_kind_is_refused(world, tmp_path, capsys):
    """The input check itself (not the format's): a COCO JSON named as both the ground truth and
    evaluate's --out, and an annotation text file as kmeans' --out."""
    code, err = run_cli(["annotations", "--annotations", world["data"] / "val.txt", "--classes",
                         world["data"] / "classes.txt", "--to", "coco", "--out",
                         tmp_path / "coco", "--quiet"], capsys)
    assert code == 0, err
    truth = tmp_path / "coco" / "train.json"  # the split name --annotations gets
    rows = tmp_path / "train.txt"
    rows.write_text((world["data"] / "train.txt").read_text().replace(
        "images/", f"{world['data']}/images/"))
    before = snapshot(tmp_path)
    code, err = run_cli(["evaluate", "--model", world["run"] / "final.keras", "--annotations",
                         truth, "--out", truth, "--quiet"], capsys)
    assert_refused(code, err, truth, "--out", "is the input")
    code, err = run_cli(["kmeans", "--annotations", rows, "--clusters", "3", "--out", rows,
                         "--quiet"], capsys)
    assert_refused(code, err, rows, "--out", "is the input")
    assert snapshot(tmp_path) == before


@pytest.mark.parametrize("flag", ["--json", "--out", "--save-detections"])
def test_a_named_output_is_never_an_output_folders_record(world, tmp_path, capsys, flag):
    """``--json DIR/.yolo3-output.json`` would have replaced the folder's record of which files
    are yolo3's (and so handed the user's files to the next run): refused, nothing changed."""
    folder = tmp_path / "synthetic"  # any folder yolo3 wrote holds its record
    _run_ok(["synth", "--out", folder, "--num-images", "2", "--size", "32"], capsys)
    record = folder / ".yolo3-output.json"
    assert record.is_file()
    argv = {"--json": ["detect", "--model", world["run"] / "final.keras", "--input",
                       _image(world), "--output", tmp_path / "other", "--json", record],
            "--out": ["evaluate", "--model", world["run"] / "final.keras", "--annotations",
                      world["data"] / "val.txt", "--out", record],
            "--save-detections": ["evaluate", "--model", world["run"] / "final.keras",
                                  "--annotations", world["data"] / "val.txt", "--out",
                                  tmp_path / "e.json", "--save-detections", record]}[flag]
    before = snapshot(tmp_path)
    code, err = run_cli([*argv, "--quiet"], capsys)
    assert_refused(code, err, record, "names yolo3's record of an output folder")
    assert snapshot(tmp_path) == before
