"""Time to accuracy: keras-yolo3's recipe (yolo3 0.2's defaults) against today's defaults, and
against the peer (Ultralytics), trained in turn on the same synthetic set for the same number of
epochs, mAP@0.5:0.95 over training time.

    yolo3 benchmark recipe [--variant tiny] [--input-size 160] [--epochs 16] [--num-images 1000]
                           [--val-images 200] [--style solid|textured|photo] [--cpu-replicas 2]
                           [--batch-sizes 4 8 16] [--anchors kmeans] [--plot recipe.png]
                           [--peer ultralytics --peer-python /path/to/peer/venv/bin/python]
                           [--seeds 0 1 2]
    (or python tools/benchmark_recipe.py ...)

The peer: Ultralytics' ``yolov3-tinyu.yaml`` from scratch on the same images (exported to the YOLO
layout in a temporary folder), at the same input size, epochs, global batch (the first of
``--batch-sizes`` times the replicas) and thread count, in its own environment
(``--peer-python``: ``python -m venv peer && peer/bin/pip install ultralytics``; it pulls torch,
so it is never a dependency of yolo3), offline. Its detections on the validation images (score
>= 0.001, NMS IoU 0.45, 100 per image) are scored by the same COCO code as ours.

``old``: float32, Adam 1e-3, ``mse`` box loss, confidence target 1, no EMA, no weight decay, output
biases at zero, best checkpoint by validation loss, plus the flags the 0.2 demo needed
(``--augment light``); ``new``: every recipe default (precision auto, CIoU, IoU confidence
targets, EMA, decoupled weight decay, prior biases, best by mAP), same augmentation. Both are
evaluated after every epoch (for the curve); the time axis is training time (steps and validation
loss, the ``seconds`` column of ``history.csv``), without the evaluations. Each recipe trains in
its own process. Printed: the mAP of both per epoch, the time the new recipe needs to reach the old
one's final mAP (target: at most half), and the difference at the old recipe's full training time
(target: at least +0.10).

``--seeds``: train each recipe once per training seed (initial weights, shuffling, augmentation;
the data and the peer stay at ``--seed``) and print each recipe's spread over the seeds (mean,
standard deviation, lowest and highest final mAP): one run of a 300-step recipe says little, a
change of the anchors in their third decimal moves its mAP@0.5:0.95 by 15%.
"""
from __future__ import annotations

import argparse
import os
import tempfile
from typing import Dict, List, Optional, Sequence, Tuple

from yolo3.benchmarks.isolated import run_child
from yolo3.benchmarks.machine import cores, machine_line, matmul_peak_gflops
from yolo3.benchmarks.peer import peer_data, run_peer, score_peer_detections
from yolo3.config.specs import get_spec
from yolo3.config.train_config import TrainConfig, check, parse_setting
from yolo3.core.errors import ArgumentError, SettingError
from yolo3.core.fileio import write_text_atomic
from yolo3.data.annotations import box_sizes, load_annotations
from yolo3.data.class_names import read_classes
from yolo3.data.photo_synthetic import make_photo_dataset
from yolo3.data.synthetic import make_synthetic_dataset
from yolo3.evaluation.visualize import save_figure
from yolo3.heads.base import Head
from yolo3.heads.registry import as_head
from yolo3.ops.anchors import kmeans_anchors
from yolo3.training.distribute import configure_logical_cpus
from yolo3.training.history import read_history
from yolo3.training.train import train

# keras-yolo3's recipe: MSE box loss, no EMA or weight decay, Adam 1e-3, one anchor per box,
# confidence target 1, Keras's moving batch-norm averages, output layers of another class count
# skipped when fine-tuning
OLD_RECIPE = dict(box_loss="mse", ema=False, weight_decay=0.0, prior_bias=False, precision="float32",
                  lr=1e-3, assign_iou=1.0, objectness="one", bn_stats_images=0,
                  head_transfer=False)


