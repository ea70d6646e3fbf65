"""``yolo3 benchmark <name>`` (``yolo3-benchmark``, ``tools/benchmark_<name>.py``): the benchmarks
of :mod:`yolo3.benchmarks`, each running its contenders side by side and printing a table.

Their arguments are defined here, so that ``--help`` imports no benchmark (nor TensorFlow); the
benchmark's module is imported when it runs.
"""
from __future__ import annotations

import argparse
import importlib
import os
import sys
from typing import List, Optional

from yolo3.cli.common import (
    add_exist_ok_argument,
    add_variant_argument,
    make_parser,
    model_choices,
    run_command,
)
from yolo3.config.choices import TRAINING_PRECISIONS
from yolo3.cli.flags import (
    BATCH,
    COUNT,
    COUNT0,
    CPU_REPLICAS,
    EPOCHS,
    FRACTION,
    IMAGE_SIDE,
    INPUT_SIDE,
    OVERLAP,
    POSITIVE,
    SEED,
    TILE_OR_AUTO,
    WEIGHT,
    InputPath,
    Number,
    OutputPath,
    Text,
)

REPLICAS0 = Number(int, 0, CPU_REPLICAS._hi, hi_why=CPU_REPLICAS.hi_why)  # 0: none
OBJECT_SIDE = Number(float, 1.0, 16384.0)  # an object's side, in pixels

NAME = "benchmark"
DESCRIPTION = ("Benchmarks that run their contenders side by side in one process and print a table, "
               "with the CPU flags and the float32 matmul peak.")


def _data_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--annotations", type=InputPath("any", text=True), help="annotation file, or a YOLO-layout image folder or list "
                   "(default: a temporary synthetic dataset)")
    p.add_argument("--data", type=InputPath(text=True), help="a data.yaml or obj.data: its --split images and class names")
    p.add_argument("--split", default="train", choices=("train", "val", "test"),
                   help="the split of --data (default %(default)s)")
    p.add_argument("--classes", type=InputPath(text=True), help="classes file")
    p.add_argument("--num-images", type=COUNT, default=96, help="synthetic images to write")
    p.add_argument("--batch-size", type=BATCH, default=16)
    p.add_argument("--size", type=INPUT_SIDE, default=416)
    p.add_argument("--batches", type=COUNT, default=15, help="timed batches per contender")
    p.add_argument("--mosaic", type=FRACTION, nargs="+", default=[0.0, 1.0], help="mosaic "
                   "probabilities to measure, each with full augmentation otherwise (training's "
                   "--mosaic; default: 0 and 1)")
    p.add_argument("--workers", type=Number(int, 1, 256), nargs="+", default=None,
                   help="the NumPy pipeline's thread counts to measure (default: 1 and every core)")
    p.add_argument("--no-classic", action="store_true", help="leave out keras-yolo3's generator")
    p.add_argument("--no-grain", action="store_true", help="leave out Grain (where installed)")
    p.add_argument("--no-cached", action="store_true", help="leave out the NumPy pipeline with "
                   "the RAM cache and the colours on the device")
    p.add_argument("--memory-epochs", type=COUNT0, default=0, metavar="N", help="also pass N "
                   "epochs through the cached pipeline and print its resident memory after each")
    p.add_argument("--feed", type=POSITIVE, default=1000.0, metavar="IMG_S",
                   help="the training rate to feed: how many cores the pipeline needs for it "
                   "(default 1000 img/s, the YOLOv3-416 GPU target)")
    p.add_argument("--warmup", type=COUNT0, default=3)
    p.add_argument("--seed", type=SEED, default=0)
    p.add_argument("--scale", type=COUNT0, default=0, metavar="N", help="instead: training start-up "
                   "on a YOLO-layout set of N images (first use and second run: seconds to the "
                   "first step, peak memory); COCO is 118287")
    p.add_argument("--distinct", type=COUNT, default=256, help="with --scale: distinct JPEGs, the "
                   "rest hard links (default %(default)s)")
    p.add_argument("--boxes", type=Number(float, 0.0, 1000.0, lo_open=True), default=7.3, help="with --scale: boxes per image on "
                   "average (COCO: 7.3)")
    p.add_argument("--workdir", default=None, type=InputPath("folder"), help="with --scale: an "
                   "existing folder to write the set in (default: the temporary folder)")


