"""One model on every Keras backend (issue 47): one training step of each head (the anchor head of
tiny YOLOv3, the anchor-free head of tiny-af) gives the same loss and gradients on TensorFlow, JAX
and, where it is installed, PyTorch (tests/backend_step.py, run in a process of its own per
backend, float32).

Held to: the loss within 1e-5 relative; the loss's gradient with respect to the raw maps (its own
arithmetic: boxes, assignment, terms) within 1e-5 of the largest; the gradient of every weight of
the body within 1e-4 of its largest. The last is float32's spread through twenty convolutions,
whose libraries sum in different orders: TensorFlow against itself with oneDNN off differs by
1.8e-5 on these gradients (2026-11-26, Zen 5), JAX and PyTorch by 2.6e-5 to 2.9e-5."""
from __future__ import annotations

import importlib.util
import os
import subprocess
import sys

import numpy as np
import pytest
from locations import REPO, TESTS


@pytest.fixture(scope="module")
def steps(tmp_path_factory):
    """``{backend: {key: array}}`` of every installed backend: TensorFlow in this process (the
    suite's backend), the others each in a process of its own (TensorFlow and JAX are the test
    extra's; PyTorch only where installed), started first so that they run beside it."""
    import backend_step
    import keras
    out = tmp_path_factory.mktemp("backends")
    children = {}
    for backend, package in (("jax", "jax"), ("torch", "torch")):
        if importlib.util.find_spec(package) is None:
            continue
        path = out / f"{backend}.npz"
        env = dict(os.environ, KERAS_BACKEND=backend, TF_CPP_MIN_LOG_LEVEL="3")
        children[backend] = (path, subprocess.Popen(
            [sys.executable, str(TESTS / "backend_step.py"), str(path)], stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, text=True, cwd=REPO, env=env))
    policy = keras.config.dtype_policy()
    try:
        results = {"tensorflow": backend_step.results()}
    finally:
        keras.config.set_dtype_policy(policy)
    for backend, (path, proc) in children.items():
        _, err = proc.communicate(timeout=600)
        assert proc.returncode == 0, f"{backend}: {err[-3000:]}"
        with np.load(path) as data:
            results[backend] = {k: data[k] for k in data.files}
    return results


def _relative(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.abs(a - b).max() / max(np.abs(a).max(), 1e-12))


def _compare(steps, backend: str) -> None:
    if backend not in steps:
        pytest.skip(f"{backend} is not installed here (PyTorch is not in the test extra: its "
                    "wheels pull gigabytes of CUDA libraries; install torch to run this)")
    reference, other = steps["tensorflow"], steps[backend]
    assert set(reference) == set(other)
    for key in sorted(reference):
        error = _relative(reference[key], other[key])
        limit = 1e-4 if "|step|" in key and not key.endswith("|loss") else 1e-5
        assert error <= limit, f"{backend} {key}: {error:.2e} relative (limit {limit:g})"


def test_jax_gives_tensorflows_loss_and_gradients(steps):
    assert "jax" in steps, "JAX is in the test extra: pip install -e '.[test]'"
    _compare(steps, "jax")


def test_pytorch_gives_tensorflows_loss_and_gradients(steps):
    _compare(steps, "torch")


def test_the_comparison_has_every_weight_of_both_heads(steps):
    keys = steps["tensorflow"]
    for variant in ("tiny", "tiny-af"):
        weights = [k for k in keys if k.startswith(f"{variant}|step|") and "kernel" in k]
        assert len(weights) >= 13, (variant, len(weights))  # every convolution of the body
        assert np.isfinite(keys[f"{variant}|step|loss"]) and keys[f"{variant}|step|loss"] > 0


# -- detection: the same model, the same detections; no TensorFlow needed -----------------------

def without_tensorflow(backend: str) -> dict:
    """The environment of a process (and its children) on ``backend`` where TensorFlow cannot be
    imported (tests/no_tensorflow/sitecustomize.py)."""
    path = os.pathsep.join([str(TESTS / "no_tensorflow"), os.environ.get("PYTHONPATH", "")])
    return dict(os.environ, KERAS_BACKEND=backend, PYTHONPATH=path, TF_CPP_MIN_LOG_LEVEL="3")


