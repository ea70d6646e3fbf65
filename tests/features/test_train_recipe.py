"""The recipe inside training: evaluation while training (mAP in the logs, best by mAP, early
stopping, resume), EMA checkpoints, and each recipe flag reaching the model, optimiser and data."""
from __future__ import annotations

import csv
import json
import logging
import math
import shutil
from pathlib import Path
from types import SimpleNamespace

import keras
import numpy as np
import pytest

from yolo3.cli.evaluate import main as evaluate_main
from yolo3.cli.train import main as train_main
from yolo3.config.train_config import ConfigError, TrainConfig
from yolo3.data.synthetic import make_synthetic_dataset
from yolo3.training.callbacks import MapEvaluation
from yolo3.training.data_step import prepare_data
from yolo3.training.datasets import make_datasets
from yolo3.training.models import build_models
from yolo3.training.placement import pick_strategy, use_xla
from yolo3.training.resume import restore_resume_state
from yolo3.training.run_folder import prepare_output
from yolo3.training.stages import Stage, run_stage, stage_callbacks, stage_optimizer
from yolo3.training.train import train, validate_config


@pytest.fixture(scope="module")
def dataset(tmp_path_factory):
    d = tmp_path_factory.mktemp("recipe")
    make_synthetic_dataset(str(d), 16, (96, 96), val_fraction=0.25, seed=5)
    return d


def _config(d: Path, out: Path, **kw) -> TrainConfig:
    base = dict(annotations=str(d / "train.txt"), val_annotations=str(d / "val.txt"),
                classes=str(d / "classes.txt"), output=str(out), model="tiny", input_size=64,
                batch_size=4, epochs=2, augment="none", seed=1, verbose=0,
                precision="float32")  # exact comparisons: never the machine's auto choice
    base.update(kw)
    return TrainConfig(**base)


def _rows(out: Path):
    with open(out / "history.csv") as f:
        return list(csv.DictReader(f))


def _evaluate(model: Path, d: Path, tmp_path: Path) -> float:
    """mAP@0.5:0.95 of a saved model by ``yolo3 evaluate`` (a fresh detector from the file)."""
    out = tmp_path / f"{model.stem}.json"
    assert evaluate_main(["--annotations", str(d / "val.txt"), "--model", str(model),
                          "--batch-size", "4", "--precision", "float32", "--out", str(out),
                          "--no-plot"]) == 0
    return float(json.loads(out.read_text())["mAP50_95"])


@pytest.mark.slow  # CI runs it (.ci/run); about 35 s on 2 cores
def test_map_while_training_picks_best_and_matches_a_fresh_evaluation(dataset, tmp_path, caplog):
    caplog.set_level(logging.INFO, logger="yolo3")
    out = tmp_path / "run"
    result = train(_config(dataset, out, epochs=3, eval_every=2, lr=5e-3, verbose=1))
    rows = _rows(out)
    assert [r["epoch"] for r in rows] == ["0", "1", "2"]
    first, second, last = (float(r["mAP50_95"]) for r in rows)
    assert math.isnan(first) and not math.isnan(second) and not math.isnan(last)  # every 2 + last
    assert float(rows[2]["mAP50"]) >= last > 0
    # the figure logged for the last epoch is the saved final model's (EMA weights)
    assert _evaluate(Path(result.final_model), dataset, tmp_path) == pytest.approx(last, abs=1e-9)
    assert _evaluate(out / "best.keras", dataset, tmp_path) == pytest.approx(max(second, last),
                                                                             abs=1e-9)
    assert json.loads((out / "resume.json").read_text())["best"] == pytest.approx(max(second, last))
    text = caplog.text
    assert "validation mAP@0.5" in text and "best validation mAP@0.5:0.95" in text
    # validation images with their detections in TensorBoard
    events = list((out / "logs" / "validation_images").glob("events.out.tfevents.*"))
    assert events
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    accumulator = EventAccumulator(str(events[0].parent), size_guidance={"tensors": 0})
    accumulator.Reload()
    assert "detections" in accumulator.Tags()["tensors"]
    assert {e.step for e in accumulator.Tensors("detections")} == {1, 2}