def _training_arguments(p: argparse.ArgumentParser) -> None:
    add_variant_argument(p, default=["yolov3", "tiny"], many=True,
                         help="variants (default: yolov3 tiny)")
    p.add_argument("--size", type=INPUT_SIDE, default=416, help="input size (multiple of 32)")
    p.add_argument("--batch", type=BATCH, nargs="+", default=[8], help="global batch size(s)")
    p.add_argument("--steps", type=COUNT, default=5, help="timed steps after two warm-up steps")
    p.add_argument("--replicas", type=REPLICAS0, default=2, help="replicas for the wrapper row (0: none)")
    p.add_argument("--no-jit", action="store_true", help="skip the XLA rows")
    p.add_argument("--force-mixed", action="store_true", help="also time mixed_bfloat16 on a CPU "
                   "where auto trains float32 (bfloat16 emulated, or slower)")
    p.add_argument("--data-wait", action="store_true", help="also feed tiny from the real pipeline "
                   "and report the share of step time spent waiting for data")
    p.add_argument("--data-images", type=COUNT, default=200, help="synthetic images for --data-wait")
    p.add_argument("--loss-steps", type=COUNT0, default=0, help="compare float32 and mixed precision "
                   "losses after this many steps (0: no comparison)")
    p.add_argument("--loss-variant", "--loss-model", dest="loss_variant", default="tiny",
                   choices=model_choices(),
                   help="variant for --loss-steps (default tiny)")
    p.add_argument("--loss-size", type=INPUT_SIDE, default=160, help="input size for --loss-steps")
    p.add_argument("--keras-batch-norm", action="store_true", help="also time each precision "
                   "with Keras's own batch norm instead of the fused one training uses")
    p.add_argument("--profile", action="store_true", help="also profile --steps steps of each "
                   "variant at the first --batch in float32 and mixed precision: op time per step "
                   "by group and op type, with the speed-up of each")
    p.add_argument("--profile-ops", type=Number(int, 1, 1000), default=10, help="op types listed in the profile "
                   "(default 10)")


def _feed_arguments(p: argparse.ArgumentParser) -> None:
    add_variant_argument(p, default="tiny-af", help="variant (default tiny-af)")
    p.add_argument("--input-size", type=INPUT_SIDE, default=416, help="input size (default 416)")
    p.add_argument("--batch-size", type=BATCH, default=32, help="images per batch (default 32)")
    p.add_argument("--epochs", type=Number(int, 2, 1000), default=3,
                   help="epochs of each (the first compiles and is left out; default 3)")
    p.add_argument("--num-images", type=COUNT, default=256,
                   help="training images of the photo-style set made for it (default 256)")
    p.add_argument("--data", default=None, type=InputPath("folder"), help="an existing dataset "
                   "folder (train.txt, val.txt, classes.txt) instead of generating one")
    p.add_argument("--feeds", nargs="+", choices=["fixed", "host", "ram", "kept"],
                   default=["fixed", "host", "ram", "kept"],
                   help="the contenders: fixed (one batch repeated: the model alone), host "
                   "(decoded every time, colours on the host), ram (--cache ram, colours on the "
                   "device), kept (--cache device) (default: all)")
    p.add_argument("--mosaic", type=FRACTION, default=1.0,
                   help="share of training images made as a mosaic (default 1: every one)")
    p.add_argument("--workers", type=COUNT0, default=0,
                   help="data workers of each run (0: one per core, as yolo3 train)")
    p.add_argument("--precision", choices=TRAINING_PRECISIONS, default="auto",
                   help="training precision of each run (default auto)")


def _backends_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--backends", nargs="+", choices=["tensorflow", "jax", "torch"],
                   default=["tensorflow", "jax", "torch"],
                   help="Keras backends to compare (those not installed are skipped and named)")
    add_variant_argument(p, default=["yolov3", "tiny-af"], many=True,
                         help="variants (default: yolov3 tiny-af)")
    p.add_argument("--size", type=INPUT_SIDE, default=416, help="input size (multiple of 32)")
    p.add_argument("--batch", type=BATCH, nargs="+", default=[16],
                   help="global batch size(s) (default 16; on a GPU: 16 32 64)")
    p.add_argument("--steps", type=COUNT, default=5, help="timed steps after two warm-up steps")
    p.add_argument("--precision", choices=["float32", "mixed_bfloat16", "auto"], default="float32",
                   help="dtype policy of every contender (auto: mixed_bfloat16; default float32)")
    p.add_argument("--no-detect", action="store_true", help="training rows only")
    p.add_argument("--dry-run", action="store_true", help="the same script at 64 px, batch 2, one "
                   "step: check it on a CPU before a GPU machine runs it")
    p.add_argument("--json", type=OutputPath("file", format="json"), help="also write the rows to this JSON file")