def test_tensorflow_really_is_unimportable_there():
    proc = subprocess.run([sys.executable, "-c", "import tensorflow"], capture_output=True,
                          text=True, env=without_tensorflow("jax"), timeout=120)
    assert proc.returncode != 0 and "No module named 'tensorflow'" in proc.stderr


@pytest.mark.slow  # CI runs it (.ci/run); about 30 s on 2 cores, kept out of the default suite
def test_the_backend_benchmark_runs_on_jax_without_tensorflow(tmp_path):
    """``yolo3 benchmark backends --backends jax --dry-run --no-detect``: the GPU script's training
    rows, checked on a CPU, with TensorFlow unimportable in the command and its children (its
    detection is the detector's, tested without TensorFlow above)."""
    import json
    out = tmp_path / "rows.json"
    proc = subprocess.run(
        [sys.executable, "-m", "yolo3", "benchmark", "backends", "--backends", "jax",
         "--variants", "tiny-af", "--dry-run", "--no-detect", "--json", str(out)],
        capture_output=True, text=True, cwd=REPO, env=without_tensorflow("jax"), timeout=600)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    (row,) = json.loads(out.read_text())
    assert row["backend"] == "jax" and row["loss_finite"] and row["train_img_s"] > 0
    assert row["size"] == 64 and row["batch"] == 2 and "detect_ms" not in row
    assert "jax" in proc.stdout and "img/s" in proc.stdout

def _other_backends():
    """The installed backends other than TensorFlow, each a pytest param (PyTorch skipped with
    the reason where it is not installed)."""
    reason = ("PyTorch is not installed here (not in the test extra: its wheels pull gigabytes "
              "of CUDA libraries); install torch to run this")
    return [pytest.param("jax"),
            pytest.param("torch", marks=pytest.mark.skipif(
                importlib.util.find_spec("torch") is None, reason=reason))]


@pytest.fixture(scope="module")
def detection_world(tmp_path_factory):
    """tiny (anchor head) and tiny-af (anchor-free head) bodies at 160 px with outputs scaled so
    that they detect, saved as .keras under TensorFlow, and three images of different sizes."""
    import keras
    from PIL import Image

    from yolo3.checkpoint.metadata import ModelInfo
    from yolo3.checkpoint.saving import atomic_save_model
    from yolo3.config.specs import get_spec
    from yolo3.modeling.bodies import build_spec_body
    root = tmp_path_factory.mktemp("detect_backends")
    keras.utils.set_random_seed(3)
    models = {}
    for variant, gain in (("tiny", 6.0), ("tiny-af", 1.5)):
        spec = get_spec(variant)
        body = build_spec_body(spec, 3, None if spec.anchor_free else 3, (160, 160))
        for layer in body.layers:
            weights = layer.get_weights()
            if weights and (layer.name.startswith("output") or "cls" in layer.name):
                layer.set_weights([weights[0] * gain, *weights[1:]])
        info = ModelInfo.of_head(spec.head, 3, class_names=["a", "b", "c"], variant=variant,
                                 input_size=(160, 160))
        models[variant] = atomic_save_model(body, root / f"{variant}.keras", info)
    images = root / "images"
    images.mkdir()
    rng = np.random.default_rng(5)
    for i, (h, w) in enumerate(((120, 160), (200, 96), (97, 131))):
        yy, xx = np.mgrid[0:h, 0:w]
        smooth = np.stack([np.sin(xx / (7 + i)), np.cos(yy / 5), np.sin((xx + yy) / 11)], -1)
        pixels = np.clip(127 + 90 * smooth + rng.normal(0, 20, (h, w, 3)), 0, 255)
        Image.fromarray(pixels.astype(np.uint8)).save(images / f"im{i}.png")
    return root, models, images


def _tensorflow_detections(model, images):
    from PIL import Image

    from yolo3.inference.detector import YOLO
    detector = YOLO(model, score=0.2, precision="float32")
    return {path.name: detector.detect(np.asarray(Image.open(path).convert("RGB")))
            for path in sorted(images.iterdir())}


VARIANTS = ("tiny", "tiny-af")