@pytest.mark.slow  # CI runs it (.ci/run); about 25 s on 2 cores
def test_resume_keeps_the_best_score(dataset, tmp_path):
    out = tmp_path / "resumed"
    train(_config(dataset, out, epochs=2, eval_every=1, lr=3e-3))
    best = json.loads((out / "resume.json").read_text())["best"]
    best_file = (out / "best.keras").stat().st_mtime_ns
    train(_config(dataset, out, epochs=3, eval_every=1, lr=1e-12, resume=True))
    rows = _rows(out)
    assert len(rows) == 3
    resumed = float(rows[2]["mAP50_95"])
    assert json.loads((out / "resume.json").read_text())["best"] == pytest.approx(max(best, resumed))
    if resumed <= best:  # the earlier best is kept, not replaced by a worse resumed epoch
        assert (out / "best.keras").stat().st_mtime_ns == best_file


@pytest.mark.slow  # CI runs it (.ci/run); about 17 s on 2 cores
def test_patience_stops_when_map_stops_improving(dataset, tmp_path, caplog):
    out = tmp_path / "patience"
    # frozen batch norms and a vanishing learning rate: the weights, hence the mAP, stay put
    with caplog.at_level(logging.WARNING, logger="yolo3"):
        result = train(_config(dataset, out, epochs=6, eval_every=1, patience=2, lr=1e-12,
                               freeze_bn=True, ema=False))
    assert len(_rows(out)) == 3 and result.epochs_completed == 3
    # frozen batch norm is allowed, and the run warns what it measured to do to training
    assert any(r.levelno == logging.WARNING and r.getMessage().startswith("freeze_bn:")
               and "freeze_bn" in getattr(r, "settings", ()) for r in caplog.records)
    assert Path(result.final_model).exists()


@pytest.mark.slow  # CI runs it (.ci/run); about 15 s on 2 cores
def test_without_evaluation_best_is_chosen_by_validation_loss(dataset, tmp_path):
    out = tmp_path / "noeval"
    train(_config(dataset, out, epochs=2, eval_every=0))
    rows = _rows(out)
    assert "mAP50" not in rows[0] and "val_loss" in rows[0]
    best = json.loads((out / "resume.json").read_text())["best"]
    assert best == pytest.approx(min(float(r["val_loss"]) for r in rows), rel=1e-6)


class _Recorder(keras.callbacks.Callback):
    """The template's trainable weights after every step (before SwapEMAWeights sees the epoch)."""

    def __init__(self, template):
        super().__init__()
        self.template, self.steps, self.epoch_ends = template, [], []

    def on_train_batch_end(self, batch, logs=None):
        self.steps.append([v.numpy().astype(np.float64) for v in self.template.trainable_variables])

    def on_epoch_end(self, epoch, logs=None):
        self.epoch_ends.append(len(self.steps))


def _pieces(config):
    validate_config(config)
    data = prepare_data(config)
    placement = pick_strategy(config, len(data.records))
    run = prepare_output(config, data, placement.task)
    body, template, _ = build_models(config, data, placement)
    return data, placement, run, body, template


