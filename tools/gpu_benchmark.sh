#!/usr/bin/env bash
# The GPU figures (docs/benchmarks.md, "GPU"), as one prepared script for a lent GPU machine
# (JAX and PyTorch with CUDA, no TensorFlow, no Keras, nothing from a registry).
#
#   bash tools/gpu_benchmark.sh --prepare    # here: Keras and what it needs that the GPU image
#                                            # lacks, as Python 3.12 wheels in .whl/, and the
#                                            # photo-style training set in .gpu_data/ (carry both)
#   bash tools/gpu_benchmark.sh --prepare-peer  # here: Ultralytics and what it needs there
#                                            # (57 MB in .whl_peer/): carry .whl and .whl_peer,
#                                            # not .gpu_data (64 MiB in all); the set is made there
#   bash tools/gpu_benchmark.sh --dry-run    # anywhere: every step at toy scale
#   bash tools/gpu_benchmark.sh [STEP...]    # on the GPU machine: installs .whl/ into /tmp/site
#
# Steps, in the order given (default: peer feed data tta-tiny-af backends tta-yolov3, what was
# still unmeasured first), each with its own time limit; a step that fails or runs out is reported and
# the next one runs. Every figure is printed as it is measured, and each training run's
# history.csv is copied to $OUT every 10 s, so a step (or a call) cut short keeps its finished
# epochs ($OUT unset: a new folder under $TMPDIR, printed first; never the checkout):
#   data: the NumPy input pipeline (what a machine without TensorFlow trains from) at 416 px with
#      full augmentation, mosaic off and on every image, on 1, 8 and 16 worker threads, plain and
#      with the RAM cache and the colours on the device (threads and processes), and the GPU's own
#      colour step (200 s);
#   feed: `yolo3 benchmark feed`: tiny-af-416 trained 3 epochs four times on the same set,
#      mosaic on every image, mixed bfloat16: one batch repeated (the model alone), fed the old
#      way (colours on the host, no cache, threads), the RAM cache with the colours on the
#      device, and every image kept on the GPU (--cache device: placement, mosaic and colours
#      there, only plans cross): images/s and the share of the fixed batch's rate
#      ($OUT/feed.txt);
#   tta-yolov3, tta-tiny-af: time to accuracy, from scratch on the photo-style set (1,000
#      training and 200 validation images, made by --prepare, or there when not carried), JAX,
#      mixed bfloat16, fed by the NumPy pipeline from every core (RAM cache, colours on the
#      GPU): each epoch's training seconds
#      and mAP@0.5:0.95 ($OUT/tta_<variant>.csv, yolo3's history.csv); tiny-af 20 epochs (about
#      260 s on an H200, 80 of them compiling), YOLOv3 10 epochs (330 s each at most);
#   peer: where Ultralytics imports (carried by --prepare-peer), yolov3-tinyu trained from
#      scratch on the same set, size, batch and epochs as tiny-af, on the GPU in mixed
#      precision, scored by the same COCO evaluation (`yolo3 benchmark recipe --peer-only`);
#   backends: YOLOv3-416 and tiny-af training images/s at batch 32 in mixed bfloat16 on JAX
#      (jit) and PyTorch, the FLOP utilisation against the GPU's dense bf16 peak, detection
#      latency and throughput ($OUT/backends_gpu.json); then YOLOv3-416 at batch 64 on JAX
#      ($OUT/backends_gpu_64.json).
# A call runs at most 10 minutes: name the steps that fit (e.g. `tta-yolov3 data`).
# PYTHON picks the interpreter (default python3). --fetch-wheels is --prepare's old name.
set -uo pipefail
cd "$(dirname "$0")/.."
PY="${PYTHON:-python3}"
DATA=.gpu_data

prepare_data() {  # prepare_data FOLDER COUNT: the photo-style set, 1/6 of it for validation
    "$PY" -m yolo3 synth --style photo --out "$1" --num-images "$2" --val-fraction 0.1667 \
        --seed 0 --quiet
}

if [[ "${1:-}" == "--prepare-peer" ]]; then
    mkdir -p .whl_peer
    grep -qx '/.whl_peer/' .git/info/exclude 2>/dev/null || echo '/.whl_peer/' >> .git/info/exclude
    "$PY" -m pip download --no-deps --only-binary=:all: --python-version 3.12 \
        --implementation cp --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 \
        --platform manylinux2014_x86_64 -d .whl_peer ultralytics ultralytics-thop \
        ultralytics-platform polars polars-runtime-32 || exit 1
    du -sh .whl_peer
    exit 0
fi

if [[ "${1:-}" == "--prepare" || "${1:-}" == "--fetch-wheels" ]]; then
    mkdir -p .whl
    for ignored in /.whl/ "/$DATA/"; do
        grep -qx "$ignored" .git/info/exclude 2>/dev/null || echo "$ignored" >> .git/info/exclude
    done
    "$PY" -m pip download --no-deps --only-binary=:all: --python-version 3.12 \
        --implementation cp --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 \
        --platform manylinux2014_x86_64 -d .whl keras namex optree pyyaml || exit 1
    [[ -f "$DATA/train.txt" ]] || prepare_data "$DATA" 1200 || exit 1
    du -sh .whl "$DATA"
    exit 0
fi

