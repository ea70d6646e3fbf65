"""``yolo3 train`` / ``yolo3-train`` / ``train_multi_gpu.py``: flags -> TrainConfig -> yolo3.train."""
from __future__ import annotations

import argparse
import os
from typing import List, Optional

from yolo3.cli.common import model_choices, run_command

__all__ = ["add_arguments", "run", "main", "build_parser"]

NAME = "train"
DESCRIPTION = ("Train a YOLOv3 variant on one device, several GPUs or logical CPUs (replica wrapper "
               "or MirroredStrategy), or a cluster (multi-worker, TF_CONFIG).")


def build_parser() -> argparse.ArgumentParser:
    from yolo3.cli.common import make_parser
    p = make_parser(NAME, DESCRIPTION)
    add_arguments(p)
    return p


def add_arguments(p: argparse.ArgumentParser) -> None:
    a = p.add_argument
    a("--annotations", required=True, help="training annotations: text rows 'path x1,y1,x2,y2,c ...', "
      "a VOC folder/XML or a COCO JSON")
    a("--val-annotations", default=None, help="validation annotations (default: split off --val-split)")
    a("--val-split", type=float, default=0.1, help="fraction of --annotations held out for validation "
      "when --val-annotations is not given (default 0.1)")
    a("--classes", required=True, help="class list file, one name per line (class id = line index)")
    a("--anchors", default=None, help="anchors file (default: Darknet's COCO anchors for --model)")
    a("--model", choices=model_choices(), default="yolov3",
      help="architecture, a registered variant (default yolov3)")
    a("--input-size", type=int, default=416, help="square input size, a multiple of 32 (default 416)")
    a("--weights", default=None, help="initial weights: converted Darknet or a previous checkpoint "
      "(.keras / .weights.h5 / .h5); layers are matched by name, mismatched heads skipped and listed")
    a("--freeze-epochs", type=int, default=0, help="stage 1: epochs training only the heads, the "
      "backbone_* layers frozen (default 0)")
    a("--epochs", type=int, default=10, help="total epochs including --freeze-epochs (default 10)")
    a("--batch-size", type=int, default=8, help="images per replica per step (default 8)")
    a("--gpus", type=int, default=0, help="number of GPUs (/gpu:0..N-1) to train on")
    a("--cpu-replicas", type=int, default=0, help="split the CPU into N logical devices and use them as "
      "replicas (machines without GPUs; same code path as --gpus)")
    a("--strategy", choices=["wrapper", "mirrored", "multiworker"], default="wrapper",
      help="wrapper: yolo3.parallel.multi_gpu_model; mirrored: tf.distribute.MirroredStrategy; "
      "multiworker: MultiWorkerMirroredStrategy configured by TF_CONFIG (default wrapper)")
    a("--lr", type=float, default=1e-3, help="peak learning rate (Adam, default 1e-3)")
    a("--schedule", choices=["cosine", "plateau"], default="cosine",
      help="cosine: linear warm-up then cosine decay per stage; plateau: reduce on val_loss plateau")
    a("--warmup-epochs", type=float, default=1.0, help="warm-up length for --schedule cosine (default 1)")
    a("--output", required=True, help="output folder: checkpoints, final.keras, final.weights.h5, "
      "history.csv, logs/ (TensorBoard)")
    a("--resume", action="store_true", help="continue from the last completed epoch in --output "
      "(template weights, optimiser state, epoch)")
    a("--seed", type=int, default=0, help="random seed (default 0)")
    a("--steps-per-epoch", type=int, default=None, help="steps per epoch (default: one pass over the data)")
    a("--validation-steps", type=int, default=None, help="validation steps (default: all)")
    a("--augment", choices=["full", "light", "none"], default="full",
      help="training augmentation: full (keras-yolo3 strength: scale 0.25-2, aspect jitter 0.3, "
           "flip, HSV), light (scale 0.7-1.3, jitter 0.1, flip, mild HSV) or none (default full)")
    a("--no-augment", dest="augment", action="store_const", const="none",
      help="same as --augment none")
    a("--freeze-bn", action="store_true", help="keep every batch-norm layer frozen in inference mode "
      "(pretrained statistics): for small per-replica batches; replicas then match one device exactly")
    a("--strict", action="store_true", help="refuse annotation files with invalid boxes (no area, "
      "outside the image); by default such boxes are dropped with a warning naming FILE:LINE")
    a("--quiet", action="store_true", help="no progress bars")


def run(args: argparse.Namespace) -> int:
    """Train; 0 on success, 1 on a NaN stop (bad arguments raise, exit 2)."""
    from yolo3.errors import ArgumentError, CommandFailed
    from yolo3.specs import check_input_size
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    if args.cpu_replicas and args.gpus:
        args.parser.error("give either --gpus or --cpu-replicas, not both")
    try:
        check_input_size(args.input_size)
    except ArgumentError as e:
        args.parser.error(f"--input-size: {e}")
    if args.cpu_replicas:  # first thing: before TensorFlow initialises its devices
        from yolo3.distribute import configure_logical_cpus
        configure_logical_cpus(args.cpu_replicas)
    from yolo3.train import TrainConfig, train

    config = TrainConfig(
        annotations=args.annotations, classes=args.classes, output=args.output,
        val_annotations=args.val_annotations, val_split=args.val_split, anchors=args.anchors,
        model=args.model, input_size=args.input_size, weights=args.weights,
        freeze_epochs=args.freeze_epochs, epochs=args.epochs, batch_size=args.batch_size,
        gpus=args.gpus, cpu_replicas=args.cpu_replicas, strategy=args.strategy, lr=args.lr,
        schedule=args.schedule, warmup_epochs=args.warmup_epochs, resume=args.resume, seed=args.seed,
        steps_per_epoch=args.steps_per_epoch, validation_steps=args.validation_steps,
        augment=args.augment, freeze_bn=args.freeze_bn, strict=args.strict,
        verbose=0 if args.quiet else 1)
    result = train(config)
    if result.stopped_on_nan:
        raise CommandFailed(result.message)
    print(f"yolo3 train: wrote {result.final_model} and {result.final_weights}")
    return 0


def main(argv: Optional[List[str]] = None) -> int:
    """Parse ``argv`` and train. Returns 0 on success, 1 on a NaN stop, 2 on a bad argument."""
    return run_command(NAME, DESCRIPTION, add_arguments, run, argv)


if __name__ == "__main__":
    raise SystemExit(main())
