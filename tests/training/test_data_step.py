"""yolo3.training.data_step: classes, records, the validation split, anchors and masks."""
from __future__ import annotations

import numpy as np
import pytest

from yolo3.config.train_config import ConfigError
from yolo3.ops.anchors import write_anchors
from yolo3.training.data_step import prepare_data


def test_prepare_data_splits_by_seed_and_uses_the_variants_anchors(dataset, tmp_path, step_config):
    data = prepare_data(step_config(val_split=0.3))
    again = prepare_data(step_config(val_split=0.3))
    assert len(data.val_records) == 3 and len(data.records) == 7
    assert [r.path for r in data.val_records] == [r.path for r in again.val_records]
    other = prepare_data(step_config(val_split=0.3, seed=4))
    assert [r.path for r in other.val_records] != [r.path for r in data.val_records]
    np.testing.assert_array_equal(data.anchors, data.spec.default_anchors())
    assert data.masks == [[3, 4, 5], [0, 1, 2]] and data.class_names == ["circle", "square", "triangle"]
    info = data.info()
    assert info.variant == "tiny" and info.input_size == (64, 64) and info.num_classes == 3
    assert data.input_hw == data.input_size == (64, 64)  # the name before, read-only
    wide = prepare_data(step_config(input_size=(64, 96)))
    assert wide.info().input_size == (64, 96)
    bad = tmp_path / "five.txt"
    write_anchors(bad, np.ones((5, 2)))
    with pytest.raises(ConfigError, match="5 anchors do not split evenly over 2"):
        prepare_data(step_config(anchors=str(bad)))


def test_anchors_auto_are_kmeans_of_the_training_boxes_and_their_fit_is_reported(
        dataset, tmp_path, step_config, caplog):
    from yolo3.data.annotations import box_sizes
    from yolo3.ops.anchors import anchor_fit, kmeans_anchors
    caplog.set_level("INFO")
    data = prepare_data(step_config(anchors="auto", val_split=0.2))
    box_wh = box_sizes(data.records, (64, 64))
    want, _ = kmeans_anchors(box_wh, 6, seed=3)
    np.testing.assert_array_equal(data.anchors, want)
    assert data.masks == [[3, 4, 5], [0, 1, 2]]
    assert f"anchors fit the training boxes at 64x64: {anchor_fit(box_wh, want)}" in caplog.text
    # anchors far larger than any box of 64 px images: said so, with the way out
    caplog.clear()
    huge = tmp_path / "huge.txt"
    write_anchors(huge, np.full((6, 2), 600.0))
    prepare_data(step_config(anchors=str(huge), val_split=0.2))
    assert "best possible recall 0.000 < 0.98" in caplog.text and "anchors auto" in caplog.text
    with pytest.raises(ConfigError, match="anchors auto: k-means needs at least k=6 boxes") as e:
        prepare_data(step_config(anchors="auto", val_split=0.9))
    assert e.value.settings == ("anchors",)


def test_tile_auto_is_the_suggestion_for_the_training_boxes(step_config, caplog):
    from yolo3.data.annotations import box_sizes
    from yolo3.ops.tiles import Slicing, suggest_tile
    caplog.set_level("INFO")
    data = prepare_data(step_config(tile="auto", val_split=0.2))
    box_wh = box_sizes(data.records)
    image_hw = np.concatenate([np.tile(r.image_hw, (len(r.boxes), 1)) for r in data.records])
    tip = suggest_tile(box_wh, image_hw, (64, 64))
    assert data.tile == tip.size
    assert f"tile auto: {'whole images' if tip.size is None else f'{tip.size} px'} ({tip.reason})" \
        in caplog.text
    tiled = prepare_data(step_config(tile=48, tile_overlap=0.3, val_split=0.2))
    assert tiled.tile == 48
    # what every saved model of the run records: detect slices so by default
    assert tiled.info().slicing == Slicing(48, 0.3, "nms", whole_image=True, whole_from=6)
    untiled = prepare_data(step_config(val_split=0.2))
    assert untiled.tile is None and untiled.info().slicing is None


def test_class_weights_and_repeat_factors_come_from_the_training_boxes(step_config, tmp_path,
                                                                       caplog):
    from yolo3.ops.class_balance import class_counts, class_weights, repeat_factors
    caplog.set_level("INFO")
    plain = prepare_data(step_config(val_split=0.2))
    assert plain.class_weights is None
    data = prepare_data(step_config(val_split=0.2, class_weights="auto"))
    counts = class_counts([r.boxes[:, 4] for r in data.records], 3)
    np.testing.assert_allclose(data.class_weights, class_weights(counts, "effective"))
    assert "class weights (effective, from the training boxes, at most 10x apart)" in caplog.text
    weights = tmp_path / "weights.txt"
    weights.write_text("2\n1\n0.5\n")
    given = prepare_data(step_config(val_split=0.2, class_weights=str(weights)))
    np.testing.assert_allclose(given.class_weights, [2, 1, 0.5])
    # repeat-factor sampling lengthens the epoch by the factors of the images' classes
    repeated = prepare_data(step_config(val_split=0.2, repeat_threshold=1.0))
    factors = repeat_factors([r.boxes[:, 4] for r in plain.records], 3, 1.0)
    assert len(plain.records) < len(repeated.records) <= int(np.ceil(factors).sum())
    assert {r.path for r in repeated.records} == {r.path for r in plain.records}
    assert [r.path for r in repeated.val_records] == [r.path for r in plain.val_records]
