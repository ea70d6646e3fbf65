"""BatchMaker: a batch is a pure function of seed, epoch and index, the same after the maker
travels to another process (pickled), and making one imports neither Keras nor TensorFlow."""
from __future__ import annotations

import pickle
from dataclasses import replace
import subprocess
import sys

import numpy as np
import pytest
from PIL import Image

from yolo3.data.annotations import Record
from yolo3.data.batch_maker import BatchMaker
from yolo3.data.dataset_config import DatasetConfig, TargetEncoding
from yolo3.data.planner import AugmentConfig
from yolo3.data.feeds import flatten
from yolo3.ops.anchors import TINY_YOLO_ANCHORS


@pytest.fixture(scope="module")
def records(tmp_path_factory):
    folder = tmp_path_factory.mktemp("maker")
    rng = np.random.default_rng(1)
    out = []
    for i in range(6):
        path = folder / f"{i}.png"
        Image.fromarray(rng.integers(0, 256, (50 + 7 * i, 70, 3), dtype=np.uint8)).save(path)
        out.append(Record(str(path), np.array([[3, 4, 40, 30, i % 2]], np.float32)))
    return out


CONFIG = DatasetConfig((64, 64), 2, True, TargetEncoding(TINY_YOLO_ANCHORS, 2), seed=7,
                       augment=AugmentConfig(mosaic=0.5), image_cache="ram")


def test_a_batch_is_the_same_after_the_maker_travels(records):
    maker = BatchMaker(records, CONFIG)
    first = flatten(maker.batch(1, 2))[0]
    copy = pickle.loads(pickle.dumps(maker))
    assert copy.images._ram == {} and copy.images.kind == "ram"
    for a, b in zip(first, flatten(copy.batch(1, 2))[0]):
        np.testing.assert_array_equal(a, b)
    other_epoch = flatten(maker.batch(2, 2))[0]
    assert not np.array_equal(first[0], other_epoch[0])


def test_an_unseeded_maker_draws_its_own_seed_and_keeps_it(records):
    from dataclasses import replace
    maker = BatchMaker(records, replace(CONFIG, seed=None))
    again = pickle.loads(pickle.dumps(maker))
    assert again.seed == maker.seed
    np.testing.assert_array_equal(flatten(maker.batch(0, 0))[0][0],
                                  flatten(again.batch(0, 0))[0][0])


def test_making_batches_imports_no_keras_and_no_tensorflow():
    code = ("import sys, yolo3.data.batch_maker, yolo3.data.feeds; "
            "print(sorted(m for m in ('keras', 'tensorflow', 'jax', 'torch') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_the_shares_of_a_batch_made_by_several_processes_are_the_whole_batch(records):
    config = DatasetConfig((64, 64), 4, True, TargetEncoding(TINY_YOLO_ANCHORS, 2), seed=7,
                           augment=AugmentConfig(mosaic=0.5))
    whole = flatten(BatchMaker(records, config).batch(1, 0))[0]
    shares = [flatten(BatchMaker(records, replace(config, shard=(i, 2))).batch(1, 0))[0]
              for i in range(2)]
    assert all(len(s[0]) == 2 for s in shares)
    for k, array in enumerate(whole):  # images, targets, ... each split along the batch
        np.testing.assert_array_equal(np.concatenate([s[k] for s in shares]), array)


@pytest.mark.parametrize("augment", [AugmentConfig(mosaic=1.0), AugmentConfig(mosaic=0.0), None],
                         ids=["mosaic", "one image", "letterbox"])
def test_the_devices_windows_make_the_host_canvas_and_the_same_targets(records, augment):
    """``device_geometry``: each element's windows and their plans, the colour plans, the
    canvas's size (no bytes) and the targets; resampled (the float64 reading of
    tests/window_reference.py) they are ``device_colour``'s uint8 canvases to OpenCV's 1/32-pixel
    positions (the pixels are noise here: the worst case), with equal colour plans and targets."""
    from window_reference import read_windows
    config = replace(CONFIG, augment=augment, batch_size=3)
    host = BatchMaker(records, replace(config, device_colour=True)).batch(1, 1)
    device = BatchMaker(records, replace(config, device_geometry=True)).batch(1, 1)
    (canvas, colours, *targets), _ = host
    (size, pixels, plans, device_colours, *device_targets), _ = device
    assert pixels.dtype == np.uint8 and plans.shape == (3, 4, 11) and size.shape == (3, 64, 64, 0)
    np.testing.assert_array_equal(device_colours, colours)
    for a, b in zip(device_targets, targets):
        np.testing.assert_array_equal(a, b)
    got = np.round(read_windows(pixels, plans, (64, 64), colours[:, :2]))
    diff = np.abs(got - canvas)
    assert diff.mean() < 1.0 and diff.max() <= 8, (diff.mean(), diff.max())


@pytest.mark.parametrize("augment", [AugmentConfig(mosaic=1.0), None], ids=["mosaic", "letterbox"])
def test_images_kept_on_the_device_need_plans_only(records, augment):
    """``device_images``: nothing decoded or cut per batch, only each window's plan and where its
    image begins in the buffer's layout (each record's cached image one after another, a repeated
    one kept once); read from the whole cache they are ``device_geometry``'s windows (float32
    positions: a tie or two), with the same colour plans and targets."""
    from window_reference import read_windows
    config = replace(CONFIG, augment=augment, batch_size=3)
    maker = BatchMaker(records, replace(config, device_images=True))
    (size, plans, starts, colours, *targets), _ = maker.batch(1, 1)
    assert starts.dtype == np.int32 and (plans[..., 4] == 0).all()
    assert maker.images._ram == {}  # no image decoded to make the batch
    cache = np.concatenate([maker.decoded(i).reshape(-1, 3) for i in range(len(records))])
    ends = maker.device_starts + [maker.decoded(i).shape[0] * maker.decoded(i).shape[1]
                                  for i in range(len(records))]
    assert ends[-1] == len(cache) and (maker.device_starts[1:] == ends[:-1]).all()
    (_, pixels, window_plans, want_colours, *want_targets), _ = BatchMaker(
        records, replace(config, device_geometry=True)).batch(1, 1)
    np.testing.assert_array_equal(colours, want_colours)
    for a, b in zip(targets, want_targets):
        np.testing.assert_array_equal(a, b)
    plans = plans.astype(np.float64)
    plans[..., 4] = starts
    whole = read_windows(cache[None].repeat(3, 0), plans, (64, 64), colours[:, :2])
    cut = read_windows(pixels, window_plans, (64, 64), colours[:, :2])
    assert size.shape == (3, 64, 64, 0) and np.abs(whole - cut).max() < 0.05
    again = BatchMaker([*records, records[0]], replace(config, device_images=True))
    assert (again.device_starts == [*maker.device_starts, 0]).all()  # the repeat kept once
    with pytest.raises(ValueError, match="take no tiles"):
        from yolo3.data.tiling import TileSampling
        BatchMaker(records, replace(config, device_images=True, tiles=TileSampling(32)))