@pytest.fixture(scope="module")
def cli_runs(detection_world, tmp_path_factory):
    """``{backend: [result of each command]}``: under JAX and PyTorch (where installed), with
    TensorFlow unimportable, one process per backend (both running at once) runs ``yolo3
    detect`` of each variant's .keras (batches of 2 and a single image), and under JAX also
    ``detect --engine onnxruntime``. Each result: ``{"code", "out", "err", "json", "output"}``."""
    import json

    from backend_cli import MARK
    root, models, images = detection_world
    work = tmp_path_factory.mktemp("cli_runs")
    children = {}
    for backend in ("jax", "torch"):
        if importlib.util.find_spec(backend) is None:
            continue
        commands, files = [], []
        for variant in VARIANTS:
            out = work / f"{backend}-{variant}.json"
            commands.append(["detect", "--model", str(models[variant]), "--input", str(images),
                             "--output", str(work / f"{backend}-{variant}"), "--json", str(out),
                             "--score", "0.2", "--precision", "float32", "--batch-size", "2"])
            files.append((out, work / f"{backend}-{variant}"))
        if backend == "jax":
            refused = work / "jax-refused"
            commands.append(["detect", "--model", str(models["tiny"]), "--input", str(images),
                             "--output", str(refused), "--engine", "onnxruntime"])
            files.append((None, refused))
        children[backend] = (files, subprocess.Popen(
            [sys.executable, str(TESTS / "backend_cli.py"), json.dumps(commands)],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO,
            env=without_tensorflow(backend)))
    runs = {}
    for backend, (files, proc) in children.items():
        stdout, stderr = proc.communicate(timeout=900)
        assert proc.returncode == 0, f"{backend}: {stderr[-3000:]}"
        line = next(row for row in stdout.splitlines() if row.startswith(MARK))
        results = json.loads(line[len(MARK):])
        for result, (found, output) in zip(results, files):
            result["json"], result["output"] = found, output
        runs[backend] = results
    return runs


def _run_of(cli_runs, backend: str, index: int) -> dict:
    if backend not in cli_runs:
        pytest.skip(f"{backend} is not installed here")
    return cli_runs[backend][index]


@pytest.mark.slow  # CI runs it; detection under JAX keeps tests/inference/test_portable.py's
@pytest.mark.parametrize("backend", _other_backends())
@pytest.mark.parametrize("variant", VARIANTS)
def test_detect_without_tensorflow_finds_what_tensorflow_finds(detection_world, cli_runs,
                                                               backend, variant):
    """``yolo3 detect`` of a .keras saved under TensorFlow, on JAX / PyTorch with TensorFlow
    unimportable (batches of 2 and a single image): every image's detections equal TensorFlow's
    (boxes within 0.01 px, the JSON's 3 decimals; scores within 1e-4; the same classes)."""
    import json
    root, models, images = detection_world
    run = _run_of(cli_runs, backend, VARIANTS.index(variant))
    assert run["code"] == 0, run["err"][-3000:]
    assert f"the {backend} backend runs Keras" in run["out"] + run["err"]
    expected = _tensorflow_detections(models[variant], images)
    found = {os.path.basename(entry["image"]): entry
             for entry in json.loads(run["json"].read_text())}
    assert set(found) == set(expected)
    total = 0
    for name, (boxes, scores, classes) in expected.items():
        entry = found[name]
        assert len(entry["boxes"]) == len(boxes), name
        np.testing.assert_allclose(np.asarray(entry["boxes"]).reshape(-1, 4), boxes, atol=0.01)
        np.testing.assert_allclose(entry["scores"], scores, atol=1e-4)
        assert list(entry["classes"]) == classes.tolist()
        total += len(boxes)
    assert total >= 10, f"{variant}: too few detections ({total}) to compare"


@pytest.mark.slow  # CI runs it, with the command-line runs above
def test_a_converting_engine_is_refused_on_jax_naming_the_flag(cli_runs):
    run = _run_of(cli_runs, "jax", len(VARIANTS))
    assert run["code"] == 2, run["err"][-2000:]
    assert "--engine" in run["err"] and "jax" in run["err"] and "Traceback" not in run["err"]
    assert not run["output"].exists()


# -- training: yolo3 train on JAX, the same recipe, the same files ------------------------------