@pytest.mark.slow  # CI runs it (.ci/run); moved out of the default suite (15 minutes) when issue 67's tests came in: 18 s; tests/training/test_bn_statistics.py keeps the EMA weights' pairing
def test_ema_weights_are_what_checkpoints_and_the_final_model_hold(dataset, tmp_path):
    from yolo3.training.callbacks import StopOnNaN, TemplateCheckpoint
    from yolo3.training.resume import load_resume_state
    momentum = 0.6
    config = _config(dataset, tmp_path / "ema", epochs=2, eval_every=0, ema_momentum=momentum,
                     lr=1e-2)
    data, placement, run, body, template = _pieces(config)
    recorder = _Recorder(template)
    checkpoint = TemplateCheckpoint(body, run.folder, template=template, ema=True, verbose=0)
    snapshot = tmp_path / "after-epoch-1"

    class Snapshot(keras.callbacks.Callback):  # the resume state written after the first epoch
        def on_epoch_end(self, epoch, logs=None):
            if epoch == 0:
                shutil.copytree(run.output, snapshot)

    callbacks = [recorder] + stage_callbacks(config, run, checkpoint, StopOnNaN()) + [Snapshot()]
    run_stage(Stage(0, 2, False), config, body, template, placement,
              make_datasets(config, data, placement), callbacks)
    average = None
    for weights in recorder.steps:
        average = weights if average is None else [momentum * a + (1 - momentum) * w
                                                   for a, w in zip(average, weights)]
    for variable, expected in zip(template.trainable_variables, average):
        np.testing.assert_allclose(variable.numpy(), expected, rtol=1e-4, atol=1e-5)
    assert max(np.abs(t - a).max() for t, a in zip(recorder.steps[-1], average)) > 1e-4
    # mid-run, the resume state holds the EMA in the model and the trained weights in the
    # optimiser's averages; restoring puts the trained weights back in the model
    trained = recorder.steps[recorder.epoch_ends[0] - 1]
    state = load_resume_state(snapshot)
    assert state["ema_in_model"] and state["epoch"] == 1
    _, _, _, _, fresh = _pieces(config)
    optimizer = stage_optimizer(config, placement.steps, 2)
    restore_resume_state(state, fresh, optimizer, fresh.trainable_variables)
    for variable, expected in zip(fresh.trainable_variables, trained):
        np.testing.assert_allclose(variable.numpy(), expected, rtol=1e-6, atol=1e-7)


def test_recipe_flags_reach_the_loss_optimiser_and_data(dataset, tmp_path, monkeypatch):
    config = _config(dataset, tmp_path / "flags", box_loss="giou", label_smoothing=0.1,
                     weight_decay=1e-3, optimizer="sgd", mosaic=0.5, augment="light",
                     multi_scale=(64, 96), multi_scale_every=1, max_boxes=7)
    data, placement, _, body, template = _pieces(config)
    loss = template.get_layer("yolo_loss")
    assert (loss.options.box_loss, loss.options.label_smoothing, loss.true_boxes) == (
        "giou", 0.1, True)
    assert template.get_layer("true_boxes").batch_shape == (None, 7, 5)
    assert body.input_shape[1:3] == (None, None)  # multi-scale: any input size
    optimizer = stage_optimizer(config, placement.steps, 2)
    assert isinstance(optimizer, keras.optimizers.SGD) and optimizer.weight_decay == 1e-3
    assert optimizer.use_ema and placement.steps == 3
    # SGD's default peak 1e-2, one warm-up epoch of 3 steps: step 0 runs at a third of it
    assert float(optimizer.learning_rate) == pytest.approx(1e-2 / 3)
    seen = {}
    import yolo3.training.datasets
    real = yolo3.training.datasets._batches

    def spy(records, dataset_config, pipeline, *args, **kwargs):
        seen[dataset_config.training] = vars(dataset_config)
        assert pipeline == "tf"  # auto, where TensorFlow is installed
        return real(records, dataset_config, pipeline, *args, **kwargs)

    monkeypatch.setattr(yolo3.training.datasets, "_batches", spy)
    train_ds, _ = make_datasets(config, data, placement)
    assert seen[True]["augment"].mosaic == 0.5 and seen[True]["augment"].jitter == 0.1  # light
    assert seen[True]["multi_scale"].sizes == ((64, 64), (96, 96))
    assert seen[False]["augment"] is None and seen[False]["multi_scale"] is None
    sizes = {tuple(x[0].shape[1:3]) for x, _ in train_ds.repeat().take(12)}
    assert sizes == {(64, 64), (96, 96)}  # every batch one static size, both sizes used