def train_child(p: dict) -> dict:
    """Train one recipe (``p['config']``: TrainConfig fields); the per-epoch history."""
    if p.get("cpu_replicas"):
        configure_logical_cpus(p["cpu_replicas"])
    result = train(TrainConfig(**p["config"]))
    history = read_history(os.path.join(result.output, "history.csv"))
    return {k: history[k] for k in ("seconds", "mAP50", "mAP50_95", "loss") if k in history}


def _dataset(args: argparse.Namespace, folder: str) -> str:
    if args.data:
        return args.data
    total = args.num_images + args.val_images
    if args.style == "photo":
        make_photo_dataset(folder, total, args.photos, seed=args.seed,
                           val_fraction=args.val_images / total)
        return folder
    make_synthetic_dataset(folder, total, (args.image_size, args.image_size), seed=args.seed,
                           val_fraction=args.val_images / total, style=args.style)
    return folder


def _cumulative(values: List[float]) -> List[float]:
    out, total = [], 0.0
    for v in values:
        total += v
        out.append(total)
    return out


def time_to_reach(times: List[float], maps: List[float], target: float) -> Optional[float]:
    """The training time of the first epoch whose mAP reaches ``target`` (None: never)."""
    for t, m in zip(times, maps):
        if m >= target:
            return t
    return None


def map_at(times: List[float], maps: List[float], budget: float) -> float:
    """The mAP of the last epoch finished within ``budget`` seconds (0 before the first)."""
    reached = [m for t, m in zip(times, maps) if t <= budget * 1.0001]
    return reached[-1] if reached else 0.0


def spread(values: Sequence[float]) -> Tuple[float, float, float, float]:
    """``(mean, sample standard deviation, lowest, highest)`` of ``values`` (sd 0 for one)."""
    if not len(values):
        raise ValueError("spread of no values")
    mean = sum(values) / len(values)
    var = (sum((v - mean) ** 2 for v in values) / (len(values) - 1)) if len(values) > 1 else 0.0
    return mean, var ** 0.5, min(values), max(values)


def final_by_group(curves: Dict[str, dict]) -> Dict[str, dict]:
    """The runs of each recipe and batch (``curves[label]['group']``) together: their count,
    global batch and the :func:`spread` of the final ``mAP50``, ``mAP50_95`` and training time."""
    groups: Dict[str, List[dict]] = {}
    for c in curves.values():
        groups.setdefault(c["group"], []).append(c)
    return {g: {"runs": len(cs), "global_batch": cs[0]["global_batch"],
                "mAP50": spread([c["mAP50"][-1] for c in cs]),
                "mAP50_95": spread([c["mAP50_95"][-1] for c in cs]),
                "time": spread([c["time"][-1] for c in cs])}
            for g, cs in groups.items()}


def recipe_pairs(curves: Dict[str, dict]) -> List[Tuple[int, dict, dict]]:
    """``(seed, old, new)`` for each training seed (``curves[label]['seed']``) that trained both
    recipes at one batch size (groups ``old`` and ``new``), in the order of the runs."""
    by_seed: Dict[int, Dict[str, dict]] = {}
    for c in curves.values():
        by_seed.setdefault(c["seed"], {})[c["group"]] = c
    return [(seed, runs["old"], runs["new"]) for seed, runs in by_seed.items()
            if {"old", "new"} <= set(runs)]


def _kmeans_anchors(data: str, input_side: int, num_anchors: int):
    """``num_anchors`` anchors by k-means on the training boxes of ``data`` at ``input_side``."""
    names = read_classes(os.path.join(data, "classes.txt"))
    records = load_annotations(os.path.join(data, "train.txt"), names)
    anchors, _ = kmeans_anchors(box_sizes(records, (input_side, input_side)), num_anchors, seed=0)
    return anchors


def _head_files(head: Head, folder: str) -> Optional[str]:
    """The head's run files written into ``folder``; the anchors file's path (None without)."""
    files = head.run_files()  # an anchor head's anchors.txt
    for name, text in files.items():
        write_text_atomic(os.path.join(folder, name), text)
    return os.path.join(folder, "anchors.txt") if "anchors.txt" in files else None