def _processes_arguments(p: argparse.ArgumentParser) -> None:
    add_variant_argument(p, default="tiny-af", help="variant (default: tiny-af)")
    p.add_argument("--size", type=INPUT_SIDE, default=128, help="input size (default %(default)s)")
    p.add_argument("--batch-size", type=BATCH, default=8,
                   help="images per process per step (default %(default)s)")
    p.add_argument("--processes", type=Number(int, 2, 64), default=2,
                   help="processes of the second contender, one core each (default %(default)s)")
    p.add_argument("--steps", type=COUNT, default=20, help="timed steps (default %(default)s)")
    p.add_argument("--warmup", type=Number(int, 1, 1000), default=3,
                   help="steps before the timed ones (compiling; default %(default)s)")
    p.add_argument("--num-images", type=COUNT, default=64,
                   help="synthetic images (default %(default)s)")
    p.add_argument("--json", type=OutputPath("file", format="json"),
                   help="also write the figures to this JSON file")


def _inference_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--cfg", type=InputPath(text=True), help="Darknet cfg, e.g. ../shared/darknet/yolov3.cfg (default: the cfg "
                                 "of --variant, written from the registry)")
    add_variant_argument(p, default="yolov3", help="variant whose cfg to use without --cfg")
    p.add_argument("--weights", type=InputPath(), help="Darknet weights of --cfg, e.g. ../shared/darknet/"
                                     "yolov3-tiny.weights (default: random weights; the NMS in the "
                                     "end-to-end rows costs more with the many boxes they find)")
    p.add_argument("--image", type=InputPath(), help="a JPEG for the end-to-end time (default: a synthetic 640x480 JPEG)")
    p.add_argument("--input-size", type=INPUT_SIDE, default=416)
    p.add_argument("--runs", type=COUNT, default=12, help="timed runs per contender and round")
    p.add_argument("--rounds", type=COUNT, default=2, help="turns each contender takes")
    p.add_argument("--warmup", type=COUNT0, default=3)
    p.add_argument("--score", type=FRACTION, default=0.3)
    p.add_argument("--seed", type=SEED, default=0)
    p.add_argument("--json", type=OutputPath("file", format="json"), help="also write the figures to this JSON file")


def _convert_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--cfg", type=InputPath(text=True), help="Darknet cfg (default: the cfg of --variant, written "
                                            "from the registry)")
    add_variant_argument(p, default="yolov3", help="variant whose cfg to use without --cfg "
                                                   "(default yolov3)")
    p.add_argument("--out-format", choices=["keras", "weights.h5"], default="keras")