@pytest.mark.slow  # CI runs it (.ci/run); about 20 s on 2 cores
def test_multi_scale_training_runs_and_saves_a_model_of_the_base_size(dataset, tmp_path):
    from yolo3.checkpoint.loading import load_body
    out = tmp_path / "ms"
    result = train(_config(dataset, out, epochs=1, multi_scale=(64, 96), multi_scale_every=1,
                           eval_every=1))
    assert math.isfinite(float(_rows(out)[0]["loss"]))
    body, info = load_body(result.final_model)
    assert info.input_size == (64, 64)


@pytest.mark.slow  # CI runs it; mixed bfloat16 steps keep the wrapper's and mirrored's tests
def test_mixed_bfloat16_trains_with_a_float32_loss_and_saves_float32(dataset, tmp_path, caplog):
    caplog.set_level(logging.INFO, logger="yolo3")
    from yolo3.checkpoint.loading import load_body
    out = tmp_path / "bf16"
    result = train(_config(dataset, out, epochs=1, precision="mixed_bfloat16", eval_every=1,
                           steps_per_epoch=2, batch_size=2))
    assert "mixed_bfloat16" in caplog.text
    assert math.isfinite(float(_rows(out)[0]["loss"]))
    body, _ = load_body(result.final_model)
    assert {layer.dtype_policy.name for layer in body.layers} == {"float32"}
    assert keras.config.dtype_policy().name == "float32"  # the global policy is restored
    config = _config(dataset, tmp_path / "x", precision="mixed_bfloat16")
    from yolo3.training.recipe import dtype_policy
    with dtype_policy("mixed_bfloat16"):
        _, _, _, body, template = _pieces(config)
    assert body.get_layer("output_s32").compute_dtype == "bfloat16"
    assert body.get_layer("output_s32").variable_dtype == "float32"
    assert template.get_layer("yolo_loss").compute_dtype == "float32"


@pytest.mark.slow  # CI runs it (.ci/run); about a minute on 2 cores
def test_jit_compiles_the_step_but_never_the_wrapper(dataset, tmp_path, caplog):
    caplog.set_level(logging.INFO, logger="yolo3")
    out = tmp_path / "jit"
    train(_config(dataset, out, epochs=1, jit="on", eval_every=0))
    assert "XLA" in caplog.text
    assert math.isfinite(float(_rows(out)[0]["loss"]))
    config = _config(dataset, out, jit="on")

    class Wrapped:
        uses_wrapper = True

    assert not use_xla(config, Wrapped()) and not use_xla(_config(dataset, out, jit="off"), Wrapped())


@pytest.mark.parametrize("kw, message", [
    (dict(optimizer="rmsprop"), "optimizer must be one of adam, sgd"),
    (dict(box_loss="l1"), "box_loss must be one of mse, giou, diou, ciou"),
    (dict(precision="bfloat16"), "precision must be one of"),
    (dict(jit="maybe"), "jit must be one of auto, on, off"),
    (dict(weight_decay=-1.0), r"weight_decay must be in \[0, 1\], got -1.0"),
    (dict(ema_momentum=1.0), r"ema_momentum must be in \(0, 1\)"),
    (dict(label_smoothing=1.0), r"label_smoothing must be in \[0, 1\)"),
    (dict(mosaic=1.5), r"mosaic must be in \[0, 1\] \(a probability\)"),
    (dict(mosaic=0.5, augment="none"), "mosaic needs augmentation"),
    (dict(multi_scale=(64, 100)), "multi_scale.*multiples of 32"),
    (dict(multi_scale=(64, 96), multi_scale_every=0), r"multi_scale_every must be in \[1, 10000000\]"),
    (dict(eval_every=-1), r"eval_every must be in \[0, 100000\] \(0: no evaluation\)"),
    (dict(patience=2, eval_every=0), "patience counts evaluations"),
    (dict(lr=0.0), r"lr must be in \(0, 10\], got 0.0"),
    (dict(bn_stats_images=-1), r"bn_stats_images must be in \[0, 10000000\]"),
    (dict(bn_momentum=1.0), r"bn_momentum must be in \[0, 1\)"),
    (dict(assign_iou=0.0), r"assign_iou must be in \(0, 1\]"),
    (dict(assign_iou=1.2), r"assign_iou must be in \(0, 1\]"),
])
def test_bad_recipe_values_are_refused_naming_the_setting(dataset, tmp_path, kw, message):
    with pytest.raises(ConfigError, match=message):
        validate_config(_config(dataset, tmp_path, **kw))