@pytest.mark.slow  # CI runs it (.ci/run); about 75 s on 2 cores, kept out of the default suite
@pytest.mark.parametrize("backend", _other_backends())
def test_yolo3_train_runs_there_and_its_model_detects_under_tensorflow(tmp_path, backend):
    """``KERAS_BACKEND=jax|torch yolo3 train`` (tf.data feeding the backend, the EMA, batch-norm
    statistics, validation mAP, checkpoints) writes a .keras that loads and detects under
    TensorFlow; the precise-BN recomputation ran there (the moving statistics moved)."""
    import csv

    from yolo3.data.synthetic import make_synthetic_dataset
    from yolo3.inference.detector import YOLO
    annotations, classes = make_synthetic_dataset(str(tmp_path / "ds"), 24, (96, 96), seed=3)
    env = dict(os.environ, KERAS_BACKEND=backend, TF_CPP_MIN_LOG_LEVEL="3")
    run = tmp_path / "run"
    proc = subprocess.run(
        [sys.executable, "-m", "yolo3", "train", "--annotations", annotations, "--classes",
         classes, "--variant", "tiny-af", "--input-size", "64", "--epochs", "1", "--batch-size",
         "8", "--precision", "float32", "--output", str(run), "--quiet"],
        capture_output=True, text=True, cwd=REPO, env=env, timeout=600)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    assert "Expected: ['image']" not in proc.stderr  # the statistics probe takes one array
    with open(run / "history.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert rows and np.isfinite(float(rows[-1]["loss"])) and "mAP50_95" in rows[-1]
    detector = YOLO(run / "final.keras", score=0.01, precision="float32")
    variances = [layer.moving_variance.numpy() for layer in detector.body.layers
                 if hasattr(layer, "moving_variance")]
    assert variances and not all(np.allclose(v, 1.0) for v in variances)
    image = np.random.default_rng(0).integers(0, 256, (96, 128, 3), dtype=np.uint8)
    boxes, scores, classes_found = detector.detect(image)
    assert boxes.shape[1:] == (4,) and len(boxes) == len(scores) == len(classes_found)


def test_tf_distribute_on_jax_is_refused_through_the_cli_and_nothing_is_written(tmp_path):
    from yolo3.data.synthetic import make_synthetic_dataset
    annotations, classes = make_synthetic_dataset(str(tmp_path / "ds"), 8, (64, 64), seed=1)
    run = tmp_path / "run"
    proc = subprocess.run(
        [sys.executable, "-m", "yolo3", "train", "--annotations", annotations, "--classes",
         classes, "--variant", "tiny-af", "--input-size", "64", "--epochs", "1", "--batch-size",
         "2", "--strategy", "mirrored", "--output", str(run)],
        capture_output=True, text=True, cwd=REPO, timeout=600,
        env=dict(os.environ, KERAS_BACKEND="jax", TF_CPP_MIN_LOG_LEVEL="3"))
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert "--strategy mirrored" in proc.stderr and "jax backend" in proc.stderr
    assert "Traceback" not in proc.stderr and not run.exists()


@pytest.mark.slow  # CI runs it (.ci/run); about 60 s on 2 cores
def test_cpu_replicas_on_jax_train_through_the_wrapper_and_save_the_template(tmp_path):
    """``yolo3 train --cpu-replicas 2`` on JAX: the logical devices made before JAX starts, the
    global batch split over them (the stage line says so), the template saved and loadable."""
    from yolo3.checkpoint.saving import load_keras_model
    from yolo3.data.synthetic import make_synthetic_dataset
    make_synthetic_dataset(str(tmp_path / "ds"), 12, (64, 64), seed=1, val_fraction=0.34)
    run = tmp_path / "run"
    proc = subprocess.run(
        [sys.executable, "-m", "yolo3", "train", "--annotations", str(tmp_path / "ds/train.txt"),
         "--val-annotations", str(tmp_path / "ds/val.txt"), "--classes",
         str(tmp_path / "ds/classes.txt"), "--variant", "tiny-af", "--input-size", "64",
         "--epochs", "1", "--batch-size", "2", "--cpu-replicas", "2", "--output", str(run)],
        capture_output=True, text=True, cwd=REPO, timeout=900,
        env=dict(os.environ, KERAS_BACKEND="jax", TF_CPP_MIN_LOG_LEVEL="3"))
    assert proc.returncode == 0, proc.stderr[-3000:]
    said = proc.stdout + proc.stderr
    assert "2 replica(s), global batch 4" in said and "wrapper" in said, said[-2000:]
    body, info = load_keras_model(run / "final.keras")
    assert info.variant == "tiny-af" and body.name != "" and (run / "history.csv").exists()