if [[ -d .whl ]] && ! "$PY" -c "import keras" 2>/dev/null; then
    wheels=(.whl/*.whl)
    [[ -d .whl_peer ]] && wheels+=(.whl_peer/*.whl)
    "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
        --target /tmp/site "${wheels[@]}"
    export PYTHONPATH="/tmp/site:$PWD${PYTHONPATH:+:$PYTHONPATH}"
else
    export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
fi
export TF_CPP_MIN_LOG_LEVEL=3 PYTHONUNBUFFERED=1
# no TensorFlow there: Keras would default to it (each backends contender sets its own)
export KERAS_BACKEND="${KERAS_BACKEND:-jax}"
# the files go to $OUT (the device machine's empty folder), else to a new folder of their own:
# never into the checkout or the current folder, where they could replace the user's files
out="${OUT:-$(mktemp -d "${TMPDIR:-/tmp}/yolo3-gpu-benchmark.XXXXXX")}"
echo "files: $out"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
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

dry=0
if [[ "${1:-}" == "--dry-run" ]]; then
    dry=1
    shift
    data=(--size 64 --batch-size 2 --batches 1 --warmup 0 --num-images 8 --workers 1 2
          --memory-epochs 2)
    backends=(--size 64 --batch 2 --steps 1)
    backends64=(--size 64 --batch 4 --steps 1)
    tta=(--input-size 64 --batch-size 2)
    feedargs=(--input-size 64 --batch-size 2 --epochs 2)
    declare -A epochs=([tiny-af]=1 [yolov3]=1)
    declare -A limits=([data]=300 [tta-tiny-af]=600 [tta-yolov3]=600 [peer]=600 [backends]=600
                       [feed]=600)
    peer_device=cpu
    DATA="$work/data"
    prepare_data "$DATA" 12 || exit 1
else
    data=(--size 416 --batch-size 32 --batches 10 --warmup 2 --num-images 256 --workers 1 8 16
          --memory-epochs 10)
    backends=(--size 416 --batch 32 --steps 10)
    backends64=(--size 416 --batch 64 --steps 10)
    tta=(--input-size 416 --batch-size 32)
    feedargs=(--input-size 416 --batch-size 32 --epochs 3)
    declare -A epochs=([tiny-af]=20 [yolov3]=10)
    declare -A limits=([data]=200 [tta-tiny-af]=300 [tta-yolov3]=330 [peer]=300 [backends]=160
                       [feed]=480)
    peer_device=0
    if [[ ! -f "$DATA/train.txt" ]]; then  # not carried: made here (about a minute)
        DATA="$work/data"
        prepare_data "$DATA" 1200 || exit 1
    fi
fi
steps=("$@")
[[ ${#steps[@]} -gt 0 ]] || steps=(peer feed data tta-tiny-af backends tta-yolov3)
for name in "${steps[@]}"; do
    [[ -v "limits[$name]" ]] || {
        echo "gpu_benchmark.sh: unknown step '$name' (data, feed, tta-tiny-af, tta-yolov3," \
            "peer, backends)" >&2
        exit 2
    }
done

tta() {  # tta VARIANT: train from scratch; its history.csv is copied to $OUT as it grows
    local variant="$1" history="$work/$1/history.csv"
    (while sleep 10; do [[ -f "$history" ]] && cp "$history" "$out/tta_$variant.csv"; done) &
    local copier=$!
    step "time to accuracy, $variant" "${limits[tta-$variant]}" "$PY" -m yolo3 train \
        --variant "$variant" --annotations "$DATA/train.txt" --val-annotations "$DATA/val.txt" \
        --classes "$DATA/classes.txt" "${tta[@]}" --epochs "${epochs[$variant]}" \
        --precision mixed_bfloat16 --pipeline numpy --cache ram --eval-every 1 \
        --output "$work/$variant" --quiet
    kill "$copier" 2>/dev/null
    wait "$copier" 2>/dev/null
    if [[ -f "$history" ]]; then
        cp "$history" "$out/tta_$variant.csv"
        cat "$history"
    fi
}

for name in "${steps[@]}"; do
    case "$name" in
        feed)
            step feed "${limits[feed]}" "$PY" -m yolo3 benchmark feed --data "$DATA" \
                --precision mixed_bfloat16 "${feedargs[@]}" > >(tee "$out/feed.txt") ;;
        data)
            step data "${limits[data]}" "$PY" -m yolo3 benchmark data --no-classic --mosaic 0 1 \
                "${data[@]}" ;;
        tta-tiny-af|tta-yolov3)
            tta "${name#tta-}" ;;
        peer)
            if "$PY" -c "import ultralytics" 2>/dev/null; then
                step "the peer, yolov3-tinyu" "${limits[peer]}" "$PY" -m yolo3 benchmark recipe \
                    --variant tiny-af --data "$DATA" "${tta[@]}" --epochs "${epochs[tiny-af]}" \
                    --cpu-replicas 0 --peer ultralytics --peer-only \
                    --peer-python "$(command -v "$PY")" --peer-device "$peer_device" --threads 8 \
                    --json "$out/peer_tiny-af.json"
            else
                echo "== the peer: Ultralytics does not import here (--prepare-peer, then carry" \
                    ".whl_peer)"
            fi ;;
        backends)
            step backends "${limits[backends]}" "$PY" -m yolo3 benchmark backends \
                --backends jax torch --variants yolov3 tiny-af --precision mixed_bfloat16 \
                "${backends[@]}" --json "$out/backends_gpu.json"
            step "backends, batch 64" "${limits[backends]}" "$PY" -m yolo3 benchmark backends \
                --backends jax --variants yolov3 --precision mixed_bfloat16 "${backends64[@]}" \
                --json "$out/backends_gpu_64.json" ;;
    esac
done
exit $failed
