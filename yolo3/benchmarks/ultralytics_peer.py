"""The peer's side of ``yolo3 benchmark recipe --peer ultralytics``: train Ultralytics'
``yolov3-tinyu.yaml`` from scratch on a dataset in the YOLO layout and write its detections on the
validation images as JSON. Runs under the peer's own Python (``--peer-python``: an environment
with ``pip install ultralytics``, which pulls torch), never inside yolo3's: it imports nothing of
yolo3, only Ultralytics and the standard library.

    PEER_PYTHON ultralytics_peer.py --data DATA.yaml --val-list VAL.txt --imgsz 192 --epochs 10 \\
        --batch 16 --threads 2 --out OUT_DIR

Writes ``OUT_DIR/detections.json`` (``[{"image", "boxes" [[x1, y1, x2, y2] pixels], "scores",
"classes"}]``) and ``OUT_DIR/peer.json`` (training seconds, versions, per-epoch seconds). Offline:
``YOLO_OFFLINE=1``, ``plots=False`` (its plots would fetch a font), no pretrained weights.
``--sahi-tile N``: also ``OUT_DIR/detections_sahi.json``, the detections of SAHI's sliced inference
(``get_sliced_prediction``, slices of N pixels overlapping ``--sahi-overlap``, plus the whole
image, merged by its defaults), the way Ultralytics' users slice (``pip install sahi``).
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--data", required=True, help="Ultralytics data.yaml")
    p.add_argument("--val-list", required=True, help="text file: one validation image per line")
    p.add_argument("--model", default="yolov3-tinyu.yaml")
    p.add_argument("--imgsz", type=int, default=192)
    p.add_argument("--epochs", type=int, default=10)
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--score", type=float, default=0.005)
    p.add_argument("--iou", type=float, default=0.45)
    p.add_argument("--out", required=True)
    p.add_argument("--device", default="cpu", help="cpu, or a CUDA device index (then mixed "
                   "precision, and --threads data-loading workers)")
    p.add_argument("--sahi-tile", type=int, default=0)
    p.add_argument("--sahi-overlap", type=float, default=0.2)
    args = p.parse_args(argv)
    os.environ.setdefault("YOLO_OFFLINE", "1")
    import torch
    torch.set_num_threads(args.threads)
    import ultralytics
    from ultralytics import YOLO

    os.makedirs(args.out, exist_ok=True)
    gpu = args.device != "cpu"
    if gpu:  # its AMP check downloads a model, which offline fails: mixed precision as asked
        from ultralytics.engine import trainer
        trainer.check_amp = lambda model: True
    model = YOLO(args.model)
    start = time.perf_counter()
    model.train(data=args.data, imgsz=args.imgsz, epochs=args.epochs, batch=args.batch,
                device=args.device, workers=args.threads if gpu else 0, seed=args.seed,
                deterministic=False, plots=False, pretrained=False, amp=gpu, val=False,
                project=args.out, name="train", exist_ok=True, verbose=False)
    seconds = time.perf_counter() - start
    with open(args.val_list, encoding="utf-8") as f:
        images = [line.strip() for line in f if line.strip()]
    detections = []
    for image in images:
        result = model.predict(image, imgsz=args.imgsz, conf=args.score, iou=args.iou,
                               max_det=100, device=args.device, verbose=False)[0]
        boxes = result.boxes
        detections.append({"image": image, "boxes": boxes.xyxy.tolist(),
                           "scores": boxes.conf.tolist(),
                           "classes": [int(c) for c in boxes.cls.tolist()]})
    with open(os.path.join(args.out, "detections.json"), "w", encoding="utf-8") as f:
        json.dump(detections, f)
    if args.sahi_tile:
        _sahi(args, images, os.path.join(args.out, "train", "weights", "last.pt"))
    with open(os.path.join(args.out, "peer.json"), "w", encoding="utf-8") as f:
        json.dump({"training_seconds": seconds, "ultralytics": ultralytics.__version__,
                   "torch": torch.__version__, "threads": args.threads, "model": args.model,
                   "device": args.device,
                   "python": sys.version.split()[0]}, f)
    return 0


def _sahi(args, images, weights) -> None:
    """SAHI's sliced prediction of each image with the trained weights -> detections_sahi.json."""
    from sahi import AutoDetectionModel
    from sahi.predict import get_sliced_prediction
    model = AutoDetectionModel.from_pretrained(model_type="ultralytics", model_path=weights,
                                               confidence_threshold=args.score, device="cpu",
                                               image_size=args.imgsz)
    detections = []
    for image in images:
        result = get_sliced_prediction(image, model, slice_height=args.sahi_tile,
                                       slice_width=args.sahi_tile,
                                       overlap_height_ratio=args.sahi_overlap,
                                       overlap_width_ratio=args.sahi_overlap, verbose=0)
        found = result.object_prediction_list
        detections.append({"image": image,
                           "boxes": [list(o.bbox.to_xyxy()) for o in found],
                           "scores": [float(o.score.value) for o in found],
                           "classes": [int(o.category.id) for o in found]})
    with open(os.path.join(args.out, "detections_sahi.json"), "w", encoding="utf-8") as f:
        json.dump(detections, f)


if __name__ == "__main__":
    sys.exit(main())