# the settings each run of the benchmark takes from its own flags (_own_settings), not from
# --extra, with the flag that sets each (both spellings where a setting has an old one)
_OWN_SETTINGS = {"annotations": "--data", "val_annotations": "--data", "classes": "--data",
                 "anchors": "--anchors", "output": None, "output_dir": None, "model": "--variant",
                 "variant": "--variant", "input_size": "--input-size", "epochs": "--epochs",
                 "batch_size": "--batch-sizes", "cpu_replicas": "--cpu-replicas",
                 "augment": "--augment", "seed": "--seed / --seeds", "eval_every": None,
                 "verbose": None, "pipeline": "--pipelines"}


def _own_settings(args: argparse.Namespace, data: str, anchors: Optional[str], output: str,
                  batch: int, seed: int) -> dict:
    """The settings of one run that come from the benchmark's own flags (``_OWN_SETTINGS``)."""
    return dict(annotations=os.path.join(data, "train.txt"),
                val_annotations=os.path.join(data, "val.txt"),
                classes=os.path.join(data, "classes.txt"), anchors=anchors, output=output,
                model=args.variant, input_size=args.input_size, epochs=args.epochs,
                batch_size=batch, cpu_replicas=args.cpu_replicas, augment=args.augment, seed=seed,
                eval_every=1, verbose=0)


def _extra(pairs: List[str]) -> dict:
    """``["bn_stats_images=0", "lr=0.001"]`` -> settings by name, each read as its type wants
    (:func:`yolo3.config.train_config.parse_setting`). ArgumentError naming the pair for a pair
    without ``=``, a name that is not a setting or is the benchmark's own, or a value of the wrong
    type."""
    out = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise ArgumentError(f"--extra {pair}: expected KEY=VALUE (a TrainConfig setting)")
        if key in _OWN_SETTINGS:
            flag = _OWN_SETTINGS[key]
            raise ArgumentError(f"--extra {pair}: {key} is set by the benchmark itself"
                                + (f" (use {flag})" if flag else ""))
        try:
            out[key] = parse_setting(key, value)
        except SettingError as e:
            raise ArgumentError(f"--extra {pair}: {e}") from None
    return out


def _ratio(ours: float, theirs: float) -> str:
    """``ours / theirs`` as ``1.23x``; ``n/a`` when ``theirs`` is too small to divide by."""
    return f"{ours / theirs:.2f}x" if theirs >= 1e-3 else "n/a (the peer's figure is ~0)"


def _spread_text(s: Tuple[float, float, float, float]) -> str:
    return f"{s[0]:.3f} +- {s[1]:.3f} ({s[2]:.3f} - {s[3]:.3f})"


def _count(path: str) -> int:
    with open(path, encoding="utf-8") as f:
        return sum(1 for line in f if line.strip() and not line.startswith("#"))


def check_peer_python(args: argparse.Namespace) -> None:
    """Refuse a missing ``--peer-python`` before anything is trained."""
    if not args.peer_python or not os.path.exists(args.peer_python):
        raise ArgumentError("--peer ultralytics needs --peer-python: the Python of an environment "
                            "with Ultralytics (python -m venv peer && peer/bin/pip install "
                            "ultralytics)")


def peer_run(args: argparse.Namespace, data: str, folder: str, global_batch: int) -> dict:
    """Train and run the peer in its own environment; returns its training seconds and figures."""
    check_peer_python(args)
    prepared = peer_data(data, folder)
    threads = args.threads or cores()
    out = os.path.join(folder, "peer")
    facts = run_peer(args.peer_python, prepared, out, threads, [
        "--imgsz", str(args.input_size), "--epochs", str(args.epochs), "--batch",
        str(global_batch), "--seed", str(args.seed), "--score", "0.001", "--iou", "0.45",
        "--device", getattr(args, "peer_device", "cpu")], folder)
    figures = score_peer_detections(os.path.join(out, "detections.json"), prepared)
    return {"seconds": facts["training_seconds"], "mAP50": figures["mAP50"] or 0.0,
            "mAP50_95": figures["mAP50_95"] or 0.0, "facts": facts, "global_batch": global_batch,
            "threads": threads}