def _recipe_arguments(p: argparse.ArgumentParser) -> None:
    add_variant_argument(p, default="tiny", help="variant (default tiny)")
    p.add_argument("--input-size", type=INPUT_SIDE, default=160, help="input size (default 160)")
    p.add_argument("--epochs", type=EPOCHS, default=16, help="epochs for both recipes (default 16)")
    p.add_argument("--batch-size", type=BATCH, default=8, help="images per replica (default 8)")
    p.add_argument("--num-images", type=COUNT, default=1000, help="training images (default 1000)")
    p.add_argument("--val-images", type=COUNT, default=200, help="validation images (default 200)")
    p.add_argument("--image-size", type=IMAGE_SIDE, default=224, help="synthetic image side (default 224)")
    p.add_argument("--style", choices=["solid", "textured", "photo"], default="solid",
                   help="synthetic style: solid (the demo's), textured (harder) or photo "
                        "(realistic: yolo3 synth --style photo)")
    p.add_argument("--photos", default=None, type=InputPath("folder"), help="photo style: folder "
                   "of photographs (default: scikit-image's)")
    p.add_argument("--batch-sizes", type=BATCH, nargs="+", default=None, metavar="B",
                   help="train each recipe at each of these per-replica batch sizes (default: "
                        "--batch-size)")
    p.add_argument("--anchors", choices=["default", "kmeans"], default="default",
                   help="the variant's default anchors, or k-means anchors of the training boxes "
                        "(as a user would compute them)")
    p.add_argument("--peer", choices=["ultralytics"], default=None,
                   help="also train the peer on the same data and score it alike")
    p.add_argument("--peer-python", default=None, type=InputPath(),
                   help="the Python of an environment with ultralytics installed")
    p.add_argument("--threads", type=Number(int, 1, 1024), default=None,
                   help="CPU threads for the peer (default: the cores yolo3 uses)")
    p.add_argument("--peer-device", default="cpu",
                   type=Text(max_length=3, pattern=r"cpu|[0-9]{1,2}", pattern_words="cpu or a "
                             "CUDA device index", example="0"),
                   help="where the peer trains and predicts: cpu (default) or a CUDA device index "
                        "(then in mixed precision, with --threads data-loading workers)")
    p.add_argument("--peer-only", action="store_true",
                   help="train the peer alone (yolo3's own run made elsewhere on the same data)")
    p.add_argument("--augment", choices=["full", "light", "none"], default="light",
                   help="augmentation for both (default light, the 0.2 demo's)")
    p.add_argument("--cpu-replicas", type=REPLICAS0, default=2, help="logical CPU replicas through the "
                   "wrapper, as the demo (0: one device)")
    p.add_argument("--seed", type=SEED, default=0, help="seed of the generated data, the peer and "
                   "the training (default 0)")
    p.add_argument("--seeds", type=SEED, nargs="+", default=None, metavar="S",
                   help="train each recipe once per training seed and print the spread of its "
                        "final mAP (default: --seed alone)")
    p.add_argument("--data", default=None, type=InputPath("folder"), help="an existing dataset "
                   "folder (train.txt, val.txt, classes.txt) instead of generating one")
    p.add_argument("--recipes", nargs="+", choices=["old", "new"], default=["old", "new"],
                   help="yolo3's recipes to train: old (keras-yolo3's), new (the defaults)")
    p.add_argument("--pipelines", nargs="+", choices=["tf", "numpy"], default=None,
                   help="train each recipe once per input pipeline, side by side (tf.data "
                   "against the NumPy/OpenCV pipeline; default: the run's automatic choice)")
    p.add_argument("--extra", nargs="*", default=[], metavar="KEY=VALUE",
                   type=Text(pattern=r"[a-z_]+=.*", pattern_words="KEY=VALUE, a setting of "
                             "yolo3 train by name", example="lr=0.01"),
                   help="settings of yolo3 train by name for the new recipe, each read as its "
                        "type (e.g. lr=0.006 ema=false multi_scale=[160,224] weights=w.keras), "
                        "to measure one choice against the defaults")
    p.add_argument("--plot", default=None, type=OutputPath("file", format="png"), help="write mAP@0.5:0.95 over time to this PNG")
    p.add_argument("--json", default=None, type=OutputPath("file", format="json"),
                   help="write the curves to this JSON file")


def _export_arguments(p: argparse.ArgumentParser) -> None:
    add_variant_argument(p, default=["yolov3", "tiny"], many=True, help="variants to time")
    p.add_argument("--input-size", type=INPUT_SIDE, default=416)
    p.add_argument("--darknet-dir", default=None, type=InputPath("folder"),
                   help="folder with yolov3-tiny.cfg / .weights (real weights for tiny when there; "
                   "default: ../shared/darknet, where it exists)")
    p.add_argument("--calibration", default=None, type=InputPath("any"), help="int8 calibration "
                   "images: annotation file or folder (default: synthetic images)")
    p.add_argument("--calibration-images", type=COUNT, default=32,
                   help="int8 calibration images: at most this many of --calibration, or this "
                        "many synthetic ones")
    p.add_argument("--runs", type=COUNT, default=10, help="timed runs per contender and round")
    p.add_argument("--rounds", type=COUNT, default=2)
    p.add_argument("--warmup", type=COUNT0, default=3)
    p.add_argument("--force-bf16", action="store_true", help="time Keras bfloat16 even where it "
                   "is emulated")
    p.add_argument("--trained", default=None, type=InputPath(), help="a trained .keras model for the accuracy table")
    p.add_argument("--annotations", default=None, type=InputPath("any", text=True),
                   help="held-out annotations for --trained (also "
                   "a YOLO-layout image folder or list)")
    p.add_argument("--data", default=None, type=InputPath(text=True),
                   help="a data.yaml or obj.data: its val split is the "
                   "held-out set for --trained")
    p.add_argument("--seed", type=SEED, default=0)


