"""yolo3.data.dataset_config: the earlier call's config, the defaults that follow ``training``,
the image sizes read from headers (EXIF-rotated displayed sizes), the batch count, the cache
rule."""
from __future__ import annotations

import numpy as np
import pytest
from PIL import Image

from yolo3.data.annotations import Record
from yolo3.data.dataset_config import (
    DatasetConfig,
    TargetEncoding,
    epoch_batches,
    make_planner,
    record_geometry,
    shard_range,
)
from yolo3.data.planner import AugmentConfig


def test_the_earlier_call_and_the_defaults_that_follow_training():
    config = DatasetConfig.from_arguments((64, 96), [[10, 13]], 3, 4, training=True,
                                          anchor_mask=[[0]], assign_iou=0.3, true_boxes=True,
                                          seed=2)
    assert config.targets == TargetEncoding([[10, 13]], 3, [[0]], 0.3, True)
    assert (config.input_size, config.batch_size, config.seed) == ((64, 96), 4, 2)
    assert config.input_shape == config.input_size  # the 0.5 name, read-only
    assert config.shuffles and config.drops_remainder
    assert DatasetConfig.from_arguments((64, 64), None, 3, 2, training=False,
                                        targets=False).targets is None
    validation = DatasetConfig((64, 64), 4, False)
    assert not validation.shuffles and not validation.drops_remainder
    assert DatasetConfig((64, 64), 4, True, shuffle=False, drop_remainder=False).shuffles is False


@pytest.mark.parametrize("count, batch, drop, want", [(10, 4, True, 2), (10, 4, False, 3),
                                                      (8, 4, False, 2), (3, 4, True, 0)])
def test_batches_per_pass(count, batch, drop, want):
    assert epoch_batches(count, DatasetConfig((32, 32), batch, True, drop_remainder=drop)) == want


def test_sizes_come_from_the_records_or_their_headers(tmp_path):
    plain = tmp_path / "plain.png"
    Image.new("RGB", (50, 30)).save(plain)
    rotated = tmp_path / "rotated.jpg"
    exif = Image.Exif()
    exif[0x0112] = 6  # displayed turned 90 degrees: 30 wide, 50 high
    Image.new("RGB", (50, 30)).save(rotated, exif=exif.tobytes())
    records = [Record(str(plain), np.zeros((0, 5))), Record(str(rotated), np.zeros((0, 5))),
               Record(str(tmp_path / "not read.png"), np.zeros((0, 5)), (7, 9), 1)]
    hws, orientations = record_geometry(records)
    assert hws == [(30, 50), (50, 30), (7, 9)] and orientations == [1, 6, 1]
    with pytest.raises(ValueError, match="at least one record"):
        record_geometry([])


def test_the_cache_is_only_for_batches_in_the_records_order(tmp_path):
    records = [Record("x.png", np.zeros((0, 5)), (10, 10), 1)]
    make_planner(records, DatasetConfig((32, 32), 1, False, cache=True), 0, [(10, 10)])
    for config in (DatasetConfig((32, 32), 1, True, cache=True),
                   DatasetConfig((32, 32), 1, False, cache=True, shuffle=True),
                   DatasetConfig((32, 32), 1, True, cache=True, augment=AugmentConfig(),
                                 shuffle=False)):
        with pytest.raises(ValueError, match="cache keeps decoded images"):
            make_planner(records, config, 0, [(10, 10)])


def test_the_longest_side_a_cached_image_needs():
    from yolo3.data.dataset_config import cache_longest_side
    from yolo3.data.planner import AugmentConfig, MultiScale, TileSampling
    base = DatasetConfig((416, 320), 8, True)
    assert cache_longest_side(base) == 832  # 416 x full's largest scale, 2
    assert cache_longest_side(DatasetConfig((416, 320), 8, False)) == 416  # letterbox
    assert cache_longest_side(DatasetConfig((416, 416), 8, True, augment=None)) == 416
    light = DatasetConfig((416, 416), 8, True, augment=AugmentConfig.preset("light"))
    assert cache_longest_side(light) == 541  # 416 x 1.3, rounded up
    scaled = DatasetConfig((416, 416), 8, True, multi_scale=MultiScale(((320, 320), (608, 608))))
    assert cache_longest_side(scaled) == 1216
    assert cache_longest_side(DatasetConfig((416, 416), 8, True, tiles=TileSampling(256))) is None


def test_each_process_takes_its_contiguous_share_of_a_batch():
    assert [list(shard_range(8, (i, 2))) for i in range(2)] == [[0, 1, 2, 3], [4, 5, 6, 7]]
    assert list(shard_range(6, (0, 1))) == list(range(6))
    with pytest.raises(ValueError, match="6 cannot be split evenly over 4"):
        shard_range(6, (1, 4))
    with pytest.raises(ValueError, match="0 <= index < count"):
        shard_range(8, (2, 2))


def test_training_inputs_encode_the_targets_a_training_model_takes():
    from yolo3.data.dataset_config import TargetEncoding, training_inputs
    from yolo3.ops.anchors import TINY_YOLO_ANCHORS
    from yolo3.ops.targets import preprocess_true_boxes
    images = np.zeros((2, 64, 64, 3), np.float32)
    colours = np.ones((2, 7), np.float32)
    boxes = np.zeros((2, 4, 5), np.float32)
    boxes[0, 0] = [4, 6, 40, 30, 1]
    boxes[1, :2] = [[10, 10, 20, 50, 0], [30, 2, 60, 60, 2]]
    # no anchors (an anchor-free head's model assigns the boxes itself): pixels and boxes
    inputs, dummy = training_inputs(TargetEncoding(None, 3), (images, colours), boxes)
    assert len(inputs) == 3 and inputs[1] is colours and inputs[2] is boxes
    np.testing.assert_array_equal(dummy, np.zeros(2, np.float32))
    # anchors: the y_true maps of ops.targets with the masks and assign_iou, then the boxes
    anchors = np.asarray(TINY_YOLO_ANCHORS, np.float32).reshape(-1, 2)
    masks = [[3, 4, 5], [0, 1, 2]]
    encoding = TargetEncoding(anchors, 3, masks, assign_iou=0.35, true_boxes=True)
    inputs, _ = training_inputs(encoding, (images,), boxes)
    expected = preprocess_true_boxes(boxes, (64, 64), anchors, 3, masks, 0.35)
    assert len(inputs) == 1 + len(expected) + 1 and inputs[-1] is boxes
    for got, want in zip(inputs[1:-1], expected):
        np.testing.assert_array_equal(got, want)
    assert sum(float(y[..., 4].sum()) for y in inputs[1:-1]) >= 3  # every box is a positive
    inputs, _ = training_inputs(TargetEncoding(anchors, 3, masks), (images,), boxes)
    assert len(inputs) == 1 + len(expected)  # without true_boxes: no boxes input
