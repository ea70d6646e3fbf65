"""``yolo3 train`` / ``yolo3-train`` / ``train_multi_gpu.py``: flags -> TrainConfig -> yolo3.training.train."""
from __future__ import annotations

import argparse
import os
import sys
from typing import List, Optional

from yolo3.cli.common import (
    add_exist_ok_argument,
    add_input_size_argument,
    add_variant_argument,
    error,
    run_command,
)
from yolo3.cli.flags import (
    COORDINATOR,
    CPU_REPLICAS,
    INPUT_SIDE,
    TILE_OR_AUTO,
    InputPath,
    Number,
    OutputPath,
)
from yolo3.config.choices import (
    AUGMENT_PRESETS,
    AUTO_CLASS_WEIGHTS,
    BOX_LOSSES,
    CLASS_WEIGHT_METHODS,
    JIT_CHOICES,
    OBJECTNESS_TARGETS,
    OPTIMIZERS,
    PIPELINES,
    IMAGE_CACHES,
    AUGMENT_SITES,
    DATA_FEEDS,
    PROCESS_FEED_FROM,
    SCHEDULES,
    STRATEGIES,
    TRACKERS,
    TRAINING_PRECISIONS,
)

__all__ = ["add_arguments", "run", "main", "build_parser", "config_from_args"]

NAME = "train"
DESCRIPTION = ("Train a YOLOv3 variant on one device, several GPUs or logical CPUs (replica wrapper "
               "or MirroredStrategy), or a cluster (multi-worker, TF_CONFIG).")


def build_parser() -> argparse.ArgumentParser:
    from yolo3.cli.common import make_parser
    p = make_parser(NAME, DESCRIPTION)
    add_arguments(p)
    return p


# what --output and --resume mean for yolo3 train; yolo3 tune words them for its study
OUTPUT_HELP = ("output folder: checkpoints, final.keras, final.weights.h5, history.csv, logs/ "
               "(TensorBoard)")
RESUME_HELP = ("continue from the last completed epoch in --output (template weights, optimiser "
               "state, epoch, best score)")