def test_cli_flags_map_to_the_config(dataset, tmp_path, monkeypatch):
    seen = {}
    import yolo3.training.train as train_module

    def fake_train(config):
        seen["config"] = config
        raise SystemExit(0)

    monkeypatch.setattr(train_module, "train", fake_train)
    with pytest.raises(SystemExit):
        train_main(["--annotations", str(dataset / "train.txt"), "--classes",
                    str(dataset / "classes.txt"), "--output", str(tmp_path / "o"),
                    "--optimizer", "sgd", "--weight-decay", "0", "--ema", "--ema-momentum",
                    "0.9", "--box-loss", "diou", "--label-smoothing", "0.05", "--mosaic", "0.3",
                    "--multi-scale", "320", "480", "--multi-scale-every", "5", "--eval-every", "3",
                    "--patience", "4", "--precision", "float32", "--jit", "off",
                    "--bn-stats-images", "32", "--assign-iou", "0.3", "--ignore-iou", "0.7"])
    c = SimpleNamespace(**seen["config"].settings())
    assert (c.optimizer, c.weight_decay, c.ema, c.ema_momentum) == ("sgd", 0.0, True, 0.9)
    assert (c.box_loss, c.label_smoothing, c.mosaic) == ("diou", 0.05, 0.3)
    assert (c.multi_scale, c.multi_scale_every, c.eval_every, c.patience) == ((320, 480), 5, 3, 4)
    assert (c.precision, c.jit, c.lr, c.bn_stats_images) == ("float32", "off", None, 32)
    assert (c.assign_iou, c.ignore_iou) == (0.3, 0.7)


@pytest.mark.slow  # CI runs it (.ci/run); about 50 s on 2 cores, the default suite's longest
def test_saved_models_normalise_with_statistics_of_their_own_weights(dataset, tmp_path):
    """With the default recipe (EMA, precise batch-norm statistics) the final and best models'
    moving statistics are those of their own (averaged) weights over the statistics images; with
    ``bn_stats_images=0`` (Keras's moving averages) they are not. (The replica wrapper shares the
    body: the CLI test with two CPU replicas trains with the same callback.)"""
    from yolo3.checkpoint.loading import load_body
    from yolo3.training.bn_statistics import BatchNormStatistics
    from yolo3.training.datasets import batch_norm_images

    def stale_share(out: Path, **kw) -> float:
        config = _config(dataset, out, epochs=2, eval_every=1, lr=1e-2, **kw)
        train(config)
        worst = 0.0
        for name in ("final.keras", "best.keras"):
            body, _ = load_body(out / name)
            saved = [v.numpy().copy() for v in body.weights if "moving" in v.path]
            reference = _config(dataset, out, epochs=2, eval_every=1, lr=1e-2)
            images = batch_norm_images(reference, prepare_data(reference))
            BatchNormStatistics(body, images).recompute()
            fresh = [v.numpy() for v in body.weights if "moving" in v.path]
            assert len(saved) == len(fresh) > 10
            worst = max(worst, max(float(np.abs(a - b).max() / (np.abs(b).max() + 1e-6))
                                   for a, b in zip(saved, fresh)))
        return worst

    assert stale_share(tmp_path / "precise") <= 1e-4
    assert stale_share(tmp_path / "moving", bn_stats_images=0) > 1e-2


