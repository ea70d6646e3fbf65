#!/usr/bin/env bash
# The GPU figures of issue 47, as one prepared script (docs/benchmarks.md, "Backends").
#
#   bash tools/gpu_benchmark.sh --fetch-wheels   # here: Keras and what it needs that the GPU
#                                                # image lacks, as Python 3.12 wheels in .whl/
#   bash tools/gpu_benchmark.sh --dry-run        # anywhere: the same script at 64 px, one step
#   bash tools/gpu_benchmark.sh                  # on the GPU machine (JAX and PyTorch, no
#                                                # TensorFlow): installs .whl/ into /tmp/site
#
# Prints and writes $OUT/backends.json (or ./backends_gpu.json): YOLOv3-416 and tiny-af training
# images/s at batch 16, 32 and 64 in mixed bfloat16 on JAX (jit) and PyTorch, the FLOP
# utilisation against the GPU's dense bf16 peak, detection latency and batch-32 throughput.
set -euo pipefail
cd "$(dirname "$0")/.."

if [[ "${1:-}" == "--fetch-wheels" ]]; then
    mkdir -p .whl
    grep -qx '/.whl/' .git/info/exclude 2>/dev/null || echo '/.whl/' >> .git/info/exclude
    python3 -m pip download --no-deps --only-binary=:all: --python-version 3.12 \
        --implementation cp --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 \
        --platform manylinux2014_x86_64 -d .whl keras namex optree
    exit 0
fi

if [[ -d .whl ]] && ! python3 -c "import keras" 2>/dev/null; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
        --target /tmp/site .whl/*.whl
    export PYTHONPATH="/tmp/site:$PWD${PYTHONPATH:+:$PYTHONPATH}"
else
    export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
fi
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>/dev/null || true
out="${OUT:-.}/backends_gpu.json"
if [[ "${1:-}" == "--dry-run" ]]; then
    exec python3 -m yolo3 benchmark backends --backends jax torch --variants yolov3 tiny-af \
        --precision mixed_bfloat16 --dry-run --json "$out"
fi
exec python3 -m yolo3 benchmark backends --backends jax torch --variants yolov3 tiny-af \
    --size 416 --batch 16 32 64 --steps 10 --precision mixed_bfloat16 --json "$out"
