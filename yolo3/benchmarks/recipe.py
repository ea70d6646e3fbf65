"""Time to accuracy: keras-yolo3's recipe (yolo3 0.2's defaults) against today's defaults, trained
in turn on the same synthetic set for the same number of epochs, mAP@0.5:0.95 over training time.

    yolo3 benchmark recipe [--model tiny] [--input-size 160] [--epochs 16] [--num-images 1000]
                           [--val-images 200] [--style solid] [--cpu-replicas 2] [--plot recipe.png]
    (or python tools/benchmark_recipe.py ...)

``old``: float32, Adam 1e-3, ``mse`` box loss, no EMA, no weight decay, output biases at zero, best
checkpoint by validation loss, plus the flags the 0.2 demo needed (``--augment light``);
``new``: every recipe default (precision auto, CIoU, EMA, decoupled weight decay, prior biases,
best by mAP), same augmentation. Both are evaluated after every epoch (for the curve); the time
axis is training time (steps and validation loss, the ``seconds`` column of ``history.csv``),
without the evaluations. Each recipe trains in its own process. Printed: the mAP of both per
epoch, the time the new recipe needs to reach the old one's final mAP (target: at most half), and
the difference at the old recipe's full training time (target: at least +0.10).
"""
from __future__ import annotations

import argparse
import os
import tempfile
from typing import Dict, List, Optional

NAME = "recipe"
DESCRIPTION = ("Time to accuracy: keras-yolo3's recipe against today's defaults on the same "
               "synthetic set, mAP@0.5:0.95 over training time, each in its own process.")

OLD_RECIPE = dict(box_loss="mse", ema=False, weight_decay=0.0, prior_bias=False, precision="float32",
                  lr=1e-3)


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--model", default="tiny", help="variant (default tiny)")
    p.add_argument("--input-size", type=int, default=160, help="input size (default 160)")
    p.add_argument("--epochs", type=int, default=16, help="epochs for both recipes (default 16)")
    p.add_argument("--batch-size", type=int, default=8, help="images per replica (default 8)")
    p.add_argument("--num-images", type=int, default=1000, help="training images (default 1000)")
    p.add_argument("--val-images", type=int, default=200, help="validation images (default 200)")
    p.add_argument("--image-size", type=int, default=224, help="synthetic image side (default 224)")
    p.add_argument("--style", choices=["solid", "textured"], default="solid",
                   help="synthetic style: solid (the demo's) or textured (harder)")
    p.add_argument("--augment", choices=["full", "light", "none"], default="light",
                   help="augmentation for both (default light, the 0.2 demo's)")
    p.add_argument("--cpu-replicas", type=int, default=2, help="logical CPU replicas through the "
                   "wrapper, as the demo (0: one device)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--data", default=None, help="an existing dataset folder (train.txt, val.txt, "
                   "classes.txt) instead of generating one")
    p.add_argument("--recipes", nargs="+", choices=["old", "new"], default=["old", "new"])
    p.add_argument("--plot", default=None, help="write mAP@0.5:0.95 over time to this PNG")
    p.add_argument("--json", default=None, help="write the curves to this JSON file")


def train_child(p: dict) -> dict:
    """Train one recipe (``p['config']``: TrainConfig fields); the per-epoch history."""
    if p.get("cpu_replicas"):
        from yolo3.distribute import configure_logical_cpus
        configure_logical_cpus(p["cpu_replicas"])
    from yolo3.history import read_history
    from yolo3.train import TrainConfig, train
    result = train(TrainConfig(**p["config"]))
    history = read_history(os.path.join(result.output, "history.csv"))
    return {k: history[k] for k in ("seconds", "mAP50", "mAP50_95", "loss") if k in history}


def _dataset(args: argparse.Namespace, folder: str) -> str:
    if args.data:
        return args.data
    from yolo3.data.synthetic import make_synthetic_dataset
    total = args.num_images + args.val_images
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


def run(args: argparse.Namespace) -> int:
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    from yolo3.benchmarks.isolated import run_child
    from yolo3.benchmarks.machine import machine_line, matmul_peak_gflops
    peak = matmul_peak_gflops()
    curves: Dict[str, dict] = {}
    with tempfile.TemporaryDirectory(prefix="yolo3-recipe-") as tmp:
        data = _dataset(args, os.path.join(tmp, "data"))
        for name in args.recipes:
            config = dict(annotations=os.path.join(data, "train.txt"),
                          val_annotations=os.path.join(data, "val.txt"),
                          classes=os.path.join(data, "classes.txt"),
                          output=os.path.join(tmp, name), model=args.model,
                          input_size=args.input_size, epochs=args.epochs,
                          batch_size=args.batch_size, cpu_replicas=args.cpu_replicas,
                          augment=args.augment, seed=args.seed, eval_every=1, verbose=0,
                          **(OLD_RECIPE if name == "old" else {}))
            print(f"training the {name} recipe ...", flush=True)
            history = run_child("yolo3.benchmarks.recipe:train_child",
                                dict(config=config, cpu_replicas=args.cpu_replicas), timeout=6 * 3600)
            history["time"] = _cumulative(history["seconds"])
            curves[name] = history
    print(machine_line(peak))
    print(f"{args.model}-{args.input_size}, {args.epochs} epochs, {args.num_images} training + "
          f"{args.val_images} validation images ({args.style}), batch {args.batch_size}"
          f"{f' x {args.cpu_replicas} replicas' if args.cpu_replicas else ''}; time = training "
          "time (steps + validation loss), evaluations not counted")
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
    if {"old", "new"} <= set(curves):
        _summary(curves["old"], curves["new"])
    if args.plot:
        _plot(curves, args.plot)
        print(f"wrote {args.plot}")
    if args.json:
        import json
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump({"machine": machine_line(peak), "curves": curves}, f, indent=1)
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


def _plot(curves: Dict[str, dict], path: str) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    labels = {"old": "keras-yolo3 recipe (mse, no EMA/decay)", "new": "yolo3 defaults"}
    fig, ax = plt.subplots(figsize=(7, 4.5), dpi=100)
    for name, c in curves.items():
        ax.plot([0.0] + c["time"], [0.0] + c["mAP50_95"], marker="o", ms=3,
                label=labels.get(name, name))
    ax.set_xlabel("training time (s)")
    ax.set_ylabel("validation mAP@0.5:0.95")
    ax.set_ylim(0, 1)
    ax.grid(True, alpha=0.3)
    ax.legend()
    ax.set_title("time to accuracy")
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