def _tiles_arguments(p: argparse.ArgumentParser) -> None:
    add_variant_argument(p, default="tiny-af", help="variant (default tiny-af)")
    p.add_argument("--input-size", type=INPUT_SIDE, default=320, help="input size (default 320)")
    p.add_argument("--epochs", type=EPOCHS, default=12, help="epochs of each contender")
    p.add_argument("--batch-size", type=BATCH, default=8)
    p.add_argument("--num-images", type=COUNT, default=160, help="training images")
    p.add_argument("--val-images", type=COUNT, default=40, help="validation images")
    p.add_argument("--image-size", type=IMAGE_SIDE, nargs=2, default=[1080, 1920],
                   metavar=("H", "W"), help="image size (default 1080 1920)")
    p.add_argument("--min-px", type=OBJECT_SIDE, default=8.0, help="smallest object side")
    p.add_argument("--max-px", type=OBJECT_SIDE, default=40.0, help="largest object side")
    p.add_argument("--max-objects", type=Number(int, 1, 1000), default=12,
                   help="objects per image at most")
    p.add_argument("--class-shares", type=WEIGHT, nargs="+", default=None, metavar="W",
                   help="how often each class is drawn (default: all alike)")
    p.add_argument("--photos", default=None, type=InputPath("folder"), help="folder of "
                   "photographs (default: scikit-image's)")
    p.add_argument("--data", default=None, type=InputPath("folder"), help="an existing dataset "
                   "folder (train.txt, val.txt, classes.txt) instead of generating one")
    p.add_argument("--tile", default="auto", type=TILE_OR_AUTO, help="tile size in pixels, or "
                   "auto (the size yolo3 check suggests; default)")
    p.add_argument("--overlap", type=OVERLAP, default=0.2, help="tile overlap (default 0.2)")
    p.add_argument("--peer-python", default=None, type=InputPath(), help="the Python of an "
                   "environment with ultralytics and sahi: the peer trains on whole images and "
                   "slices with SAHI")
    p.add_argument("--seed", type=SEED, default=0)
    p.add_argument("--json", default=None, type=OutputPath("file", format="json"),
                   help="also write the figures to this JSON file")


def _balance_arguments(p: argparse.ArgumentParser) -> None:
    add_variant_argument(p, default="tiny-af", help="variant (default tiny-af)")
    p.add_argument("--input-size", type=INPUT_SIDE, default=192, help="input size (default 192)")
    p.add_argument("--epochs", type=EPOCHS, default=10)
    p.add_argument("--batch-size", type=BATCH, default=16)
    p.add_argument("--num-images", type=COUNT, default=600, help="training images per set")
    p.add_argument("--val-images", type=COUNT, default=150, help="held-out images per set")
    p.add_argument("--rare-share", type=Number(float, 0.0, 1.0, lo_open=True, hi_open=True),
                   default=0.05, help="the rare class's share of "
                   "the objects (default 0.05)")
    p.add_argument("--sets", type=Number(int, 1, 100), default=2, help="sets, seeds --seed, --seed+1 ...")
    p.add_argument("--data", nargs="+", default=None, type=InputPath("folder"),
                   help="existing dataset folders (train.txt, "
                   "val.txt, classes.txt) instead of generated sets")
    p.add_argument("--contenders", nargs="+", default=["none", "weights", "repeat", "focal"],
                   choices=["none", "weights", "repeat", "focal"],
                   help="none, weights (--class-weights auto), repeat (--repeat-threshold 0.5), "
                   "focal (--focal-gamma 2)")
    p.add_argument("--photos", default=None, type=InputPath("folder"), help="folder of "
                   "photographs (default: scikit-image's)")
    p.add_argument("--seed", type=SEED, default=0)
    p.add_argument("--json", default=None, type=OutputPath("file", format="json"),
                   help="also write the figures to this JSON file")


