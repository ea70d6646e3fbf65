#!/usr/bin/env bash
# The GPU figures (docs/benchmarks.md, "GPU"), as one prepared script for a lent GPU machine
# (JAX and PyTorch with CUDA, no TensorFlow, no Keras, nothing from a registry).
#
#   bash tools/gpu_benchmark.sh --fetch-wheels   # here: Keras and what it needs that the GPU
#                                                # image lacks, as Python 3.12 wheels in .whl/
#   bash tools/gpu_benchmark.sh --dry-run        # anywhere: every step at toy scale
#   bash tools/gpu_benchmark.sh                  # on the GPU machine: installs .whl/ into
#                                                # /tmp/site; under 8 minutes in all
#
# Steps, each with its own time limit (a step that fails or runs out is reported and the next
# one runs; every figure is printed as it is measured):
#   1. backends: YOLOv3-416 and tiny-af training images/s at batch 32 and 64 in mixed bfloat16 on
#      JAX (jit) and PyTorch, the FLOP utilisation against the GPU's dense bf16 peak, detection
#      latency and throughput ($OUT/backends_gpu.json);
#   2. data: the NumPy input pipeline (the one a machine without TensorFlow trains from) at 416 px
#      with full augmentation, mosaic off and on every image, on 1, 4, 8 and 16 worker threads;
#   3. time to accuracy: tiny-af-416 and YOLOv3-416 from scratch on photo-style synthetic images
#      (2000 training, 200 validation), JAX, mixed bfloat16, fed by the NumPy pipeline: the
#      mAP@0.5:0.95 and the training seconds at every epoch's end ($OUT/tta_*.json).
# PYTHON picks the interpreter (default python3).
set -uo pipefail
cd "$(dirname "$0")/.."
PY="${PYTHON:-python3}"

if [[ "${1:-}" == "--fetch-wheels" ]]; then
    mkdir -p .whl
    grep -qx '/.whl/' .git/info/exclude 2>/dev/null || echo '/.whl/' >> .git/info/exclude
    "$PY" -m pip download --no-deps --only-binary=:all: --python-version 3.12 \
        --implementation cp --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 \
        --platform manylinux2014_x86_64 -d .whl keras namex optree pyyaml
    exit 0
fi

if [[ -d .whl ]] && ! "$PY" -c "import keras" 2>/dev/null; then
    "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
        --target /tmp/site .whl/*.whl
    export PYTHONPATH="/tmp/site:$PWD${PYTHONPATH:+:$PYTHONPATH}"
else
    export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
fi
export TF_CPP_MIN_LOG_LEVEL=3
# no TensorFlow there: Keras would default to it (each backends contender sets its own)
export KERAS_BACKEND="${KERAS_BACKEND:-jax}"
out="${OUT:-.}"
failed=0

step() {  # step NAME SECONDS COMMAND...: run it within its time limit and report
    local name="$1" limit="$2"
    shift 2
    echo "== $name (limit ${limit}s)"
    local start=$SECONDS
    timeout "$limit" "$@"
    local rc=$?
    echo "== $name: exit $rc after $((SECONDS - start))s"
    [[ $rc -eq 0 ]] || failed=1
}

nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>/dev/null || true
"$PY" -c "import os; print('cores:', len(os.sched_getaffinity(0)))"

if [[ "${1:-}" == "--dry-run" ]]; then
    backends=(--dry-run)
    data=(--size 64 --batch-size 2 --batches 1 --warmup 0 --num-images 8 --workers 1 2)
    tta=(--input-size 64 --epochs 1 --num-images 8 --val-images 4 --batch-size 2)
    limits=(600 300 600 600)
else
    backends=(--size 416 --batch 32 64 --steps 10)
    data=(--size 416 --batch-size 32 --batches 10 --warmup 2 --num-images 256
          --workers 1 4 8 16)
    tta=(--input-size 416 --num-images 2000 --val-images 200 --batch-size 32)
    limits=(170 60 100 130)
fi

step "1 backends" "${limits[0]}" "$PY" -m yolo3 benchmark backends --backends jax torch \
    --variants yolov3 tiny-af --precision mixed_bfloat16 "${backends[@]}" \
    --json "$out/backends_gpu.json"
step "2 data" "${limits[1]}" "$PY" -m yolo3 benchmark data \
    --no-classic --mosaic 0 1 "${data[@]}"
epochs_tiny=6
epochs_v3=4
[[ "${1:-}" == "--dry-run" ]] && epochs_tiny=1 && epochs_v3=1
step "3 time to accuracy, tiny-af" "${limits[2]}" "$PY" -m yolo3 benchmark \
    recipe --variant tiny-af --style photo --recipes new --cpu-replicas 0 "${tta[@]}" \
    --epochs "$epochs_tiny" --extra precision=mixed_bfloat16 --pipelines numpy \
    --json "$out/tta_tiny-af.json"
step "3 time to accuracy, YOLOv3" "${limits[3]}" "$PY" -m yolo3 benchmark \
    recipe --variant yolov3 --style photo --recipes new --cpu-replicas 0 "${tta[@]}" \
    --epochs "$epochs_v3" --extra precision=mixed_bfloat16 --pipelines numpy \
    --json "$out/tta_yolov3.json"
exit $failed
