"""The benchmarks' own arithmetic and runners (their timings are not tested: they are measured by
running them)."""
from __future__ import annotations

import json

import numpy as np
import pytest

from yolo3.benchmarks.recipe import (
    final_by_group,
    map_at,
    recipe_pairs,
    spread,
    time_to_reach,
)
from yolo3.benchmarks.training import forward_gflops


def test_time_to_accuracy_reading():
    times, maps = [10.0, 20.0, 30.0], [0.1, 0.5, 0.7]
    assert time_to_reach(times, maps, 0.5) == 20.0
    assert time_to_reach(times, maps, 0.8) is None
    assert map_at(times, maps, 25.0) == 0.5 and map_at(times, maps, 5.0) == 0.0
    assert map_at(times, maps, 30.0) == 0.7


def test_spread_over_seeds_matches_numpy():
    values = [0.062, 0.053, 0.071]
    mean, sd, lo, hi = spread(values)
    assert mean == pytest.approx(np.mean(values)) and sd == pytest.approx(np.std(values, ddof=1))
    assert (lo, hi) == (0.053, 0.071)
    assert spread([0.5]) == (0.5, 0.0, 0.5, 0.5)
    with pytest.raises(ValueError):
        spread([])


def test_runs_of_one_recipe_are_summarised_together():
    def run(group, final, seconds):
        return {"group": group, "global_batch": 16, "mAP50": [0.0, final * 3],
                "mAP50_95": [0.0, final], "time": [1.0, seconds]}
    curves = {"new#0": run("new", 0.06, 140), "new#1": run("new", 0.05, 150),
              "old#0": run("old", 0.01, 100)}
    groups = final_by_group(curves)
    assert sorted(groups) == ["new", "old"]
    assert groups["new"]["runs"] == 2 and groups["old"]["runs"] == 1
    assert groups["new"]["mAP50_95"][0] == pytest.approx(0.055)
    assert groups["new"]["mAP50"][2:] == pytest.approx((0.15, 0.18))
    assert groups["new"]["time"][0] == pytest.approx(145)
    assert groups["old"]["mAP50_95"][1] == 0.0


def test_old_and_new_runs_pair_by_training_seed():
    """The old-against-new summary compares the two recipes of one seed, one batch size only."""
    def run(group, seed):
        return {"group": group, "seed": seed}
    one = {"old": run("old", 0), "new": run("new", 0)}
    assert recipe_pairs(one) == [(0, one["old"], one["new"])]
    seeds = {"old#0": run("old", 0), "old#1": run("old", 1), "new#0": run("new", 0),
             "new#1": run("new", 1), "new#2": run("new", 2)}
    assert recipe_pairs(seeds) == [(0, seeds["old#0"], seeds["new#0"]),
                                   (1, seeds["old#1"], seeds["new#1"])]  # seed 2: no old run
    batches = {"old@8": run("old@8", 0), "new@8": run("new@8", 0)}
    assert recipe_pairs(batches) == []


def test_flop_counts_are_darknets():
    assert forward_gflops("yolov3", 416) == pytest.approx(65.86, abs=0.01)  # Darknet: 65.864 BFLOPs
    assert forward_gflops("tiny", 416) == pytest.approx(5.56, abs=0.01)  # Darknet: 5.571 (with maxpool 1)
    # the decoupled head: tiny's network less its output convolutions, plus two 3x3 branches
    assert 5.56 < forward_gflops("tiny-af", 416) < 2 * 5.56


def test_opencv_runner_gives_the_raw_maps_of_the_converted_body(tmp_path):
    """The accuracy table decodes OpenCV's maps with our host decoding: they must be the maps our
    converted body computes, in the same layout."""
    from yolo3.benchmarks.contenders import OpenCVRunner
    from yolo3.checkpoint.darknet_convert import convert
    from yolo3.darknet.layout import layout_cfg_text
    from yolo3.darknet.random_weights import write_random_weights
    from yolo3.inference.detector import YOLO
    cfg, weights, model = tmp_path / "t.cfg", tmp_path / "t.weights", tmp_path / "t.keras"
    cfg.write_text(layout_cfg_text("tiny", num_classes=3, input_size=(96, 96)))
    write_random_weights(str(cfg), str(weights), seed=1)
    convert(str(cfg), str(weights), str(model), progress=False)
    x = np.random.default_rng(0).uniform(0, 1, (2, 96, 96, 3)).astype(np.float32)
    runner = OpenCVRunner(str(cfg), str(weights), (32, 16))
    ours = YOLO(str(model), precision="float32").forward(x)
    theirs = runner.run(x)
    assert sorted(theirs) == ["raw_s16", "raw_s32"]
    for mine, key in zip(ours, ("raw_s32", "raw_s16")):
        assert theirs[key].shape == mine.shape
        err = np.linalg.norm(theirs[key] - mine) / np.linalg.norm(mine)
        assert err < 1e-5, (key, err)