def run(args: argparse.Namespace) -> int:
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    extra = _extra(args.extra)  # refused before anything is made or trained
    if args.peer:
        check_peer_python(args)
    peak = matmul_peak_gflops()
    curves: Dict[str, dict] = {}
    batches = args.batch_sizes or [args.batch_size]
    seeds = args.seeds or [args.seed]
    replicas = max(1, args.cpu_replicas)
    peer = None
    head = as_head(get_spec(args.variant).default_head())
    with tempfile.TemporaryDirectory(prefix="yolo3-recipe-") as tmp:
        data = _dataset(args, os.path.join(tmp, "data"))
        counts = [_count(os.path.join(data, f"{split}.txt")) for split in ("train", "val")]
        anchors = None
        if args.anchors == "kmeans":  # a head without anchors keeps itself
            head = head.refit_anchors(lambda a: _kmeans_anchors(data, args.input_size, len(a)))
            anchors = _head_files(head, tmp)
        pipelines = getattr(args, "pipelines", None) or [None]
        # one contender per batch size, recipe and input pipeline
        recipes = [] if getattr(args, "peer_only", False) else args.recipes
        for batch, name, pipeline in [(b, n, p) for b in batches for n in recipes
                                      for p in pipelines]:
            group = name if len(batches) == 1 else f"{name}@{batch * replicas}"
            group = group if pipeline is None else f"{group}/{pipeline}"
            for seed in seeds:
                label = group if len(seeds) == 1 else f"{group}#{seed}"
                config = dict(_own_settings(args, data, anchors, os.path.join(tmp, label),
                                            batch, seed),
                              **(OLD_RECIPE if name == "old" else extra))
                if pipeline is not None:
                    config["pipeline"] = pipeline
                check(TrainConfig(**config))  # here, not in the child: a clear message
                print(f"training {label} (global batch {batch * replicas}) ...", flush=True)
                history = run_child("yolo3.benchmarks.recipe:train_child",
                                    dict(config=config, cpu_replicas=args.cpu_replicas),
                                    timeout=6 * 3600)
                history["time"] = _cumulative(history["seconds"])
                history["global_batch"] = batch * replicas
                history["group"], history["seed"] = group, seed
                curves[label] = history
                print(f"  {label}: {len(history['time'])} epochs in {history['time'][-1]:.0f} s, "
                      f"mAP@0.5 {history['mAP50'][-1]:.3f}, mAP@0.5:0.95 "
                      f"{history['mAP50_95'][-1]:.3f}", flush=True)
        if args.peer:
            print(f"training the peer ({args.peer}, global batch {batches[0] * replicas}) ...",
                  flush=True)
            peer = peer_run(args, data, tmp, batches[0] * replicas)
            print(f"  the peer: {peer['seconds']:.0f} s, mAP@0.5 {peer['mAP50']:.3f}, "
                  f"mAP@0.5:0.95 {peer['mAP50_95']:.3f}", flush=True)
    print(machine_line(peak))
    print(f"{args.variant}-{args.input_size}, {args.epochs} epochs, {counts[0]} training + "
          f"{counts[1]} validation images ({args.data or args.style}), {head.describe()}, batch "
          f"{' '.join(map(str, batches))}{f' x {args.cpu_replicas} replicas' if args.cpu_replicas else ''}"
          "; time = training time (steps + validation loss), evaluations not counted")
    names = list(curves)
    print("| epoch | " + " | ".join(f"{n} s | {n} mAP50 | {n} mAP50-95" for n in names) + " |")
    print("|---|" + "---|---|---|" * len(names))
    for e in range(args.epochs):
        cells = []
        for n in names:
            c = curves[n]
            if e < len(c["time"]):
                cells += [f"{c['time'][e]:.0f}", f"{c['mAP50'][e]:.3f}", f"{c['mAP50_95'][e]:.3f}"]
            else:
                cells += ["-", "-", "-"]
        print(f"| {e + 1} | " + " | ".join(cells) + " |")
    print("\n| run | global batch | training s | mAP@0.5 | mAP@0.5:0.95 |\n|---|---|---|---|---|")
    for n, c in curves.items():
        print(f"| yolo3 {n} | {c['global_batch']} | {c['time'][-1]:.0f} | {c['mAP50'][-1]:.3f} | "
              f"{c['mAP50_95'][-1]:.3f} |")
    if peer is not None:
        f = peer["facts"]
        print(f"| {args.peer} {f['ultralytics']} {f['model']} (torch {f['torch']}, "
              f"{peer['threads']} threads) | {peer['global_batch']} | {peer['seconds']:.0f} | "
              f"{peer['mAP50']:.3f} | {peer['mAP50_95']:.3f} |")
    groups = final_by_group(curves)
    if len(seeds) > 1:
        print(f"\nover {len(seeds)} training seeds ({' '.join(map(str, seeds))}): mean +- sd "
              "(lowest - highest) of the final mAP")
        print("| run | global batch | runs | training s | mAP@0.5 | mAP@0.5:0.95 |\n"
              "|---|---|---|---|---|---|")
        for g, r in groups.items():
            print(f"| yolo3 {g} | {r['global_batch']} | {r['runs']} | {r['time'][0]:.0f} | "
                  f"{_spread_text(r['mAP50'])} | {_spread_text(r['mAP50_95'])} |")
    if peer is not None:
        for g, r in groups.items():
            if r["global_batch"] != peer["global_batch"] or not g.startswith("new"):
                continue
            mean = " (mean over the seeds)" if r["runs"] > 1 else ""
            print(f"yolo3 {g} / peer at global batch {peer['global_batch']}{mean}: mAP@0.5:0.95 "
                  f"{_ratio(r['mAP50_95'][0], peer['mAP50_95'])}, mAP@0.5 "
                  f"{_ratio(r['mAP50'][0], peer['mAP50'])}, training time "
                  f"{_ratio(r['time'][0], peer['seconds'])}")
    for seed, old, new in recipe_pairs(curves):
        if len(seeds) > 1:
            print(f"training seed {seed}:")
        _summary(old, new)
    if args.plot:
        _plot(curves, args.plot, peer)
        print(f"wrote {args.plot}")
    if args.json:
        import json
        write_text_atomic(args.json, json.dumps({"machine": machine_line(peak), "curves": curves,
                                                 "peer": peer}, indent=1))
    return 0