def _track_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--sequences", type=Number(int, 1, 100), default=3,
                   help="synthetic sequences per seed (default 3)")
    p.add_argument("--seeds", type=SEED, nargs="+", default=[0, 1], help="seeds (default 0 1)")
    p.add_argument("--frames", type=Number(int, 2, 100_000), default=300,
                   help="frames per sequence (default 300)")
    p.add_argument("--size", type=IMAGE_SIDE, nargs=2, default=[480, 640], metavar=("H", "W"),
                   help="frame size (default 480 640)")
    p.add_argument("--objects", type=Number(int, 1, 1000), default=10,
                   help="objects per sequence (default 10)")
    p.add_argument("--style", choices=("photo", "shapes"), default="photo",
                   help="photo (default: photographs, scikit-image's or --photos) or shapes")
    p.add_argument("--photos", default=None, type=InputPath("folder"),
                   help="folder of photographs for --style photo")
    p.add_argument("--trackers", nargs="+", default=["bytetrack", "botsort", "ocsort", "sort"],
                   choices=["bytetrack", "botsort", "ocsort", "sort"], help="yolo3's trackers")
    p.add_argument("--miss", type=FRACTION, default=0.1,
                   help="the detections' share of missed boxes (default 0.1)")
    p.add_argument("--jitter", type=Number(float, 0.0, 1.0), default=0.04,
                   help="box corners move by a normal share of the box's size (default 0.04)")
    p.add_argument("--false-positives", type=Number(float, 0.0, 100.0), default=0.3,
                   help="false positives per frame, on average (default 0.3)")
    p.add_argument("--peer-python", default=None, type=InputPath(), help="the Python of an "
                   "environment with ultralytics: its ByteTrack and BoT-SORT on the same "
                   "detections")
    real = p.add_argument_group("behind real detectors (instead of the ground truth with noise)")
    real.add_argument("--train-epochs", type=COUNT, nargs="+", default=None, metavar="N",
                      help="train tiny-af from scratch for each N epochs on stills of other "
                           "sequences (a range of detector quality: 2 5 15, say) and track "
                           "behind each detector's own boxes")
    real.add_argument("--detectors", type=InputPath("file"), nargs="+", default=None,
                      metavar="MODEL", help="track behind these trained models instead")
    real.add_argument("--train-size", type=IMAGE_SIDE, default=320,
                      help="the detectors' input size (default 320)")
    real.add_argument("--train-sequences", type=Number(int, 1, 1000), default=8,
                      help="sequences whose stills train the detectors (default 8)")
    real.add_argument("--train-frames", type=Number(int, 3, 100_000), default=150,
                      help="frames per training sequence, every 3rd a still (default 150)")
    real.add_argument("--train-output", type=OutputPath("folder"), default=None,
                      help="keep the trained detectors' run folders here (default: removed "
                           "at the end)")
    add_exist_ok_argument(real)
    p.add_argument("--json", default=None, type=OutputPath("file", format="json"),
                   help="also write the figures to this JSON file")