_FAKE_PEER = r'''#!PYTHON
"""Stands in for the peer's Python: instead of training, answers with the labels it was given."""
import json, os, sys
args = dict(zip(sys.argv[2::2], sys.argv[3::2]))
root = os.path.dirname(args["--data"])
dets = []
for image in open(args["--val-list"]).read().split():
    stem = None
    for name in os.listdir(os.path.join(root, "images", "val")):
        if os.path.realpath(os.path.join(root, "images", "val", name)) == os.path.realpath(image):
            stem = os.path.splitext(name)[0]
    from PIL import Image
    w, h = Image.open(image).size
    boxes, classes = [], []
    for row in open(os.path.join(root, "labels", "val", stem + ".txt")).read().splitlines():
        c, cx, cy, bw, bh = map(float, row.split())
        boxes.append([(cx - bw / 2) * w, (cy - bh / 2) * h, (cx + bw / 2) * w, (cy + bh / 2) * h])
        classes.append(int(c))
    dets.append({"image": image, "boxes": boxes, "scores": [0.9] * len(boxes), "classes": classes})
os.makedirs(args["--out"], exist_ok=True)
json.dump(dets, open(os.path.join(args["--out"], "detections.json"), "w"))
json.dump({"training_seconds": 1.5, "ultralytics": "fake", "torch": "none", "model": args.get("--model", "yolov3-tinyu.yaml"),
           "device": args.get("--device")},
          open(os.path.join(args["--out"], "peer.json"), "w"))
assert args["--batch"] == "16" and args["--imgsz"] == "96" and args["--epochs"] == "3", args
'''


def test_peer_is_exported_in_the_yolo_layout_and_scored_like_ours(tmp_path):
    """The peer's side runs in another interpreter; one that answers with the exported labels
    must score mAP 1.0 through the benchmark's export, hand-over and COCO scoring."""
    import argparse
    import os
    import sys

    from yolo3.benchmarks.recipe import peer_run
    from yolo3.data.synthetic import make_synthetic_dataset
    make_synthetic_dataset(str(tmp_path / "d"), 12, (80, 120), val_fraction=0.5, seed=2)
    fake = tmp_path / "peer-python"
    fake.write_text(_FAKE_PEER.replace("PYTHON", sys.executable))
    fake.chmod(0o755)
    args = argparse.Namespace(peer_python=str(fake), input_size=96, epochs=3, seed=0, threads=2)
    work = tmp_path / "work"
    work.mkdir()
    result = peer_run(args, str(tmp_path / "d"), str(work), 16)
    assert result["mAP50"] == pytest.approx(1.0) and result["mAP50_95"] == pytest.approx(1.0)
    assert result["seconds"] == 1.5 and result["global_batch"] == 16
    assert len(os.listdir(work / "yolo" / "labels" / "val")) == 6
    assert result["facts"]["device"] == "cpu"  # the default
    args.peer_device = "0"
    work = tmp_path / "work0"
    work.mkdir()
    assert peer_run(args, str(tmp_path / "d"), str(work), 16)["facts"]["device"] == "0"


def test_peer_only_trains_the_peer_and_nothing_of_yolo3(tmp_path, monkeypatch, capsys):
    from yolo3.benchmarks import recipe
    from yolo3.cli import build_parser

    def never(*a, **k):
        raise AssertionError("yolo3 trained with --peer-only")
    peer = {"seconds": 3.0, "mAP50": 0.5, "mAP50_95": 0.25, "global_batch": 4, "threads": 2,
            "facts": {"ultralytics": "fake", "model": "yolov3-tinyu.yaml", "torch": "none"}}
    monkeypatch.setattr(recipe, "run_child", never)
    monkeypatch.setattr(recipe, "peer_run", lambda *a: peer)
    monkeypatch.setattr(recipe, "check_peer_python", lambda args: None)
    monkeypatch.setattr(recipe, "matmul_peak_gflops", lambda: 100.0)
    args = build_parser().parse_args([
        "benchmark", "recipe", "--peer", "ultralytics", "--peer-only", "--peer-device", "0",
        "--num-images", "4", "--val-images", "2", "--image-size", "64", "--input-size", "64",
        "--batch-size", "4", "--cpu-replicas", "0", "--epochs", "1"])
    assert args.peer_device == "0"
    assert recipe.run(args) == 0
    out = capsys.readouterr().out
    assert "| ultralytics fake yolov3-tinyu.yaml" in out
    assert "  the peer: 3 s, mAP@0.5 0.500, mAP@0.5:0.95 0.250" in out  # printed as it ends


def test_each_run_is_printed_as_it_ends(tmp_path, monkeypatch, capsys):
    """A benchmark stopped at its time limit (the GPU script's steps) still shows its finished
    runs: each run's line comes before the tables."""
    from yolo3.benchmarks import recipe
    from yolo3.cli import build_parser
    history = {"seconds": [2.0, 3.0], "mAP50": [0.1, 0.4], "mAP50_95": [0.05, 0.2],
               "loss": [9.0, 5.0]}
    monkeypatch.setattr(recipe, "run_child", lambda *a, **k: dict(history))
    monkeypatch.setattr(recipe, "matmul_peak_gflops", lambda: 100.0)
    args = build_parser().parse_args([
        "benchmark", "recipe", "--recipes", "new", "--num-images", "4", "--val-images", "2",
        "--image-size", "64", "--input-size", "64", "--batch-size", "4", "--cpu-replicas", "0",
        "--epochs", "2"])
    assert recipe.run(args) == 0
    out = capsys.readouterr().out
    line = "  new: 2 epochs in 5 s, mAP@0.5 0.400, mAP@0.5:0.95 0.200"
    assert line in out and out.index(line) < out.index("| epoch |")