def _summary(old: dict, new: dict) -> None:
    final, budget = old["mAP50_95"][-1], old["time"][-1]
    reach = time_to_reach(new["time"], new["mAP50_95"], final)
    at_budget = map_at(new["time"], new["mAP50_95"], budget)
    print(f"old recipe: final mAP@0.5:0.95 {final:.3f} after {budget:.0f} s")
    if reach is None:
        print("new defaults: never reached it")
    else:
        print(f"new defaults: reached {final:.3f} after {reach:.0f} s = {reach / budget:.2f} x the "
              "old recipe's time (target <= 0.5)")
    print(f"new defaults at {budget:.0f} s: mAP@0.5:0.95 {at_budget:.3f} ({at_budget - final:+.3f}; "
          "target >= +0.10)")


def _plot(curves: Dict[str, dict], path: str, peer: Optional[dict] = None) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    labels = {"old": "keras-yolo3 recipe (mse, no EMA/decay)", "new": "yolo3 defaults"}
    fig, ax = plt.subplots(figsize=(7, 4.5), dpi=100)
    for name, c in curves.items():
        ax.plot([0.0] + c["time"], [0.0] + c["mAP50_95"], marker="o", ms=3,
                label=labels.get(name, name))
    if peer is not None:
        ax.scatter([peer["seconds"]], [peer["mAP50_95"]], marker="*", s=150, color="black",
                   label=f"peer (Ultralytics), global batch {peer['global_batch']}", zorder=5)
    ax.set_xlabel("training time (s)")
    ax.set_ylabel("validation mAP@0.5:0.95")
    top = max([max(c["mAP50_95"]) for c in curves.values()] + [peer["mAP50_95"] if peer else 0])
    ax.set_ylim(0, min(1.0, max(0.05, 1.25 * top)))  # low curves stay readable
    ax.grid(True, alpha=0.3)
    ax.legend()
    ax.set_title("time to accuracy")
    fig.tight_layout()
    save_figure(fig, path)
    plt.close(fig)
