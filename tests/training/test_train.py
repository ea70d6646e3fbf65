"""yolo3.training.train: its named steps, each on its own (the end-to-end runs are in test_train_cli
and test_train_recipe)."""
from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest

from yolo3.data.class_names import read_classes
from yolo3.data.synthetic import make_synthetic_dataset
from yolo3.ops.anchors import read_anchors, write_anchors
from yolo3.training.distribute import ClusterTask
from yolo3.config.train_config import ConfigError, TrainConfig
from yolo3.training.data_step import prepare_data
from yolo3.training.models import build_models
from yolo3.training.placement import pick_strategy
from yolo3.training.run_folder import prepare_output
from yolo3.training.stages import Stage, stages
from yolo3.training.train import validate_config


@pytest.fixture(scope="module")
def dataset(tmp_path_factory):
    d = tmp_path_factory.mktemp("steps")
    ann, classes = make_synthetic_dataset(str(d), 10, (64, 64), val_fraction=0.2)
    return Path(ann), classes


def _config(dataset, tmp_path, **kw):
    ann, classes = dataset
    base = dict(annotations=str(ann), classes=classes, output=str(tmp_path / "out"), model="tiny",
                input_size=64, batch_size=2, epochs=5, freeze_epochs=2, seed=3)
    base.update(kw)
    return TrainConfig(**base)


def test_validate_config_names_the_argument(dataset, tmp_path):
    with pytest.raises(ConfigError, match="variant: unknown variant 'yolo9'") as caught:
        validate_config(_config(dataset, tmp_path, model="yolo9"))
    assert caught.value.settings == ("variant",)
    with pytest.raises(ConfigError, match="input_size: .*multiple of 32"):
        validate_config(_config(dataset, tmp_path, input_size=70))
    with pytest.raises(ConfigError, match=r"need 0 <= freeze_epochs \(9\) <= epochs \(5\)") as caught:
        validate_config(_config(dataset, tmp_path, freeze_epochs=9))
    assert caught.value.settings == ("freeze_epochs", "epochs")
    flags = {"freeze_epochs": "--freeze-epochs", "epochs": "--epochs"}
    assert caught.value.worded(flags.get).startswith("need 0 <= --freeze-epochs (9) <= --epochs (5)")


def test_prepare_data_splits_by_seed_and_uses_the_variants_anchors(dataset, tmp_path):
    data = prepare_data(_config(dataset, tmp_path, val_split=0.3))
    again = prepare_data(_config(dataset, tmp_path, val_split=0.3))
    assert len(data.val_records) == 3 and len(data.records) == 7
    assert [r.path for r in data.val_records] == [r.path for r in again.val_records]
    other = prepare_data(_config(dataset, tmp_path, val_split=0.3, seed=4))
    assert [r.path for r in other.val_records] != [r.path for r in data.val_records]
    np.testing.assert_array_equal(data.anchors, data.spec.default_anchors())
    assert data.masks == [[3, 4, 5], [0, 1, 2]] and data.class_names == ["circle", "square", "triangle"]
    info = data.info()
    assert info.variant == "tiny" and info.input_size == (64, 64) and info.num_classes == 3
    assert data.hw == (64, 64)
    wide = prepare_data(_config(dataset, tmp_path, input_size=(64, 96)))
    assert wide.info().input_size == (64, 96)
    bad = tmp_path / "five.txt"
    write_anchors(bad, np.ones((5, 2)))
    with pytest.raises(ConfigError, match="5 anchors do not split evenly over 2"):
        prepare_data(_config(dataset, tmp_path, anchors=str(bad)))