def test_peer_needs_its_own_python(tmp_path):
    import argparse

    from yolo3.benchmarks.recipe import peer_run
    from yolo3.core.errors import ArgumentError
    args = argparse.Namespace(peer_python=None, input_size=96, epochs=3, seed=0, threads=2)
    with pytest.raises(ArgumentError, match="pip install ultralytics"):
        peer_run(args, str(tmp_path), str(tmp_path), 16)


def test_peer_driver_imports_nothing_of_yolo3():
    """It runs under the peer's interpreter, where yolo3 is not installed."""
    import ast
    import subprocess
    import sys
    from pathlib import Path

    import yolo3.benchmarks as benchmarks
    path = Path(benchmarks.__file__).parent / "ultralytics_peer.py"
    tree = ast.parse(path.read_text())
    modules = {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    modules |= {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}
    assert not [m for m in modules if m.split(".")[0] == "yolo3"], modules
    out = subprocess.run([sys.executable, "-I", str(path), "--help"], capture_output=True, text=True)
    assert out.returncode == 0 and "--val-list" in out.stdout, out.stderr


def test_benchmark_refuses_a_missing_peer_python_before_training(tmp_path, capsys):
    """Exit 2 with the install command, at once: nothing is generated or trained first."""
    from yolo3.cli import main
    code = main(["benchmark", "recipe", "--peer", "ultralytics", "--peer-python",
                 str(tmp_path / "none" / "python"), "--data", str(tmp_path)])
    assert code == 2
    assert "--peer-python" in capsys.readouterr().err


@pytest.mark.parametrize("extra, message", [
    ("ignore_iou=abc", "--extra ignore_iou=abc: ignore_iou must be a number, got 'abc'"),
    ("ignore_io=0.7", "--extra ignore_io=0.7: no setting 'ignore_io' (did you mean ignore_iou?)"),
    ("epochs=3", "--extra epochs=3: epochs is set by the benchmark itself (use --epochs)"),
    ("lr", "argument --extra: expected KEY=VALUE, a setting of yolo3 train by name, got 'lr'"),
])
def test_benchmark_refuses_a_bad_extra_setting_before_anything_is_made(tmp_path, capsys, extra,
                                                                        message):
    """Exit 2 naming the pair, at once: no data is generated and nothing trained first."""
    from yolo3.cli import main
    code = main(["benchmark", "recipe", "--num-images", "8", "--extra", extra])
    err = capsys.readouterr().err
    assert code == 2 and message in err and "Traceback" not in err


def test_inference_benchmark_refuses_an_anchor_free_variant_naming_why(capsys):
    """It benchmarks a Darknet cfg, which an anchor-free variant has none of: exit 2, the reason."""
    from yolo3.cli import main
    code = main(["benchmark", "inference", "--variant", "tiny-af", "--input-size", "64"])
    err = capsys.readouterr().err
    assert code == 2 and "Traceback" not in err and "unexpected" not in err
    assert "variant 'tiny-af' has an anchor-free head" in err and "its base 'tiny' has one" in err


def test_every_setting_the_benchmark_sets_itself_is_refused_in_extra():
    import argparse

    from yolo3.benchmarks.recipe import _OWN_SETTINGS, _own_settings
    args = argparse.Namespace(variant="tiny", input_size=192, epochs=1, cpu_replicas=0,
                              augment="light")
    assert set(_own_settings(args, "d", None, "o", 8, 0)) <= set(_OWN_SETTINGS)


def test_benchmark_extra_settings_are_read_as_their_types():
    from yolo3.benchmarks.recipe import _extra
    assert _extra(["ignore_iou=0.7", "multi_scale=[160,224]", "ema=False", "lr=none",
                   "weights=tiny_coco.keras"]) == dict(
        ignore_iou=0.7, multi_scale=(160, 224), ema=False, lr=None, weights="tiny_coco.keras")


def test_video_contender_detects_every_frame_of_the_file(tmp_path):
    """The video row times reading and detecting each frame of the file, as ``yolo3 detect``
    does (its frames/s are frames over that time)."""
    from yolo3.benchmarks.contenders import _video_detections, yolo3_inference
    from yolo3.benchmarks.inference import _synthetic_jpeg, _synthetic_video
    from yolo3.checkpoint.darknet_convert import convert
    from yolo3.darknet.layout import layout_cfg_text
    from yolo3.darknet.random_weights import write_random_weights
    from yolo3.inference.detector import load_detector
    cfg, weights, model = tmp_path / "t.cfg", tmp_path / "t.weights", tmp_path / "t.keras"
    cfg.write_text(layout_cfg_text("tiny", num_classes=3, input_size=(96, 96)))
    write_random_weights(str(cfg), str(weights), seed=1)
    convert(str(cfg), str(weights), str(model), progress=False)
    image = _synthetic_jpeg(str(tmp_path / "s.jpg"), seed=0)
    video = _synthetic_video(str(tmp_path / "v.mp4"), image, frames=5)
    assert _video_detections(load_detector(str(model), engine="keras"), video) == 5
    result = yolo3_inference(dict(model=str(model), size=96, score=0.3, precision="float32",
                                  engine="keras", what="video", video=video, image=image, runs=2,
                                  warmup=0))
    assert len(result["times"]) == 2 and all(t > 0 for t in result["times"])


def test_inference_benchmark_refuses_weights_without_their_cfg(tmp_path, capsys):
    """Exit 2 naming both flags, before anything is measured or written."""
    from yolo3.cli import main
    (tmp_path / "x.weights").write_bytes(b"\x00" * 20)
    code = main(["benchmark", "inference", "--weights", str(tmp_path / "x.weights")])
    assert code == 2
    assert "--weights needs --cfg" in capsys.readouterr().err


@pytest.mark.slow  # CI runs it (.ci/run); about 25 s on 2 cores, kept out of the default 15 minutes
def test_training_children_time_real_steps_and_return_losses():
    from yolo3.benchmarks.training import loss_child, throughput_child
    p = dict(model="tiny", size=64, batch=2, steps=1, policy="float32", jit=False, replicas=1)
    result = throughput_child(p)
    assert result["img_s"] > 0 and 0.0 <= result["wait"] < 0.5  # fixed batch: no data wait
    losses = loss_child(dict(model="tiny", size=64, batch=2, steps=3, policy="float32"))["losses"]
    assert len(losses) == 3 and all(np.isfinite(losses)) and losses[0] > 0


def test_training_benchmark_prints_each_contender_beside_float32(monkeypatch, capsys):
    import yolo3.benchmarks.training as training
    from yolo3.cli import main
    calls = []

    def fake_child(target, p):
        calls.append((target.rsplit(":", 1)[1], p))
        if target.endswith("profile_child"):
            scale = 1.0 if p["policy"] == "float32" else 0.5
            return {"times": {"_MklNativeConv2D": 40.0 * scale, "Mul": 10.0}, "wall_ms": 50 * scale}
        if target.endswith("loss_child"):
            return {"losses": [10.0, 8.0] if p["policy"] == "float32" else [10.0, 8.4]}
        return {"img_s": 20.0 if p["policy"] == "float32" else 30.0, "wait": 0.0}
    monkeypatch.setattr(training, "run_child", fake_child)
    monkeypatch.setattr(training, "matmul_peak_gflops", lambda: 100.0)
    monkeypatch.setattr(training, "mixed_policy", lambda: "mixed_bfloat16")

    def run(*flags):
        """The tiny-64 benchmark with ``flags``: its output, the children's calls in ``calls``."""
        calls.clear()
        code = main(["benchmark", "training", "--variants", "tiny", "--size", "64", "--batch", "2",
                     "--steps", "1", "--replicas", "0", "--no-jit", *flags])
        assert code == 0
        return capsys.readouterr().out

    out = run("--loss-steps", "2")
    assert [c[0] for c in calls] == ["throughput_child"] * 2 + ["loss_child"] * 2
    assert "| tiny-64 b2, CPU, float32 | 20.00 | 1.00x |" in out
    assert "| tiny-64 b2, CPU, mixed_bfloat16 | 30.00 | 1.50x |" in out
    assert "after 2 steps float32 8.0000, mixed_bfloat16 8.4000 (+5.00%)" in out
    out = run("--keras-batch-norm")
    assert [c[1].get("fused_batch_norm", True) for c in calls] == [True, False, True, False]
    assert "| tiny-64 b2, CPU, float32, Keras's batch norm | 20.00 | 1.00x |" in out
    assert "| tiny-64 b2, CPU, mixed_bfloat16, Keras's batch norm | 30.00 | 1.50x |" in out
    out = run("--profile", "--profile-ops", "1")
    assert [c[0] for c in calls] == ["throughput_child"] * 2 + ["profile_child"] * 2
    assert "(wall per step under the profiler: float32 50 ms, mixed_bfloat16 25 ms, 2.00x)" in out
    assert "| convolution forward | 40 | 20 | 2.00x | 66.7% |" in out
    assert "| other ops | 10 | 10 | 1.00x | 33.3% |" in out
    assert "|   _MklNativeConv2D | 40 | 20 | 2.00x | 66.7% |" in out and "|   Mul |" not in out


def test_op_profile_sums_compute_thread_ops_per_type_and_step():
    from tensorflow.tsl.profiler.protobuf import xplane_pb2

    from yolo3.benchmarks.op_profile import GROUPS, group, op_times
    space = xplane_pb2.XSpace()
    plane = space.planes.add(name="/host:CPU")
    names = {1: "body/conv_1/Conv2D:_MklNativeConv2D", 2: "grad/conv_1:_MklNativeConv2DBackpropFilter",
             3: "loss/Cast:Cast", 4: "ExecutorState::Process", 5: "bn/mul:Mul"}
    for i, name in names.items():
        plane.event_metadata[i].id, plane.event_metadata[i].name = i, name
    compute = plane.lines.add(name="tf_Compute/123")
    for metadata, ms in ((1, 4.0), (1, 2.0), (2, 6.0), (3, 1.0), (4, 100.0), (5, 0.5)):
        compute.events.add(metadata_id=metadata, duration_ps=int(ms * 1e9))
    python = plane.lines.add(name="python")  # the Python thread's own events are not ops
    python.events.add(metadata_id=5, duration_ps=int(50 * 1e9))
    other = space.planes.add(name="/device:GPU:0")  # other planes are ignored
    other.lines.add(name="tf_Compute/9").events.add(metadata_id=1, duration_ps=10 ** 12)
    times = op_times(space.SerializeToString(), steps=2)
    assert times == {"_MklNativeConv2D": 3.0, "_MklNativeConv2DBackpropFilter": 3.0, "Cast": 0.5,
                     "Mul": 0.25}
    assert group(times) == dict(zip(GROUPS, (3.0, 0.0, 3.0, 0.5, 0.25)))


def test_training_profile_child_measures_real_op_types():
    from yolo3.benchmarks.training import profile_child
    result = profile_child(dict(model="tiny", size=64, batch=2, steps=1, policy="float32"))
    times = result["times"]
    assert result["wall_ms"] > 0
    assert any("Conv2D" in op and "Backprop" not in op for op in times)
    assert any("Conv2DBackpropFilter" in op for op in times)
    assert all(ms >= 0 for ms in times.values()) and sum(times.values()) > 0


def test_the_tiles_set_has_small_objects_in_large_images(tmp_path):
    import argparse

    from locations import shared

    from yolo3.benchmarks.tiles import make_high_resolution_set
    from yolo3.data.annotations import load_annotations
    args = argparse.Namespace(image_size=[540, 960], num_images=6, val_images=2, photos=str(
        shared("images")), seed=1, min_px=8.0, max_px=40.0, max_objects=10, class_shares=None)
    folder = make_high_resolution_set(str(tmp_path / "hd"), args)
    records = load_annotations(f"{folder}/annotations.txt")
    assert len(records) == 8 and {r.image_hw for r in records} == {(540, 960)}
    boxes = np.concatenate([r.boxes for r in records])
    longest = np.max(boxes[:, 2:4] - boxes[:, :2], axis=1)
    # the drawn sides lie in 8-40 px; a box spans the visible pixels, so it may be smaller
    assert len(boxes) > 10 and longest.max() <= 40 + 1 and np.median(longest) < 25


@pytest.mark.parametrize("size, tiled, resize, better, right", [
    (320, 0.080, 0.060, "tiled", True), (None, 0.080, 0.060, "tiled", False),
    (None, 0.050, 0.060, "resize-only", True), (320, 0.050, 0.060, "resize-only", False),
    (320, 0.0601, 0.0640, "equal", True), (None, 0.0640, 0.0601, "equal", True)])
def test_the_tiles_benchmark_judges_its_advice(size, tiled, resize, better, right):
    """Right when the advice picks the higher mAP, either within 0.005 (the issue's margin)."""
    from yolo3.benchmarks.tiles import advice_line
    from yolo3.ops.tiles import TileSuggestion
    line, got = advice_line(TileSuggestion(size, 0.7, "70% of the boxes ..."), tiled, resize)
    assert got is right
    assert f"better here: {better} (tiled + sliced {tiled:.4f}, resize-only {resize:.4f})" in line
    assert line.startswith(f"advice (yolo3 check, --tile auto): "
                           f"{'tiles of 320 px' if size else 'whole images'} (70% of the boxes")
    assert line.endswith("right" if right else "wrong")


def test_the_balance_contenders_are_valid_settings_and_unknown_ones_are_refused(capsys):
    from cli_harness import assert_refused, run_cli

    from yolo3.benchmarks.balance import CONTENDERS
    from yolo3.config.train_config import TrainConfig, check
    for settings in CONTENDERS.values():
        check(TrainConfig(annotations=__file__, classes=__file__, output="out", **settings))
    code, err = run_cli(["benchmark", "balance", "--contenders", "none", "oversample"], capsys)
    assert_refused(code, err, "--contenders", "oversample")


def test_the_balance_set_makes_the_last_class_rare(tmp_path):
    import argparse

    from locations import shared

    from yolo3.benchmarks.balance import _make_set
    from yolo3.data.annotations import load_annotations
    args = argparse.Namespace(rare_share=0.05, num_images=100, val_images=10, photos=str(
        shared("images")))
    folder = _make_set(str(tmp_path / "rare"), args, seed=3)
    boxes = np.concatenate([r.boxes for r in load_annotations(f"{folder}/annotations.txt")])
    assert np.mean(boxes[:, 4] == 3) == pytest.approx(0.05, abs=0.03)


def test_the_data_benchmark_times_past_the_first_burst_of_every_worker():
    """16 threads finish their first batches together: 10 timed batches after 2 would read that
    burst from the queue (5,676 images/s on an H200's 16 cores, against 882 on 8 threads)."""
    from yolo3.benchmarks.data import steady_batches
    assert steady_batches(2, 10, 16) == (32, 64)
    assert steady_batches(2, 10, 1) == (2, 10)  # what was asked, where it is already enough
    assert steady_batches(50, 200, 4) == (50, 200)


def test_track_detections_err_as_documented():
    """The benchmark's stand-in detector: only considered boxes, about --miss of them missed,
    corners jittered by --jitter of the size, false positives at low scores."""
    from yolo3.benchmarks.track import noisy_detections
    rng = np.random.default_rng(0)
    rows = np.array([[k, 10 * k, 10, 10 * k + 40, 50, k % 4, 1.0, 1.0 if k % 5 else 0.0]
                     for k in range(1, 201)], float)
    boxes, scores, classes = noisy_detections(rows, rng, (480, 640), 0.1, 0.04, 0.0)
    considered = int((rows[:, 7] > 0).sum())
    assert 0.85 * considered < len(boxes) < 0.95 * considered
    assert ((scores >= 0.05) & (scores <= 1)).all() and set(classes) <= {0, 1, 2, 3}
    none_missed = noisy_detections(rows, np.random.default_rng(1), (480, 640), 0.0, 0.04, 0.0)[0]
    kept = rows[rows[:, 7] > 0]
    wh = kept[:, 3:5] - kept[:, 1:3]
    error = (none_missed - kept[:, 1:5]) / np.concatenate([wh, wh], axis=1)
    assert 0.03 < error.std() < 0.05  # the jitter's share of the size
    _, fp_scores, _ = noisy_detections(rows[:0], rng, (480, 640), 0.1, 0.04, 50.0)
    assert 30 < len(fp_scores) < 70 and fp_scores.max() <= 0.5


@pytest.mark.slow  # CI runs it; the trackers and their scores keep their own default tests
def test_track_benchmark_runs_every_tracker_on_the_same_detections(tmp_path, capsys):
    from yolo3.cli import main
    js = tmp_path / "track.json"
    assert main(["benchmark", "track", "--sequences", "1", "--seeds", "0", "--frames", "25",
                 "--size", "96", "128", "--objects", "4", "--style", "shapes", "--trackers",
                 "bytetrack", "sort", "--json", str(js)]) == 0
    out = capsys.readouterr().out
    assert "| tracker | HOTA | IDF1 | MOTA |" in out and "share of detection" in out
    figures = json.loads(js.read_text())
    assert set(figures["trackers"]) == {"bytetrack", "sort"} and figures["detection_ms"] > 0
    for row in figures["trackers"].values():
        assert 0 < row["HOTA"] <= 1 and row["ms_per_frame"] > 0
        assert row["share_of_detection"] == pytest.approx(row["ms_per_frame"] /
                                                          figures["detection_ms"])


def test_track_peer_driver_feeds_ultralytics_the_same_detections(tmp_path):
    """The peer's driver under a stand-in Ultralytics (the real one needs torch): each frame's
    detections reach both trackers as Ultralytics' results do (conf, cls, xywh, boolean
    indexing), the frame as BGR, and the rows come back as the benchmark reads them; nothing of
    yolo3 is imported there."""
    import ast
    import subprocess
    import sys
    from pathlib import Path

    import cv2

    import yolo3.benchmarks as benchmarks
    driver = Path(benchmarks.__file__).parent / "ultralytics_track_peer.py"
    tree = ast.parse(driver.read_text())
    modules = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}
    assert not [m for m in modules if m.split(".")[0] == "yolo3"], modules
    fake = tmp_path / "site" / "ultralytics"
    (fake / "trackers").mkdir(parents=True)
    (fake / "__init__.py").write_text("__version__ = 'stand-in'\n")
    (fake / "utils").mkdir()
    (fake / "utils" / "__init__.py").write_text(
        "class YAML:\n    @staticmethod\n    def load(path): return {'name': path}\n"
        "class IterableSimpleNamespace:\n    def __init__(self, **kw): self.__dict__.update(kw)\n")
    (fake / "utils" / "checks.py").write_text("def check_yaml(name): return name\n")
    (fake / "trackers" / "__init__.py").write_text("")
    (fake / "trackers" / "byte_tracker.py").write_text(
        "import numpy as np\n"
        "class BYTETracker:\n"
        "    def __init__(self, args): self.args = args\n"
        "    def update(self, results, img):\n"
        "        assert img.ndim == 3 and img[0, 0, 0] == 255  # BGR: blue first\n"
        "        keep = results.conf > 0.3\n"
        "        r = results[keep]\n"
        "        xywh = r.xywh\n"
        "        x1, y1 = xywh[:, 0] - xywh[:, 2] / 2, xywh[:, 1] - xywh[:, 3] / 2\n"
        "        ids = np.arange(1, len(r) + 1)\n"
        "        return np.stack([x1, y1, x1 + xywh[:, 2], y1 + xywh[:, 3], ids, r.conf, r.cls,\n"
        "                         np.flatnonzero(keep)], 1) if len(r) else np.zeros((0, 8))\n")
    (fake / "trackers" / "bot_sort.py").write_text(
        "from .byte_tracker import BYTETracker\nclass BOTSORT(BYTETracker):\n    pass\n")
    frame = tmp_path / "f.png"
    image = np.zeros((20, 30, 3), np.uint8)
    image[..., 2] = 255  # RGB blue: BGR's first channel
    cv2.imwrite(str(frame), image[..., ::-1])
    boxes = np.array([[1, 2, 11, 12], [5, 5, 9, 9]], np.float32)
    np.savez(tmp_path / "d.npz", frames=np.array([str(frame)] * 2), boxes_0=boxes,
             scores_0=np.array([0.9, 0.1], np.float32), classes_0=np.array([1, 2]),
             boxes_1=boxes[:0], scores_1=np.zeros(0, np.float32), classes_1=np.zeros(0))
    proc = subprocess.run([sys.executable, str(driver), "--detections",
                           str(tmp_path / "d.npz"), "--out", str(tmp_path / "t.npz")],
                          capture_output=True, text=True, cwd=tmp_path,
                          env={"PYTHONPATH": str(tmp_path / "site"), "PATH": "/usr/bin"})
    assert proc.returncode == 0, proc.stderr
    out = np.load(tmp_path / "t.npz")
    for name in ("ultralytics-bytetrack", "ultralytics-botsort"):
        np.testing.assert_allclose(out[f"{name}_rows"], [[1, 1, 1, 2, 11, 12, 0.9]], rtol=1e-6)
        assert out[f"{name}_seconds"] >= 0
    assert str(out["version"]) == "stand-in"