def add_arguments(p: argparse.ArgumentParser, output_help: str = OUTPUT_HELP,
                  resume_help: str = RESUME_HELP) -> None:
    from yolo3.config.train_config import default as d
    from yolo3.training.recipe import DEFAULT_LR
    a = p.add_argument
    a("--settings", default=None, type=InputPath(text=True), metavar="FILE", help="training "
      "settings by name in a YAML file (name: value, one per line; yolo3 tune writes its best "
      "as best.yaml); flags given beside it win")
    a("--data", dest="data_file", default=None, type=InputPath(text=True), help="a data.yaml (Ultralytics, Roboflow, CVAT, "
      "Label Studio exports) or obj.data (Darknet): the train and val sources and the class names, "
      "in place of --annotations, --val-annotations and --classes")
    a("--annotations", default=None, type=InputPath("any", text=True), help="training annotations: text rows 'path x1,y1,x2,y2,c ...', "
      "a VOC folder/XML, a COCO JSON, or a YOLO-layout image folder or image-list file (labels in "
      "labels/ or beside the images)")
    a("--val-annotations", default=None, type=InputPath("any", text=True), help="validation annotations (default: split off --val-split)")
    a("--val-split", type=Number.within("val_split"), default=d("val_split"), help="fraction of --annotations held out "
      "for validation when --val-annotations is not given (default %(default)s)")
    a("--classes", default=None, type=InputPath(text=True), help="class list file, one name per line (class id = line index); "
      "needed with --annotations, optional with --data")
    a("--anchors", default=None, type=InputPath(text=True, words=("auto",)), help="anchors file, or 'auto': k-means on the training boxes at "
      "--input-size, written into the run and the model (default: Darknet's COCO anchors for "
      "--variant; training starts by printing how well the anchors fit the boxes)")
    add_variant_argument(p, default=d("variant"), help="architecture, a registered variant "
                         "(default %(default)s; --model is its old spelling)")
    add_input_size_argument(p, d("input_size"), "input size: one side (square) or HEIGHT WIDTH "
                            "(a 16:9 camera: 288 512), multiples of 32 (default %(default)s)")
    a("--weights", default=None, type=InputPath(), help="initial weights: converted Darknet or a previous checkpoint "
      "(.keras / .weights.h5 / .h5); layers are matched by name; output layers of another class "
      "count take their box and objectness channels (see --head-transfer), others that differ "
      "are skipped and listed")
    a("--freeze-epochs", type=Number.within("freeze_epochs"), default=d("freeze_epochs"), help="stage 1: epochs training only "
      "the heads, the backbone_* layers frozen (default %(default)s)")
    a("--epochs", type=Number.within("epochs"), default=d("epochs"), help="total epochs including --freeze-epochs "
      "(default %(default)s)")
    a("--batch-size", type=Number.within("batch_size"), default=d("batch_size"), help="images per replica per step; the "
      "global batch is this times the replicas (GPUs, CPU replicas or workers), and the start of "
      "training prints it (default %(default)s)")
    a("--gpus", type=Number.within("gpus"), default=0, help="number of GPUs (/gpu:0..N-1) to train on (TensorFlow: "
      "the replica wrapper; JAX: Keras's DataParallel)")
    a("--cpu-replicas", type=CPU_REPLICAS, default=None, metavar="N", help="split the CPU into N "
      "logical devices (1 to 4 per core, at least 8 allowed) and use them as replicas (machines "
      "without GPUs; same code path as --gpus; JAX too)")
    a("--strategy", choices=STRATEGIES, default=d("strategy"),
      help="wrapper: yolo3.training.parallel.multi_gpu_model; mirrored: tf.distribute.MirroredStrategy; "
      "multiworker: MultiWorkerMirroredStrategy configured by TF_CONFIG (default %(default)s)")
    a("--replica-batch-norm", action="store_true", help="JAX's wrapper: each replica's batch "
      "norms take their statistics from its own slice (as TensorFlow's wrapper does), and a step "
      "makes one all-reduce; without it, the global batch's statistics (exactly one device's), "
      "at one all-reduce per batch norm: slow across processes on CPUs (docs/guide.md)")
    c = p.add_argument_group("several processes or machines on JAX (docs/guide.md)")
    c.add_argument("--coordinator", type=COORDINATOR, default=d("coordinator") or None,
                   metavar="HOST:PORT|auto",
                   help="join JAX's distributed runtime: process 0 listens at HOST:PORT, every "
                   "process is started with the same command and its own --process-id; auto: "
                   "what the cluster's environment says (SLURM, Open MPI, Kubernetes). The "
                   "global batch is --batch-size x every process's devices; process 0 writes "
                   "the run folder")
    c.add_argument("--num-processes", type=Number.within("num_processes"), default=None,
                   metavar="N", help="processes in the run (with --coordinator HOST:PORT)")
    c.add_argument("--process-id", type=Number.within("process_id"), default=None, metavar="I",
                   help="this process's index, from 0 (with --coordinator HOST:PORT)")
    c.add_argument("--cluster-timeout", type=Number.within("cluster_timeout"),
                   default=d("cluster_timeout"), metavar="S", help="seconds the processes wait "
                   "for each other to start (default %(default)s)")
    r = p.add_argument_group("recipe")
    r.add_argument("--optimizer", choices=OPTIMIZERS, default=d("optimizer"),
                   help="adam, or sgd (momentum 0.937, Nesterov) (default %(default)s)")
    r.add_argument("--lr", type=Number.within("lr"), default=d("lr"), help="peak learning rate (default: "
                   f"{DEFAULT_LR['adam']:g} for adam, {DEFAULT_LR['sgd']:g} for sgd)")
    r.add_argument("--schedule", choices=SCHEDULES, default=d("schedule"),
                   help="cosine: linear warm-up then cosine decay per stage; plateau: reduce on "
                   "val_loss plateau (default %(default)s)")
    r.add_argument("--warmup-epochs", type=Number.within("warmup_epochs"), default=d("warmup_epochs"),
                   help="warm-up length for --schedule cosine (default %(default)s)")
    r.add_argument("--weight-decay", type=Number.within("weight_decay"), default=d("weight_decay"), help="decoupled weight "
                   "decay, not on batch-norm or biases; 0 turns it off (default %(default)s)")
    r.add_argument("--ema", action=argparse.BooleanOptionalAction, default=d("ema"),
                   help="keep an exponential moving average of the weights; evaluation, "
                   "checkpoints and final.keras use it (default %(default)s)")
    r.add_argument("--ema-momentum", type=Number.within("ema_momentum"), default=d("ema_momentum"), help="EMA momentum "
                   "(default: from the run's length, averaging over about 5%% of its steps)")
    r.add_argument("--prior-bias", action=argparse.BooleanOptionalAction, default=d("prior_bias"),
                   help="start new output layers (training from scratch, or heads of another "
                   "class count) at the objectness and class priors of the training set, not at "
                   "0.5 everywhere (default %(default)s)")
    r.add_argument("--head-transfer", action=argparse.BooleanOptionalAction,
                   default=d("head_transfer"),
                   help="with --weights of another class count (COCO's, say): the output layers "
                   "start from the file's box and objectness channels, only their class channels "
                   "new (default %(default)s)")
    r.add_argument("--box-loss", choices=BOX_LOSSES, default=d("box_loss"),
                   help="box regression loss: mse (keras-yolo3's), giou, diou or ciou "
                   "(default %(default)s)")
    r.add_argument("--label-smoothing", type=Number.within("label_smoothing"), default=d("label_smoothing"),
                   help="class label smoothing (default %(default)s)")
    r.add_argument("--objectness", choices=OBJECTNESS_TARGETS, default=d("objectness"),
                   help="confidence target of a positive: one (Darknet's, keras-yolo3's) or iou "
                   "(the IoU of its predicted box with the true box, YOLOv5's: scores rank "
                   "detections by how well they are placed) (default %(default)s)")
    r.add_argument("--box-gain", type=Number.within("box_gain"), default=d("box_gain"), metavar="G",
                   help="weight of the box loss against the confidence loss (default "
                   "%(default)s)")
    r.add_argument("--class-gain", type=Number.within("class_gain"), default=d("class_gain"), metavar="G",
                   help="weight of the class loss against the confidence loss (default "
                   "%(default)s)")
    r.add_argument("--assign-iou", type=Number.within("assign_iou"), default=d("assign_iou"), metavar="T",
                   help="a box is also a positive on every other anchor whose shape IoU with it "
                   "exceeds T (Darknet's iou_thresh); 1: only its best anchor, as keras-yolo3 "
                   "(default %(default)s)")
    r.add_argument("--ignore-iou", type=Number.within("ignore_iou"), default=d("ignore_iou"), metavar="T",
                   help="a prediction that is not a positive but overlaps a true box by more "
                   "than IoU T is left out of the confidence loss (Darknet's ignore_thresh) "
                   "(default %(default)s)")
    r.add_argument("--augment", choices=AUGMENT_PRESETS, default=d("augment"),
                   help="training augmentation: full (keras-yolo3 strength: scale 0.25-2, aspect "
                   "jitter 0.3, flip, HSV), light (scale 0.7-1.3, jitter 0.1, flip, mild HSV) or "
                   "none (default %(default)s)")
    r.add_argument("--no-augment", dest="augment", action="store_const", const="none",
                   help="same as --augment none")
    r.add_argument("--mosaic", type=Number.within("mosaic"), default=d("mosaic"), help="probability of a 4-image "
                   "mosaic per training image (default %(default)s)")
    r.add_argument("--multi-scale", type=INPUT_SIDE, nargs=2, metavar=("MIN", "MAX"),
                   default=d("multi_scale"), help="multi-scale training: every --multi-scale-every "
                   "steps a random multiple of 32 in [MIN, MAX] becomes the input size")
    r.add_argument("--multi-scale-every", type=Number.within("multi_scale_every"), default=d("multi_scale_every"),
                   help="steps between two multi-scale size changes (default %(default)s)")
    r.add_argument("--pipeline", choices=PIPELINES, default=d("pipeline"),
                   help="the input pipeline: tf (tf.data), numpy (NumPy and OpenCV in worker "
                   "threads: no TensorFlow needed) or auto (tf where TensorFlow imports, else "
                   "numpy) (default %(default)s)")
    r.add_argument("--data-workers", type=Number.within("data_workers"), default=d("data_workers"),
                   metavar="N", help="threads of the numpy pipeline; 0: one per core, at most "
                   "32 (default %(default)s)")
    r.add_argument("--data-feed", choices=DATA_FEEDS, default=d("data_feed"),
                   help="who makes the numpy pipeline's training batches: threads, processes "
                   "(passing them through shared memory, past the GIL) or auto (processes from "
                   f"{PROCESS_FEED_FROM} workers) (default %(default)s)")
    r.add_argument("--cache", choices=IMAGE_CACHES, default=d("cache"),
                   help="decode each training image once, no larger than the recipe needs, and "
                   "keep it in ram (its size is printed; refused where it would not fit), on "
                   "disk under $YOLO3_CACHE_DIR, or on the device (the GPU: its placement, "
                   "mosaic and colours run there too, only plans cross per batch; one device, "
                   "no tiles); the numpy pipeline's (default %(default)s)")
    r.add_argument("--augment-on", choices=AUGMENT_SITES, default=d("augment_on"),
                   help="where the colour distortion and the scaling to [0, 1] run: device "
                   "(uint8 batches, the colours in the training step), host, or auto (device "
                   "where there is a GPU and the numpy pipeline feeds it; always with --cache "
                   "device) (default %(default)s)")
    b = p.add_argument_group("rare classes")
    b.add_argument("--class-weights", default=d("class_weights"),
                   type=InputPath(text=True, words=(AUTO_CLASS_WEIGHTS, *CLASS_WEIGHT_METHODS)), metavar="auto|METHOD|FILE",
                   help="weight each positive's loss by its class: auto (the effective number of "
                   "samples), inverse, sqrt (inverse square root of the box count), capped at "
                   "10x apart and averaging 1 over the boxes; or a file of weights, one per "
                   "class ('name weight' or in class order) (default: none)")
    b.add_argument("--focal-gamma", type=Number.within("focal_gamma"), default=d("focal_gamma"), metavar="G",
                   help="focal loss on the class probabilities: each cross-entropy scaled by "
                   "|target - p|^G (Darknet's focal_loss: 2); 0: plain (default %(default)s)")
    b.add_argument("--repeat-threshold", type=Number.within("repeat_threshold"), default=d("repeat_threshold"), metavar="T",
                   help="repeat-factor sampling (LVIS): an image repeats sqrt(T / f) times "
                   "where f is the share of images holding its rarest class, when f < T; 0: "
                   "every image once (default %(default)s)")
    t = p.add_argument_group("tiled training (small objects in large images)")
    t.add_argument("--tile", type=TILE_OR_AUTO, default=d("tile"), metavar="SIZE|auto",
                   help="train on windows of SIZE x SIZE pixels cut from each image at its own "
                   "resolution, most around an object (the rest whole images and background), "
                   "and validate sliced (tiles plus the whole image, as detect --tile); auto: "
                   "the size yolo3 check suggests from the boxes (whole images when none is "
                   "needed) (default: whole images)")
    t.add_argument("--tile-whole", type=Number.within("tile_whole"), default=d("tile_whole"), metavar="F",
                   help="with --tile: the share of training images kept whole (default "
                   "%(default)s)")
    t.add_argument("--tile-background", type=Number.within("tile_background"), default=d("tile_background"), metavar="F",
                   help="with --tile: the share of windows drawn anywhere rather than around "
                   "an object (default %(default)s)")
    t.add_argument("--tile-whole-from", type=Number.within("tile_whole_from"), default=d("tile_whole_from"), metavar="PX",
                   help="with --tile: objects of at least PX pixels at the whole-image resize "
                   "train on, and are detected from, the whole image rather than tiles; 0: "
                   "every object gets tiles (default %(default)s)")
    t.add_argument("--tile-overlap", "--overlap", dest="tile_overlap", type=Number.within("tile_overlap"),
                   default=d("tile_overlap"), metavar="F",
                   help="with --tile: sliced validation's overlap between neighbouring tiles "
                   "(default %(default)s)")
    r.add_argument("--precision", choices=TRAINING_PRECISIONS,
                   default=d("precision"), help="auto (default): mixed_bfloat16 on CPUs where "
                   "bfloat16 is faster (AMX, AMD's AVX-512 BF16; not Intel's AVX-512 BF16 without "
                   "AMX) and on GPUs that have it, mixed_float16 on other GPUs, float32 otherwise")
    r.add_argument("--jit", choices=JIT_CHOICES, default=d("jit"), help="compile the "
                   "training step with XLA: auto (TensorFlow: on GPUs only; JAX: always), on or "
                   "off; never for TensorFlow's replica wrapper (default %(default)s)")
    r.add_argument("--freeze-bn", action="store_true", help="keep every batch-norm layer frozen in "
                   "inference mode (its statistics from --weights): replicas then match one device "
                   "exactly, but the network trains unnormalised, and with this recipe such runs "
                   "diverged or learned little (warned; docs/benchmarks.md: Frozen batch norm)")
    r.add_argument("--bn-stats-images", type=Number.within("bn_stats_images"), default=d("bn_stats_images"), metavar="N",
                   help="recompute the batch-norm statistics with the weights being evaluated "
                        "and saved (the EMA's too) over N training images before each "
                        "validation and checkpoint, whatever the batch size and run length; 0: "
                        "Keras's moving averages (momentum 0.99) (default %(default)s)")
    r.add_argument("--bn-momentum", type=Number.within("bn_momentum"), default=d("bn_momentum"), metavar="M",
                   help="momentum of the batch norms' moving averages (default: Keras's 0.99); "
                        "they matter only with --bn-stats-images 0")
    e = p.add_argument_group("evaluation and output")
    e.add_argument("--eval-every", type=Number.within("eval_every"), default=d("eval_every"), help="epochs between two "
                   "validation mAP evaluations; best.* is then the best mAP@0.5:0.95 (0: no "
                   "evaluation, best by val_loss; default: every epoch up to 500 validation "
                   "images, else an interval keeping evaluation under about 10%% of training)")
    e.add_argument("--patience", type=Number.within("patience"), default=d("patience"), help="stop when mAP@0.5:0.95 has "
                   "not improved for N evaluations (default 0: never)")
    e.add_argument("--output", dest="output_dir", required=True, type=OutputPath("folder"),
                   help=output_help)
    e.add_argument("--resume", action="store_true", help=resume_help)
    add_exist_ok_argument(e)
    e.add_argument("--no-pictures", dest="pictures", action="store_false", help="draw no "
                   "pictures into --output (by default: labels.png, train_batch0-2.jpg, "
                   "results.png at each evaluation, val_gallery.png when the best model changes)")
    e.add_argument("--tracker", "--logger", dest="tracker", choices=TRACKERS,
                   default=d("tracker"), help="also log the run to an experiment tracker: "
                   "mlflow (MLFLOW_TRACKING_URI, or its local store ./mlflow.db; experiment "
                   "MLFLOW_EXPERIMENT_NAME, default yolo3) or wandb (project WANDB_PROJECT, "
                   "default yolo3; WANDB_MODE=offline works): the settings, every epoch's "
                   "losses, mAPs and learning rate, the pictures, report, history and final "
                   "model. A tracker that fails warns once; training goes on (default "
                   "%(default)s)")
    e.add_argument("--seed", type=Number.within("seed"), default=d("seed"), help="random seed (default %(default)s)")
    e.add_argument("--steps-per-epoch", type=Number.within("steps_per_epoch"), default=None, help="steps per epoch (default: "
                   "one pass over the data)")
    e.add_argument("--validation-steps", type=Number.within("validation_steps"), default=None, help="validation steps (default: all)")
    e.add_argument("--strict", action="store_true", help="refuse annotation files with invalid "
                   "boxes (no area, outside the image); by default such boxes are dropped with a "
                   "warning naming FILE:LINE")
    e.add_argument("--max-boxes", type=Number.within("max_boxes"), default=d("max_boxes"), help="ground-truth boxes kept "
                   "per image (the loss's static padding; images with more are reported; "
                   "default %(default)s)")