def test_anchors_auto_are_kmeans_of_the_training_boxes_and_their_fit_is_reported(
        dataset, tmp_path, caplog):
    from yolo3.data.annotations import box_sizes
    from yolo3.ops.anchors import anchor_fit, kmeans_anchors
    caplog.set_level("INFO")
    data = prepare_data(_config(dataset, tmp_path, anchors="auto", val_split=0.2))
    box_wh = box_sizes(data.records, (64, 64))
    want, _ = kmeans_anchors(box_wh, 6, seed=3)
    np.testing.assert_array_equal(data.anchors, want)
    assert data.masks == [[3, 4, 5], [0, 1, 2]]
    assert f"anchors fit the training boxes at 64x64: {anchor_fit(box_wh, want)}" in caplog.text
    # anchors far larger than any box of 64 px images: said so, with the way out
    caplog.clear()
    huge = tmp_path / "huge.txt"
    write_anchors(huge, np.full((6, 2), 600.0))
    prepare_data(_config(dataset, tmp_path, anchors=str(huge), val_split=0.2))
    assert "best possible recall 0.000 < 0.98" in caplog.text and "anchors auto" in caplog.text
    with pytest.raises(ConfigError, match="anchors auto: k-means needs at least k=6 boxes") as e:
        prepare_data(_config(dataset, tmp_path, anchors="auto", val_split=0.9))
    assert e.value.settings == ("anchors",)


def test_stages_after_a_resume(dataset, tmp_path):
    config = _config(dataset, tmp_path)
    assert stages(config, 0) == [Stage(0, 2, True), Stage(2, 5, False)]
    assert stages(config, 3) == [Stage(2, 5, False)]
    assert stages(config, 5) == []
    assert stages(_config(dataset, tmp_path, freeze_epochs=0), 0) == [Stage(0, 5, False)]


def test_prepare_output_chief_and_worker(dataset, tmp_path):
    config = _config(dataset, tmp_path)
    data = prepare_data(config)
    out = Path(config.output.output_dir)
    out.mkdir(parents=True)
    (out / ".tmp-last.keras-x").write_text("half written")
    run = prepare_output(config, data, ClusterTask())
    assert run.chief and run.write_dir == out and not (out / ".tmp-last.keras-x").exists()
    assert read_classes(out / "classes.txt") == data.class_names
    np.testing.assert_array_equal(read_anchors(out / "anchors.txt"), data.anchors)
    worker = prepare_output(config, data, ClusterTask(num_workers=2, task_type="worker", index=1,
                                                      is_chief=False))
    assert not worker.chief and worker.write_dir == out / ".worker-1"


def test_pick_strategy_and_build_models(dataset, tmp_path):
    config = _config(dataset, tmp_path)
    data = prepare_data(config)
    placement = pick_strategy(config, len(data.records))
    assert (placement.replicas, placement.global_batch, placement.steps) == (1, 2, 4)
    assert placement.strategy is None and not placement.uses_wrapper
    assert placement.describe("wrapper") == "one device"  # the stage line: nothing is split
    two = dataclasses.replace(placement, devices=["/cpu:0", "/cpu:1"], replicas=2)
    assert two.uses_wrapper and two.describe("wrapper") == "wrapper"
    with pytest.raises(ConfigError, match="fewer than one global batch"):
        pick_strategy(_config(dataset, tmp_path, batch_size=16), len(data.records))
    body, template, skipped = build_models(config, data, placement)
    assert body.input_shape == (None, 64, 64, 3) and skipped == []
    assert [t.name for t in template.inputs] == ["image", "y_true_s32", "y_true_s16", "true_boxes"]