MEMORY_CHILD = """
import subprocess, sys, time
held = bytearray(200_000_000)  # touched: resident
grandchild = subprocess.Popen([sys.executable, "-c",
    "import time; b = bytearray(400_000_000); time.sleep(1.0)"])
grandchild.wait()
print("done")
"""


def test_run_measured_sees_the_largest_process_and_the_tree_together():
    """A parent holding 200 MB while its child holds 400 MB: the largest process peaks at 400 MB
    (what /usr/bin/time reports), the two together at 600 MB."""
    import sys

    from yolo3.benchmarks.memory import run_measured
    m = run_measured([sys.executable, "-c", MEMORY_CHILD])
    assert m.returncode == 0 and m.stdout.strip() == "done"
    assert 400e6 <= m.largest_bytes < 520e6, m
    assert 600e6 <= m.peak_bytes < 800e6, m
    failed = run_measured([sys.executable, "-c", "import sys; sys.exit('bad input')"])
    assert failed.returncode == 1 and "bad input" in failed.stderr
    slow = run_measured([sys.executable, "-c", "import time; time.sleep(30)"], timeout=0.5)
    assert slow.returncode == -9 and slow.seconds < 10


@pytest.mark.slow
@pytest.mark.extended  # seven exports and their timings (326 s in CI's slow set)
def test_export_benchmark_gives_every_formats_time_memory_and_size(tmp_path):
    """tiny-af (no Darknet layout: random Keras weights, no OpenCV DNN) at 96: a cost row per
    format with its seconds and both peaks, then the latency table."""
    import subprocess
    import sys
    proc = subprocess.run([sys.executable, "-m", "yolo3", "benchmark", "export", "--variants",
                           "tiny-af", "--input-size", "96", "--runs", "1", "--rounds", "1",
                           "--warmup", "0", "--calibration-images", "4"],
                          capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = proc.stdout.splitlines()
    rows = {line.split(" | ")[0].lstrip("| "): line.split(" | ") for line in lines
            if line.startswith("| ") and " GB | " in line}
    assert set(rows) == {"SavedModel", "TFLite float32", "TFLite float16", "TFLite int8", "ONNX",
                         "OpenVINO IR", "OpenVINO int8 (NNCF)"}, proc.stdout
    for label, cells in rows.items():
        seconds, largest, together = float(cells[1]), cells[2], cells[3]
        assert seconds > 0 and largest.endswith(" GB") and together.endswith(" GB"), cells
        assert 0.3 < float(largest[:-3]) <= float(together[:-3]) < 4.0, cells
    assert "tiny-af-96 (random Keras weights)" in proc.stdout
    assert any(line.startswith("| ONNX Runtime |") for line in lines), proc.stdout


def test_the_processes_benchmark_times_steps_after_the_warm_up():
    from yolo3.benchmarks.processes import _step_seconds
    ends = [0.0, 10.0, 10.5, 11.0, 11.6, 12.0]  # the first step compiles
    assert _step_seconds(ends, 2) == pytest.approx(0.5)
    assert _step_seconds(ends, 1) == pytest.approx(0.5)  # median: the compile step outweighed


def test_the_processes_benchmark_refuses_more_processes_than_cores(capsys):
    import os

    from yolo3.cli import main
    too_many = len(os.sched_getaffinity(0)) + 1
    assert main(["benchmark", "processes", "--processes", str(too_many)]) == 2
    err = capsys.readouterr().err
    assert f"--processes {too_many}: one core each" in err and "Traceback" not in err


@pytest.mark.slow
@pytest.mark.extended  # five training processes (404 s in CI's slow set)
def test_the_processes_benchmark_runs_the_contenders_side_by_side(tmp_path, capsys):
    pytest.importorskip("jax", reason="JAX is not installed here (the test extra has it)")
    from yolo3.cli import main
    out = tmp_path / "processes.json"
    assert main(["benchmark", "processes", "--size", "64", "--batch-size", "2", "--steps", "3",
                 "--warmup", "1", "--num-images", "16", "--json", str(out)]) == 0
    text = capsys.readouterr().out
    assert "CPU flags:" in text and "1 process x 1 core" in text
    assert "2 processes x 1 core, replica BN" in text and text.count("target 1.7x") == 2
    figures = json.loads(out.read_text())
    assert figures["one"]["images_per_s"] > 0
    assert [row["replica_batch_norm"] for row in figures["several"]] == [False, True]
    for row in figures["several"]:
        assert row["images_per_s"] > 0 and row["processes"] == 2
        assert row["ratio"] == pytest.approx(row["images_per_s"] / figures["one"]["images_per_s"])


@pytest.mark.parametrize("variant", ["tiny", "tiny-af"])
def test_the_recipe_benchmarks_kmeans_anchors_are_the_heads_own(variant, monkeypatch, capsys):
    """--anchors kmeans: an anchor head trains on k-means anchors of the data (the file each run
    reads holds them), an anchor-free head on none; the report line names the head."""
    import numpy as np

    from yolo3.benchmarks import recipe
    from yolo3.cli import build_parser
    from yolo3.config.specs import get_spec
    from yolo3.ops.anchors import read_anchors
    seen = []

    def fake_child(target, payload, **kwargs):
        anchors = payload["config"].get("anchors")
        seen.append(None if anchors is None else read_anchors(anchors))
        return {"seconds": [1.0], "mAP50": [0.1], "mAP50_95": [0.05], "loss": [3.0]}
    monkeypatch.setattr(recipe, "run_child", fake_child)
    monkeypatch.setattr(recipe, "matmul_peak_gflops", lambda: 100.0)
    args = build_parser().parse_args([
        "benchmark", "recipe", "--recipes", "new", "--num-images", "8", "--val-images", "2",
        "--image-size", "64", "--input-size", "64", "--batch-size", "4", "--cpu-replicas", "0",
        "--epochs", "1", "--variant", variant, "--anchors", "kmeans"])
    assert recipe.run(args) == 0
    out = capsys.readouterr().out
    if variant == "tiny":
        assert seen[0].shape == (6, 2)
        assert not np.allclose(seen[0], get_spec("tiny").default_anchors(), atol=0.5)
        assert "anchor head, anchors " in out
    else:
        assert seen == [None] and "anchor-free head" in out


def test_every_feed_contender_is_a_valid_run_of_yolo3_train(tmp_path):
    """``benchmark feed``'s contenders differ only in where the pixels are made: each is a run
    yolo3 train accepts, ``kept`` keeps the images on the device, ``fixed`` and ``host`` are
    the same run (``fixed`` repeats its first batch)."""
    from yolo3.benchmarks.feed import FEEDS, feed_settings
    from yolo3.config.train_config import TrainConfig
    from yolo3.training.train import validate_config
    p = dict(train=str(tmp_path / "t.txt"), val=str(tmp_path / "v.txt"),
             classes=str(tmp_path / "c.txt"), output=str(tmp_path / "out"), variant="tiny-af",
             size=64, batch=2, epochs=2, mosaic=1.0, workers=0, precision="auto")
    for name in ("t", "v"):
        (tmp_path / f"{name}.txt").write_text("")
    (tmp_path / "c.txt").write_text("a\n")
    settings = {feed: feed_settings({**p, "feed": feed}) for feed in FEEDS}
    for feed, values in settings.items():
        validate_config(TrainConfig(**values))
        assert {k: v for k, v in values.items() if k not in FEEDS[feed]} == \
            {k: v for k, v in settings["host"].items() if k not in FEEDS["host"]}
    assert settings["kept"]["cache"] == "device" and settings["fixed"] == settings["host"]


def test_the_fixed_feed_repeats_the_first_batch_and_closes_its_source():
    from yolo3.benchmarks.feed import repeated

    class Source:
        closed = False

        def __len__(self):
            return 3

        def __getitem__(self, k):
            return ("batch", k)

        def close(self):
            self.closed = True

    source = Source()
    fixed = repeated(source)
    assert len(fixed) == 3 and [fixed[k] for k in range(3)] == [("batch", 0)] * 3
    assert source.closed


@pytest.mark.slow  # two short trainings in processes of their own (about a minute on 2 cores)
def test_the_feed_benchmark_trains_each_contender_and_prints_its_share(tmp_path, capsys):
    """The fixed batch against the images kept on the device, side by side in one run."""
    from yolo3.cli.benchmark import main
    from yolo3.data.synthetic import make_synthetic_dataset
    make_synthetic_dataset(str(tmp_path / "data"), 12, (64, 80), val_fraction=0.25)
    assert main(["feed", "--data", str(tmp_path / "data"), "--input-size", "64",
                 "--batch-size", "2", "--epochs", "2", "--feeds", "fixed", "kept",
                 "--workers", "1"]) == 0
    out = capsys.readouterr().out
    assert "CPU flags" in out and "kept   first epoch" in out
    assert "fixed       " in out and "100%" in out
    rates = [float(line.split()[1]) for line in out.splitlines()
             if line.startswith(("fixed  ", "kept  ")) and "%" in line]
    assert len(rates) == 2 and all(r > 0 for r in rates)