def run(args: argparse.Namespace) -> int:
    """Train; 0 on success, 1 on a NaN stop (bad arguments raise, exit 2)."""
    from yolo3.config.specs import check_input_size
    from yolo3.config.train_config import check
    from yolo3.core.errors import CommandFailed
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    check_input_size(args.input_size)  # refused naming --input-size, before TensorFlow starts
    config = config_from_args(args)
    check(config)  # every setting's range and relation, before a backend is imported
    if args.cpu_replicas:  # first thing: before TensorFlow (or JAX) initialises its devices
        import keras
        if keras.config.backend() == "jax":
            from yolo3.training.jax_parallel import force_host_devices
            force_host_devices(args.cpu_replicas)
        else:
            from yolo3.training.distribute import configure_logical_cpus
            configure_logical_cpus(args.cpu_replicas)
    from yolo3.training.jax_cluster import ProcessLost
    from yolo3.training.train import train

    try:
        result = train(config)
    except ProcessLost as e:  # JAX's runtime would wait at exit for the lost process: leave now
        error(NAME, e)
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(1)
    if result.stopped_on_nan:
        raise CommandFailed(result.message)
    if not result.final_model:  # a process other than 0 of several
        print(f"yolo3 train: {result.message}")
        return 0
    print(f"yolo3 train: wrote {result.final_model} and {result.final_weights}")
    return 0