@pytest.mark.parametrize("transfer", [True, False])
def test_build_models_transfers_or_skips_heads_of_another_class_count(dataset, tmp_path, transfer):
    from yolo3.modeling.bodies import build_body
    coco = build_body("tiny", 80, input_shape=(64, 64))
    rng = np.random.default_rng(0)
    coco.set_weights([rng.normal(size=w.shape).astype("float32") for w in coco.get_weights()])
    coco.save_weights(tmp_path / "coco.weights.h5")
    config = _config(dataset, tmp_path, weights=str(tmp_path / "coco.weights.h5"),
                     head_transfer=transfer)
    data = prepare_data(config)
    body, _, skipped = build_models(config, data, pick_strategy(config, len(data.records)))
    kernel = body.get_layer("output_s32").get_weights()[0].reshape(1, 1, 512, 3, 8)
    theirs = coco.get_layer("output_s32").get_weights()[0].reshape(1, 1, 512, 3, 85)
    if transfer:  # box and objectness from the file; the class channels are the model's own
        assert skipped == []
        np.testing.assert_array_equal(kernel[..., :5], theirs[..., :5])
    else:
        assert sorted(name for name, _ in skipped) == ["output_s16", "output_s32"]
        assert not np.array_equal(kernel[..., :5], theirs[..., :5])
    assert not np.array_equal(kernel[..., 5:], theirs[..., 5:8])


def test_an_anchor_free_variant_trains_on_boxes_from_its_priors(dataset, tmp_path):
    from yolo3.training.recipe import anchor_free_bias_priors
    config = _config(dataset, tmp_path, model="tiny-af", box_gain=2.0, class_gain=0.5)
    data = prepare_data(config)
    assert data.masks == [] and data.anchors.shape == (0, 2) and data.info().head == data.spec.head
    body, template, _ = build_models(config, data, pick_strategy(config, len(data.records)))
    assert [t.name for t in template.inputs] == ["image", "true_boxes"]
    loss = template.get_layer("anchor_free_loss")
    assert (loss.box_gain, loss.class_gain, loss.head) == (2.0, 0.5, data.spec.head)
    per_image = np.mean([len(r.boxes) for r in data.records])
    for stride in (32, 16):
        cells = (64 // stride) ** 2
        _, box_bias = body.get_layer(f"head_s{stride}_box_pred").get_weights()
        _, class_bias = body.get_layer(f"head_s{stride}_cls_pred").get_weights()
        np.testing.assert_allclose(box_bias, anchor_free_bias_priors(
            data.spec.head.reg_max, 3, cells, per_image)[0])
        p = per_image / (cells * 3)
        np.testing.assert_allclose(class_bias, np.full(3, np.log(p / (1 - p))), rtol=1e-5)


def test_an_anchor_free_variant_trains_at_several_sizes(dataset, tmp_path):
    """Multi-scale training: the body takes any size, and the loss finds the cells of each."""
    import keras

    from yolo3.modeling.loss import identity_loss
    config = _config(dataset, tmp_path, model="tiny-af", multi_scale=(64, 96))
    data = prepare_data(config)
    body, template, _ = build_models(config, data, pick_strategy(config, len(data.records)))
    assert body.input_shape == (None, None, None, 3)
    template.compile(optimizer=keras.optimizers.SGD(1e-3), loss=identity_loss)
    boxes = np.zeros((2, config.data.max_boxes, 5), np.float32)
    boxes[:, 0] = [4, 4, 40, 40, 1]
    for side in (64, 96):
        images = np.random.default_rng(side).uniform(0, 1, (2, side, side, 3)).astype(np.float32)
        assert np.isfinite(template.train_on_batch((images, boxes), np.zeros(2)))


@pytest.mark.parametrize("objectness", ["one", "iou"])
def test_build_models_hands_the_recipe_to_the_loss(dataset, tmp_path, objectness):
    config = _config(dataset, tmp_path, objectness=objectness, box_loss="giou", label_smoothing=0.1,
                     box_gain=2.0, class_gain=0.5, ignore_iou=0.7)
    data = prepare_data(config)
    _, template, _ = build_models(config, data, pick_strategy(config, len(data.records)))
    loss = template.get_layer("yolo_loss")
    assert (loss.objectness, loss.box_loss, loss.label_smoothing) == (objectness, "giou", 0.1)
    assert (loss.box_gain, loss.class_gain, loss.ignore_thresh) == (2.0, 0.5, 0.7)