def test_map_evaluation_follows_weight_changes(dataset, tmp_path):
    """The evaluator compiles once and re-reads the body's weights at every evaluation: its figures
    equal a fresh detector's after the weights change."""
    from yolo3.data.images import load_image
    from yolo3.evaluation.metrics import evaluate_detections
    from yolo3.inference.detector import YOLO
    config = _config(dataset, tmp_path / "follow")
    data, _, _, body, _ = _pieces(config)
    info = data.info()
    callback = MapEvaluation(body, info, data.val_records, verbose=0)

    def fresh():
        detector = YOLO.from_body(body, info, score=0.001, iou=0.45, precision="float32")
        images = [load_image(r.path) for r in data.val_records]
        dets = dict(enumerate(detector.detect_batch(images)))
        gt = {k: np.asarray(r.boxes, np.float64).reshape(-1, 5)
              for k, r in enumerate(data.val_records)}
        return evaluate_detections(gt, dets, info.num_classes, info.names()), dets

    before = callback.evaluate()
    rng = np.random.default_rng(0)
    for layer in body.layers:
        if isinstance(layer, keras.layers.BatchNormalization):
            gamma, beta, mean, var = layer.get_weights()
            layer.set_weights([gamma * rng.uniform(0.5, 1.5, gamma.shape).astype(np.float32),
                               beta + rng.normal(0, 0.5, beta.shape).astype(np.float32), mean, var])
    after, (reference, reference_dets) = callback.evaluate(), fresh()
    assert before["detections"][0][1].tolist() != after["detections"][0][1].tolist()  # changed
    for key in ("mAP50", "mAP50_95"):
        assert after[key] == pytest.approx(reference[key], abs=1e-9)
    for k, (boxes, scores, classes) in reference_dets.items():
        np.testing.assert_allclose(after["detections"][k][0], boxes, rtol=1e-5, atol=1e-4)
        np.testing.assert_allclose(after["detections"][k][1], scores, rtol=1e-5, atol=1e-6)


def test_prior_bias_starts_new_heads_at_the_data_priors(dataset, tmp_path):
    config = _config(dataset, tmp_path / "prior")
    data, _, _, body, _ = _pieces(config)
    per_image = np.mean([len(np.asarray(r.boxes).reshape(-1, 5)) for r in data.records])
    for name, stride in (("output_s32", 32), ("output_s16", 16)):
        bias = body.get_layer(name).get_weights()[1].reshape(3, 5 + 3).astype(np.float64)
        np.testing.assert_array_equal(bias[:, :4], 0.0)
        cells = (64 // stride) ** 2
        objectness = 1 / (1 + np.exp(-bias[:, 4]))
        np.testing.assert_allclose(objectness * cells * 3 * 2, per_image, rtol=1e-4)
        np.testing.assert_allclose(1 / (1 + np.exp(-bias[:, 5:])), 1 / 3, rtol=1e-5)
    _, _, _, plain, _ = _pieces(_config(dataset, tmp_path / "plain", prior_bias=False))
    assert not plain.get_layer("output_s32").get_weights()[1].any()
    # heads loaded from weights keep their loaded values
    saved = tmp_path / "saved.weights.h5"
    rng = np.random.default_rng(0)
    head = plain.get_layer("output_s32")
    head.set_weights([w + rng.normal(0, 0.1, w.shape).astype(np.float32) for w in head.get_weights()])
    plain.save_weights(str(saved))
    _, _, _, loaded, _ = _pieces(_config(dataset, tmp_path / "loaded", weights=str(saved)))
    np.testing.assert_array_equal(loaded.get_layer("output_s32").get_weights()[1],
                                  head.get_weights()[1])