# name -> (the module whose run(args) runs it, its description, its arguments)
BENCHMARKS = {
    "data": ("yolo3.benchmarks.data",
             "Throughput of the input pipelines side by side (tf.data, the NumPy pipeline through "
             "PyDataset and Grain, the classic Python generator: decode, augment, encode y_true) "
             "on the same annotation file.", _data_arguments),
    "training": ("yolo3.benchmarks.training",
                 "Training throughput: images/s for each variant in float32, mixed precision and "
                 "XLA, the replica wrapper, the data-wait share and mixed precision's loss, each "
                 "in its own process, against the float32 matmul peak.", _training_arguments),
    "feed": ("yolo3.benchmarks.feed",
             "Training fed each way, side by side: the host pipeline, the RAM cache with the "
             "colours on the device, the images kept on the device (--cache device), against one "
             "fixed batch repeated: images/s and the share of the model's own rate.",
             _feed_arguments),
    "backends": ("yolo3.benchmarks.backends",
                 "The same training step and detector on TensorFlow, JAX and PyTorch, each in its "
                 "own process: training images/s, FLOP utilisation, detection latency and "
                 "throughput (--dry-run: the GPU script checked on a CPU).", _backends_arguments),
    "processes": ("yolo3.benchmarks.processes",
                  "Weak scaling on JAX's distributed runtime: 1 process x 1 core against N "
                  "processes x 1 core (--coordinator on 127.0.0.1), the same per-process batch: "
                  "step time and images/s of each, and their ratio.", _processes_arguments),
    "inference": ("yolo3.benchmarks.inference",
                  "Inference: OpenCV DNN forward vs our forward vs our end-to-end detect, on the "
                  "same random Darknet weights, each in its own process; plus the converter's "
                  "agreement with OpenCV.", _inference_arguments),
    "convert": ("yolo3.benchmarks.convert",
                "Darknet -> Keras converter on full-size random weights: conversion time, process "
                "wall time and peak memory (target <= 15 s, <= 2 GB).", _convert_arguments),
    "recipe": ("yolo3.benchmarks.recipe",
               "Time to accuracy: keras-yolo3's recipe against today's defaults on the same "
               "synthetic set, mAP@0.5:0.95 over training time, each in its own process.",
               _recipe_arguments),
    "tiles": ("yolo3.benchmarks.tiles",
              "Small objects in large images: resize-only against tiled training with sliced "
              "inference at equal training work, AP by box size, and the peer with SAHI.",
              _tiles_arguments),
    "balance": ("yolo3.benchmarks.balance",
                "Rare classes: class weights, repeat-factor sampling and focal loss against none "
                "on realistic sets with a rare class: its AP and the mAP.", _balance_arguments),
    "track": ("yolo3.benchmarks.track",
              "Trackers side by side on identical detections of synthetic sequences: HOTA, IDF1, "
              "ID switches and time per frame, yolo3's and (--peer-python) Ultralytics'.",
              _track_arguments),
    "export": ("yolo3.benchmarks.export",
               "Deployment formats side by side: each export's time and peak memory, then "
               "latency, size and mAP of Keras, TFLite float32/float16/int8, ONNX Runtime, "
               "OpenVINO and OpenCV DNN, each in its own process.",
               _export_arguments),
}


def add_arguments(p: argparse.ArgumentParser) -> None:
    sub = p.add_subparsers(dest="benchmark", metavar="BENCHMARK", required=True)
    for name, (module, description, arguments) in BENCHMARKS.items():
        q = sub.add_parser(name, help=description)
        make_parser(f"{NAME} {name}", description, parser=q)
        arguments(q)
        q.set_defaults(benchmark_module=module, command_parser=q)


def _check_export(args: argparse.Namespace) -> None:
    """``benchmark export``'s arguments that can be refused before any work: ``--trained``
    without its held-out set (or a held-out set without ``--trained``), files that do not exist."""
    from yolo3.core.errors import ArgumentError
    held_out = args.annotations or args.data
    if args.trained and not held_out:
        raise ArgumentError("--trained needs --annotations or --data (its held-out set)")
    if held_out and not args.trained:
        raise ArgumentError("--annotations and --data are the held-out set of --trained: give "
                            "--trained MODEL.keras too")
    for flag, path in (("--trained", args.trained), ("--annotations", args.annotations),
                       ("--data", args.data), ("--calibration", args.calibration)):
        if path and not os.path.exists(path):
            raise ArgumentError(f"{path}: {flag} not found")


def _check_track(args: argparse.Namespace) -> None:
    """``benchmark track``: one source of detectors at a time."""
    from yolo3.core.errors import ArgumentError
    if args.train_epochs and args.detectors:
        raise ArgumentError("--train-epochs trains the detectors, --detectors takes them: "
                            "give one of the two")
    if args.train_output and not args.train_epochs:
        raise ArgumentError("--train-output keeps the detectors --train-epochs trains: give "
                            "--train-epochs too")
    if args.train_output:  # each run folder in it is yolo3 train's, under its own manifest
        from yolo3.core.output_folder import check_output_folder
        check_output_folder(args.train_output, "train_output", args.exist_ok)


UPFRONT_CHECKS = {"export": _check_export, "track": _check_track}  # before the benchmark's module (TensorFlow) loads


def run(args: argparse.Namespace) -> int:
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")  # before the benchmark imports TensorFlow
    check = UPFRONT_CHECKS.get(args.benchmark)
    if check is not None:
        check(args)
    return importlib.import_module(args.benchmark_module).run(args)


def main(argv: Optional[List[str]] = None) -> int:
    return run_command(NAME, DESCRIPTION, add_arguments, run, argv)


if __name__ == "__main__":
    sys.exit(main())
