#!/usr/bin/env bash
# The main job end to end, on the built-in synthetic shapes dataset:
#   generate data -> k-means anchors -> train tiny YOLOv3 from scratch through the loss-summing
#   wrapper on 2 replicas -> load the saved model (it carries its anchors, classes, input size)
#   into a fresh detector -> evaluate and draw.
#
#   bash tools/demo.sh [--output DIR] [--num-images N] [--val-images N] [--epochs N]
#                      [--input-size S] [--batch-size B] [--seed S]
# Everything lands in one folder (default demo_output/ in the project; a relative --output DIR is
# taken from the folder the command was run in).
set -euo pipefail
CALLER_DIR="$PWD"
cd "$(dirname "$0")/.."

OUTPUT=demo_output
NUM_IMAGES=1000
VAL_IMAGES=200
EPOCHS=8
INPUT_SIZE=160
BATCH_SIZE=8
SEED=0
while [[ $# -gt 0 ]]; do
  case "$1" in
    --output) OUTPUT="$2"; [[ "$OUTPUT" == /* ]] || OUTPUT="$CALLER_DIR/$OUTPUT"; shift 2;;
    --num-images) NUM_IMAGES="$2"; shift 2;;
    --val-images) VAL_IMAGES="$2"; shift 2;;
    --epochs) EPOCHS="$2"; shift 2;;
    --input-size) INPUT_SIZE="$2"; shift 2;;
    --batch-size) BATCH_SIZE="$2"; shift 2;;
    --seed) SEED="$2"; shift 2;;
    -h|--help) sed -n '2,9p' "$0"; exit 0;;
    *) echo "demo.sh: unknown option $1 (see --help)" >&2; exit 2;;
  esac
done

source tools/_setup_env.sh
yolo3_setup_env plot
PY="$VENV/bin/python"
start=$(date +%s)
mkdir -p "$OUTPUT"
DATA="$OUTPUT/data"

echo "== 1/5 synthetic dataset: $NUM_IMAGES training + $VAL_IMAGES validation images"
TOTAL=$((NUM_IMAGES + VAL_IMAGES))
VAL_FRACTION=$("$PY" -c "print($VAL_IMAGES / $TOTAL)")
"$PY" tools/make_synthetic_dataset.py --out "$DATA" --num-images "$TOTAL" --size 224 \
  --val-fraction "$VAL_FRACTION" --seed "$SEED"

echo "== 2/5 anchors by k-means"
"$PY" tools/kmeans.py --annotations "$DATA/train.txt" --clusters 6 --out "$OUTPUT/anchors.txt" \
  --input-size "$INPUT_SIZE" "$INPUT_SIZE" --seed "$SEED"

# Two replicas: GPUs when there are at least two, otherwise two logical CPU devices.
GPUS=$("$PY" -c 'import tensorflow as tf; print(len(tf.config.list_physical_devices("GPU")))' 2>/dev/null || echo 0)
if [[ "$GPUS" -ge 2 ]]; then REPLICAS=(--gpus 2); else REPLICAS=(--cpu-replicas 2); fi

echo "== 3/5 training tiny YOLOv3 from scratch on 2 replicas (${REPLICAS[*]})"
"$PY" train_multi_gpu.py --variant tiny --strategy wrapper "${REPLICAS[@]}" \
  --annotations "$DATA/train.txt" --val-annotations "$DATA/val.txt" --classes "$DATA/classes.txt" \
  --anchors "$OUTPUT/anchors.txt" --input-size "$INPUT_SIZE" --batch-size "$BATCH_SIZE" \
  --epochs "$EPOCHS" --seed "$SEED" --output "$OUTPUT/train"

echo "== 4/5 evaluation of the saved model in a fresh detector"
# final.keras carries its variant, anchors, masks, class names and input size: no other flags.
"$PY" tools/evaluate.py --annotations "$DATA/val.txt" --model "$OUTPUT/train/final.keras" \
  --out "$OUTPUT/evaluation.json"

echo "== 5/5 drawings and loss curves"
# A few held-out images (the first 8 of val.txt) drawn with their detections.
mkdir -p "$OUTPUT/val_samples"
head -n 8 "$DATA/val.txt" | while read -r image _; do cp "$DATA/$image" "$OUTPUT/val_samples/"; done
"$PY" tools/detect.py --model "$OUTPUT/train/final.keras" --input "$OUTPUT/val_samples" \
  --output "$OUTPUT/detections" --json "$OUTPUT/detections.json"
"$PY" tools/plot_history.py --history "$OUTPUT/train/history.csv" --out "$OUTPUT/loss_curves.png"

"$PY" - "$OUTPUT/evaluation.json" "$start" <<'PYEOF'
import json, sys, time
figures = json.load(open(sys.argv[1]))
print(f"demo finished in {(time.time() - int(sys.argv[2])) / 60:.1f} min")
print(f"mAP@0.5      = {figures['mAP50']:.4f}")
print(f"mAP@0.5:0.95 = {figures['mAP50_95']:.4f}")
PYEOF
echo "artefacts in $OUTPUT/: detections/, loss_curves.png, evaluation.json, evaluation_pr.png, train/"
