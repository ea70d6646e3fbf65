#!/usr/bin/env bash
# The main job end to end, on a built-in realistic synthetic dataset (photo-textured shapes on
# photographs: `yolo3 synth --style photo`):
#   generate data -> train the anchor-free tiny detector from scratch (one device; the
#   loss-summing wrapper over 2 GPUs where there are two) -> load the saved model (it carries its
#   classes and input size) into a fresh detector -> evaluate on the held-out split, with the
#   error analysis and one report page -> draw detections.
#
#   bash tools/demo.sh [--output DIR] [--num-images N] [--val-images N] [--epochs N]
#                      [--input-size S] [--batch-size B] [--seed S]
# Everything lands in one folder (default demo_output/ in the project; a relative --output DIR is
# taken from the folder the command was run in).
set -euo pipefail
CALLER_DIR="$PWD"
cd "$(dirname "$0")/.."

OUTPUT=demo_output
NUM_IMAGES=480
VAL_IMAGES=120
EPOCHS=14
INPUT_SIZE=192
BATCH_SIZE=16
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
    -h|--help) sed -n '2,12p' "$0"; exit 0;;
    *) echo "demo.sh: unknown option $1 (see --help)" >&2; exit 2;;
  esac
done

source tools/_setup_env.sh
yolo3_setup_env bench  # matplotlib (plots) and scikit-image (the photographs the set is made of)
PY="$VENV/bin/python"
start=$(date +%s)
mkdir -p "$OUTPUT"
DATA="$OUTPUT/data"

echo "== 1/4 realistic synthetic dataset: $NUM_IMAGES training + $VAL_IMAGES held-out images"
TOTAL=$((NUM_IMAGES + VAL_IMAGES))
VAL_FRACTION=$("$PY" -c "print($VAL_IMAGES / $TOTAL)")
# scikit-image's photographs as backgrounds and textures; objects mostly large, backgrounds
# enlarged details (smooth): docs/benchmarks.md's set Cb
"$PY" tools/make_synthetic_dataset.py --style photo --out "$DATA" --num-images "$TOTAL" \
  --val-fraction "$VAL_FRACTION" --seed "$SEED" --size-distribution uniform --background-zoom 0.1 0.25 \
  --quiet

# The loss-summing wrapper over two GPUs where there are two; on CPUs one device trains faster.
GPUS=$("$PY" -c 'import tensorflow as tf; print(len(tf.config.list_physical_devices("GPU")))' 2>/dev/null || echo 0)
if [[ "$GPUS" -ge 2 ]]; then REPLICAS=(--gpus 2 --strategy wrapper); else REPLICAS=(); fi

echo "== 2/4 training tiny-af (anchor-free tiny YOLOv3) from scratch${REPLICAS[*]:+ (${REPLICAS[*]})}"
"$PY" train_multi_gpu.py --variant tiny-af "${REPLICAS[@]}" \
  --annotations "$DATA/train.txt" --val-annotations "$DATA/val.txt" --classes "$DATA/classes.txt" \
  --input-size "$INPUT_SIZE" --batch-size "$BATCH_SIZE" --epochs "$EPOCHS" --eval-every 7 \
  --seed "$SEED" --output "$OUTPUT/train"

echo "== 3/4 evaluation of the saved model in a fresh detector, on the held-out split"
# final.keras carries its variant, classes and input size: no other flags.
"$PY" tools/evaluate.py --annotations "$DATA/val.txt" --model "$OUTPUT/train/final.keras" \
  --out "$OUTPUT/evaluation.json" --report

echo "== 4/4 detections drawn"
# A few held-out images (the first 8 of val.txt) drawn with their detections.
mkdir -p "$OUTPUT/val_samples"
head -n 8 "$DATA/val.txt" | while read -r image _; do cp "$DATA/$image" "$OUTPUT/val_samples/"; done
"$PY" tools/detect.py --model "$OUTPUT/train/final.keras" --input "$OUTPUT/val_samples" \
  --output "$OUTPUT/detections" --json "$OUTPUT/detections.json"

"$PY" - "$OUTPUT/evaluation.json" "$start" <<'PYEOF'
import json, sys, time
figures = json.load(open(sys.argv[1]))
print(f"demo finished in {(time.time() - int(sys.argv[2])) / 60:.1f} min")
print(f"mAP@0.5      = {figures['mAP50']:.4f}")
print(f"mAP@0.5:0.95 = {figures['mAP50_95']:.4f}")
PYEOF
echo "artefacts in $OUTPUT/: train/ (the run, its pictures and report.html), evaluation.json and its plots, detections/"
echo "report: $OUTPUT/evaluation_report.html"