def config_from_args(args: argparse.Namespace):
    """The :class:`yolo3.config.train_config.TrainConfig` of parsed arguments: every flag's
    destination is the setting of the same name (``--batch-size`` -> ``batch_size``); ``--quiet``
    turns progress bars off; ``--settings FILE`` gives the settings whose flags were left at
    their defaults. Plain Python: nothing here imports TensorFlow."""
    from yolo3.config.settings_file import read_settings_file
    from yolo3.config.train_config import TrainConfig
    settings = {k: v for k, v in vars(args).items() if k != "verbose"}
    parser = getattr(args, "parser", None)
    if getattr(args, "settings", None):  # the file's values where no flag was given
        for name, value in read_settings_file(args.settings).items():
            if parser is None or name not in vars(args) or (
                    getattr(args, name) == parser.get_default(name)):
                settings[name] = value
    settings["cpu_replicas"] = settings.get("cpu_replicas") or 0
    settings["coordinator"] = settings.get("coordinator") or ""
    for name in ("annotations", "classes"):  # not given: the settings' empty default
        settings[name] = settings.get(name) or ""
    if settings.get("multi_scale"):
        settings["multi_scale"] = tuple(settings["multi_scale"])
    settings["verbose"] = 0 if args.quiet else 1
    return TrainConfig.from_settings(settings)


def main(argv: Optional[List[str]] = None) -> int:
    """Parse ``argv`` and train. Returns 0 on success, 1 on a NaN stop, 2 on a bad argument."""
    return run_command(NAME, DESCRIPTION, add_arguments, run, argv)


if __name__ == "__main__":
    raise SystemExit(main())
