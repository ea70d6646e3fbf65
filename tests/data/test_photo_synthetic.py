"""The realistic synthetic set (``yolo3 synth --style photo``) and the YOLO-layout writer the peer
benchmark trains from."""
from __future__ import annotations

import importlib.util
import os
from pathlib import Path

import numpy as np
import pytest
import yaml
from locations import shared
from PIL import Image

from yolo3.cli import main as yolo3_main
from yolo3.core.errors import SettingError
from yolo3.data import photo_synthetic
from yolo3.data.annotations import load_annotations
from yolo3.data.photo_synthetic import (
    PHOTO_CLASSES,
    PHOTO_SIZES,
    load_photos,
    make_photo_dataset,
    render_photo_image,
)
from yolo3.data.yolo_layout import label_rows, write_yolo_layout



@pytest.fixture(scope="module")
def photos():
    return load_photos(str(shared("images")))


@pytest.fixture(scope="module")
def rendered(photos):
    rng = np.random.default_rng(7)
    return [render_photo_image(rng, photos, PHOTO_SIZES[i % 3]) for i in range(150)]


def test_images_have_the_drawn_size_and_boxes_inside(rendered):
    for i, (image, boxes) in enumerate(rendered):
        h, w = PHOTO_SIZES[i % 3]
        assert image.shape == (h, w, 3) and image.dtype == np.uint8
        assert boxes.shape[1] == 5 and boxes.dtype == np.float32
        assert np.all(boxes[:, 0] >= 0) and np.all(boxes[:, 1] >= 0)
        assert np.all(boxes[:, 2] <= w) and np.all(boxes[:, 3] <= h)
        assert np.all(boxes[:, 2] > boxes[:, 0]) and np.all(boxes[:, 3] > boxes[:, 1])
        assert set(boxes[:, 4].astype(int)) <= set(range(len(PHOTO_CLASSES)))
        assert len(boxes) <= 6


def test_the_set_has_what_real_data_has(rendered):
    """Negatives, small, large and thin objects, and overlapping (occluding) objects."""
    counts = [len(b) for _, b in rendered]
    negatives = sum(c == 0 for c in counts) / len(counts)
    assert 0.02 <= negatives <= 0.2, negatives
    boxes = np.concatenate([b for _, b in rendered if len(b)])
    shorter = np.array([min(PHOTO_SIZES[i % 3]) for i, (_, b) in enumerate(rendered)
                        for _ in range(len(b))])
    wh = boxes[:, 2:4] - boxes[:, 0:2]
    long_side = wh.max(axis=1) / shorter
    assert (long_side < 0.1).mean() > 0.05  # small objects
    assert (long_side > 0.4).mean() > 0.05  # large ones
    assert (wh.max(axis=1) / wh.min(axis=1) >= 3).mean() > 0.03  # thin bars
    overlapping = 0
    for _, b in rendered:
        for i in range(len(b)):
            for j in range(i + 1, len(b)):
                ix = min(b[i, 2], b[j, 2]) - max(b[i, 0], b[j, 0])
                iy = min(b[i, 3], b[j, 3]) - max(b[i, 1], b[j, 1])
                overlapping += ix > 0 and iy > 0
    assert overlapping > 20


def test_objects_keep_their_class_whatever_their_colour(rendered):
    """The class is the shape: mean object colours of different classes are alike."""
    colours = {c: [] for c in range(len(PHOTO_CLASSES))}
    for image, boxes in rendered:
        for x1, y1, x2, y2, c in boxes.astype(int):
            colours[c].append(image[y1:y2, x1:x2].reshape(-1, 3).mean(axis=0))
    means = np.array([np.mean(v, axis=0) for v in colours.values()])
    assert np.ptp(means, axis=0).max() < 40, means


def test_the_dataset_is_reproducible_from_its_seed(tmp_path):
    a = make_photo_dataset(str(tmp_path / "a"), 12, str(shared("images")), seed=3, val_fraction=0.25)
    b = make_photo_dataset(str(tmp_path / "b"), 12, str(shared("images")), seed=3, val_fraction=0.25)
    c = make_photo_dataset(str(tmp_path / "c"), 12, str(shared("images")), seed=4)
    text = [Path(p[0]).read_text() for p in (a, b, c)]
    assert text[0] == text[1] != text[2]
    for name in sorted(os.listdir(tmp_path / "a" / "images")):
        assert (tmp_path / "a" / "images" / name).read_bytes() == \
            (tmp_path / "b" / "images" / name).read_bytes()
    assert len((tmp_path / "a" / "val.txt").read_text().splitlines()) == 3
    records = load_annotations(a[0], list(PHOTO_CLASSES))
    assert len(records) == 12
    for r in records:
        assert r.path.endswith(".jpg") and r.image_hw in PHOTO_SIZES


def test_distractors_can_be_left_out_with_the_same_objects(photos):
    """One seed, with and without the distractor blobs: the same boxes in every image, and the
    pixels differ only in the images that drew a distractor, and there only where it was painted."""
    rng_a, rng_b = np.random.default_rng(11), np.random.default_rng(11)
    differing = 0
    for _ in range(24):
        image_a, boxes_a = render_photo_image(rng_a, photos, (96, 128))
        image_b, boxes_b = render_photo_image(rng_b, photos, (96, 128), distractors=False)
        np.testing.assert_array_equal(boxes_a, boxes_b)
        changed = (image_a != image_b).any(axis=-1)
        differing += bool(changed.any())
        assert changed.mean() < 0.25  # one or two blobs, never the picture
    assert 4 <= differing <= 16, differing  # a third of the images draw a blob


def test_full_boxes_hold_the_visible_ones_and_only_occluded_objects_differ(photos):
    """One seed, visible and full boxes: the same images; each full box contains its visible
    box, and they differ only for objects that a later object partly hides."""
    rng_a, rng_b = np.random.default_rng(5), np.random.default_rng(5)
    grown = 0
    for _ in range(30):
        image_a, visible = render_photo_image(rng_a, photos, (96, 128))
        image_b, full = render_photo_image(rng_b, photos, (96, 128), boxes="full")
        np.testing.assert_array_equal(image_a, image_b)
        np.testing.assert_array_equal(visible[:, 4], full[:, 4])
        assert np.all(full[:, :2] <= visible[:, :2]) and np.all(full[:, 2:4] >= visible[:, 2:4])
        for k in range(len(full)):
            if not np.array_equal(full[k], visible[k]):
                grown += 1
                box, later = full[k], full[k + 1:]  # only a later object can hide this one
                overlap_x = np.minimum(later[:, 2], box[2]) > np.maximum(later[:, 0], box[0])
                overlap_y = np.minimum(later[:, 3], box[3]) > np.maximum(later[:, 1], box[1])
                assert np.any(overlap_x & overlap_y)
    assert grown >= 3, grown


def test_no_occlusion_and_own_colours_change_only_what_they_say(photos):
    """``min_visible=1``: no two objects share a pixel (their full boxes are their visible ones);
    ``recolour=False``: the same boxes as recoloured, the object pixels in the photographs' own
    colours, the background untouched; backgrounds of their own come from those photographs."""
    rng = np.random.default_rng(2)
    for _ in range(60):  # the default hides part of an object in about 1 image in 10
        state = rng.bit_generator.state
        _, visible = render_photo_image(rng, photos, (96, 128), min_visible=1.0)
        rng.bit_generator.state = state
        _, full = render_photo_image(rng, photos, (96, 128), min_visible=1.0, boxes="full")
        np.testing.assert_array_equal(visible, full)
    rng_a, rng_b = np.random.default_rng(3), np.random.default_rng(3)
    changed_objects = 0
    for _ in range(20):
        image_a, boxes_a = render_photo_image(rng_a, photos, (96, 128), distractors=False)
        image_b, boxes_b = render_photo_image(rng_b, photos, (96, 128), distractors=False,
                                              recolour=False)
        np.testing.assert_array_equal(boxes_a, boxes_b)
        inside = np.zeros(image_a.shape[:2], bool)
        for x1, y1, x2, y2, _ in boxes_a.astype(int):
            inside[y1:y2, x1:x2] = True
        differs = (image_a.astype(int) - image_b.astype(int) != 0).any(axis=-1)
        assert not differs[~inside].any()  # the background is the same picture
        changed_objects += int(differs[inside].any())
    assert changed_objects >= 10
    flat = [np.full((64, 64, 3), 200, np.uint8), np.full((64, 64, 3), 200, np.uint8)]
    image, _ = render_photo_image(np.random.default_rng(0), photos, (96, 128), backgrounds=flat,
                                  negative_fraction=1.0, distractors=False)
    assert np.abs(image.astype(float).mean(axis=(0, 1)) - 200).max() < 45  # a jittered flat grey
    assert image.astype(float).std(axis=(0, 1)).max() < 8  # flat but for the noise: no photograph


def _detail(image: np.ndarray) -> float:
    """Mean absolute difference of neighbouring pixels: how busy a picture is."""
    grey = image.astype(float).mean(axis=-1)
    return float(np.abs(np.diff(grey, axis=0)).mean() + np.abs(np.diff(grey, axis=1)).mean())


def test_enlarged_backgrounds_keep_the_objects_and_are_smoother(photos):
    """``background_zoom``: the same random stream, so the same boxes; a background that spans a
    small share of its photograph is an enlarged detail, smoother than the default crop."""
    rng_a, rng_b = np.random.default_rng(4), np.random.default_rng(4)
    busy, smooth = [], []
    for _ in range(12):
        image_a, boxes_a = render_photo_image(rng_a, photos, (120, 160), negative_fraction=1.0,
                                              distractors=False)
        image_b, boxes_b = render_photo_image(rng_b, photos, (120, 160), negative_fraction=1.0,
                                              distractors=False, background_zoom=(0.1, 0.25))
        np.testing.assert_array_equal(boxes_a, boxes_b)
        busy.append(_detail(image_a))
        smooth.append(_detail(image_b))
    assert np.median(smooth) < 0.7 * np.median(busy), (smooth, busy)
    state = np.random.default_rng(9)
    twin = np.random.default_rng(9)
    np.testing.assert_array_equal(render_photo_image(state, photos, (96, 128))[1],
                                  render_photo_image(twin, photos, (96, 128),
                                                     background_zoom=(0.2, 0.2))[1])


def test_bad_box_extent_occlusion_or_folder_is_a_setting_error(tmp_path):
    with pytest.raises(SettingError, match="boxes must be one of visible, full") as e:
        make_photo_dataset(str(tmp_path / "a"), 2, str(shared("images")), boxes="amodal")
    assert e.value.settings == ("boxes",)
    with pytest.raises(SettingError, match=r"min_visible must be in \(0, 1\], got 0") as e:
        make_photo_dataset(str(tmp_path / "b"), 2, str(shared("images")), min_visible=0)
    with pytest.raises(SettingError, match="background_photos: .*not a folder") as e:
        make_photo_dataset(str(tmp_path / "c"), 2, str(shared("images")),
                           background_photos=str(tmp_path / "missing"))
    assert e.value.settings == ("background_photos",)
    with pytest.raises(SettingError, match="background_zoom must be two shares .* 0.5 0.2") as e:
        make_photo_dataset(str(tmp_path / "d"), 2, str(shared("images")), background_zoom=(0.5, 0.2))
    assert e.value.settings == ("background_zoom",)
    assert not any((tmp_path / name).exists() for name in "abcd")  # refused before writing
    with pytest.raises(ValueError, match="boxes must be one of visible, full, got 'amodal'"):
        render_photo_image(np.random.default_rng(0), [np.zeros((96, 96, 3), np.uint8)] * 2,
                           (64, 64), boxes="amodal")


@pytest.mark.parametrize("distribution, median", [
    ("log", float(np.sqrt(0.06 * 0.55))),  # log-uniform: the geometric mean of the ends
    ("uniform", (0.06 + 0.55) / 2)])
def test_object_sizes_follow_the_chosen_distribution(distribution, median):
    rng = np.random.default_rng(0)
    sides = np.array([max(photo_synthetic._object_size(rng, "circle", 1000, 0.06, 0.55,
                                                       distribution)) for _ in range(4000)])
    assert sides.min() >= 60 and sides.max() <= 550
    assert np.median(sides) / 1000 == pytest.approx(median, rel=0.04)
    low, high = np.histogram(sides, bins=2, range=(60, 550))[0]
    if distribution == "uniform":  # as many in each half
        assert abs(low - high) < 0.06 * len(sides)
    else:  # log-uniform: the smaller half holds log(305/60) / log(550/60) = 73% of them
        assert low / len(sides) == pytest.approx(np.log(305 / 60) / np.log(550 / 60), abs=0.03)


def test_a_uniform_set_has_larger_objects_and_unknown_names_are_refused(tmp_path):
    sides = {}
    for distribution in ("log", "uniform"):
        ann, _ = make_photo_dataset(str(tmp_path / distribution), 40, str(shared("images")), seed=3,
                                    size_distribution=distribution)
        boxes = np.concatenate([r.boxes for r in load_annotations(ann, list(PHOTO_CLASSES))])
        sides[distribution] = np.median((boxes[:, 2:4] - boxes[:, 0:2]).max(axis=1))
    assert sides["uniform"] > 1.3 * sides["log"], sides
    with pytest.raises(ValueError, match="unknown size distribution 'normal'"):
        make_photo_dataset(str(tmp_path / "n"), 2, str(shared("images")), size_distribution="normal")
    with pytest.raises(ValueError, match="unknown size distribution 'normal'"):  # drawn directly
        photo_synthetic._object_size(np.random.default_rng(0), "circle", 100, 0.1, 0.5, "normal")
    assert not (tmp_path / "n").exists()


def test_photographs_are_found_or_named(tmp_path, monkeypatch):
    with pytest.raises(FileNotFoundError, match="fewer than two photographs"):
        load_photos(str(tmp_path))
    with pytest.raises(FileNotFoundError, match="not a folder"):
        load_photos(str(tmp_path / "missing"))
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: None)
    assert photo_synthetic.bundled_photo_dir() is None
    with pytest.raises(FileNotFoundError, match=r"pip install 'yolo3\[bench\]'"):
        load_photos(None)


def test_synth_command_photo_style(tmp_path, capsys):
    out = tmp_path / "photo"
    assert yolo3_main(["synth", "--out", str(out), "--style", "photo", "--num-images", "6",
                       "--photos", str(shared("images")), "--size", "160", "200"]) == 0
    for name in sorted(os.listdir(out / "images")):
        with Image.open(out / "images" / name) as im:
            assert (im.height, im.width) == (160, 200) and im.format == "JPEG"
    assert (out / "classes.txt").read_text().split() == list(PHOTO_CLASSES)
    assert yolo3_main(["synth", "--out", str(tmp_path / "x"), "--num-images", "2",
                       "--photos", str(shared("images"))]) == 2
    assert "--photos needs --style photo" in capsys.readouterr().err
    assert yolo3_main(["synth", "--out", str(tmp_path / "w"), "--num-images", "2",
                       "--no-distractors", "--boxes", "full", "--no-recolour"]) == 2
    assert "--no-distractors needs --style photo" in capsys.readouterr().err
    assert yolo3_main(["synth", "--out", str(tmp_path / "z"), "--num-images", "2",
                       "--size-distribution", "uniform", "--min-visible", "1",
                       "--background-photos", str(shared("images")), "--background-zoom", "0.1", "0.2"]) == 2
    assert ("--size-distribution needs --style photo"
            in capsys.readouterr().err)
    assert not (tmp_path / "z").exists()
    assert yolo3_main(["synth", "--out", str(tmp_path / "y"), "--style", "photo",
                       "--num-images", "2", "--photos", str(tmp_path / "none")]) == 2
    assert "--photos: " in capsys.readouterr().err and not (tmp_path / "y" / "images").exists()
    assert yolo3_main(["synth", "--out", str(tmp_path / "v"), "--style", "photo",
                       "--num-images", "2", "--photos", str(shared("images")), "--background-photos",
                       str(tmp_path / "none")]) == 2
    assert "--background-photos: " in capsys.readouterr().err
    for bad in ("1.5", "0"):  # argparse: before anything else
        assert yolo3_main(["synth", "--out", str(tmp_path / "u"), "--style", "photo",
                           "--num-images", "2", "--photos", str(shared("images")), "--min-visible",
                           bad]) == 2
        assert f"argument --min-visible: expected a number above 0, up to 1, got '{bad}'" in \
            capsys.readouterr().err
    assert yolo3_main(["synth", "--out", str(tmp_path / "t"), "--style", "photo",
                       "--num-images", "2", "--photos", str(shared("images")), "--background-zoom", "0",
                       "0.5"]) == 2
    assert "argument --background-zoom: expected a number above 0" in capsys.readouterr().err
    assert yolo3_main(["synth", "--out", str(tmp_path / "t"), "--style", "photo",
                       "--num-images", "2", "--photos", str(shared("images")), "--background-zoom", "0.5",
                       "0.25"]) == 2
    assert "--background-zoom 0.5 0.25: the first value must be at most the second" in \
        capsys.readouterr().err
    assert not (tmp_path / "t" / "images").exists()
    full = tmp_path / "full"
    assert yolo3_main(["synth", "--out", str(full), "--style", "photo", "--num-images", "3",
                       "--photos", str(shared("images")), "--background-photos", str(shared("images")),
                       "--boxes", "full", "--no-recolour", "--min-visible", "0.5"]) == 0
    assert len(load_annotations(str(full / "annotations.txt"), list(PHOTO_CLASSES))) == 3


def test_yolo_layout_round_trip(tmp_path):
    ann, classes = make_photo_dataset(str(tmp_path / "d"), 10, str(shared("images")), seed=5,
                                      val_fraction=0.3)
    train = load_annotations(str(tmp_path / "d" / "train.txt"), list(PHOTO_CLASSES))
    val = load_annotations(str(tmp_path / "d" / "val.txt"), list(PHOTO_CLASSES))
    yaml_path = write_yolo_layout(str(tmp_path / "yolo"), {"train": train, "val": val},
                                  list(PHOTO_CLASSES))
    text = Path(yaml_path).read_text()
    assert "train: images/train" in text and "val: images/val" in text
    assert yaml.safe_load(text)["names"] == dict(enumerate(PHOTO_CLASSES))
    for split, records in (("train", train), ("val", val)):
        images = sorted(os.listdir(tmp_path / "yolo" / "images" / split))
        assert len(images) == len(records)
        for name, record in zip(images, records):
            label = tmp_path / "yolo" / "labels" / split / (os.path.splitext(name)[0] + ".txt")
            rows = np.loadtxt(label, ndmin=2).reshape(-1, 5)
            h, w = record.image_hw
            x1 = (rows[:, 1] - rows[:, 3] / 2) * w
            y1 = (rows[:, 2] - rows[:, 4] / 2) * h
            x2 = (rows[:, 1] + rows[:, 3] / 2) * w
            y2 = (rows[:, 2] + rows[:, 4] / 2) * h
            back = np.stack([x1, y1, x2, y2, rows[:, 0]], axis=1)
            np.testing.assert_allclose(back, record.boxes, atol=1e-5 * max(h, w) + 1e-4)
            assert os.path.realpath(tmp_path / "yolo" / "images" / split / name) == \
                os.path.realpath(record.path)


def test_label_rows_of_a_negative_and_a_box():
    assert label_rows(np.zeros((0, 5)), (100, 200)) == ""
    assert label_rows(np.array([[0, 0, 200, 100, 2]]), (100, 200)) == \
        "2 0.500000 0.500000 1.000000 1.000000\n"


def test_class_shares_make_a_rare_class_and_bad_shares_are_refused(tmp_path, capsys):
    from cli_harness import assert_refused, run_cli
    code, err = run_cli(["synth", "--style", "photo", "--photos", shared("images"), "--out", tmp_path / "r",
                         "--num-images", 60, "--seed", 4, "--class-shares", 1, 1, 1, 0.15,
                         "--quiet"], capsys)
    assert code == 0, err
    names = (tmp_path / "r" / "classes.txt").read_text().split()
    boxes = np.concatenate([r.boxes for r in load_annotations(tmp_path / "r" / "annotations.txt",
                                                              names)])
    share = np.mean(boxes[:, 4] == 3)
    assert 0.0 < share < 0.12 and len(boxes) > 100  # about 5%: 0.15 / 3.15
    for bad, named in (([1, 1], "4 positive weights needed"), ([1, 1, 1, 0], "--class-shares"),
                       ([1e308, 1e308, 1, 1], "--class-shares")):
        code, err = run_cli(["synth", "--style", "photo", "--photos", shared("images"), "--out",
                             tmp_path / "bad", "--num-images", 2, "--class-shares", *bad], capsys)
        assert_refused(code, err, named)
        assert not (tmp_path / "bad").exists()
    code, err = run_cli(["synth", "--out", tmp_path / "solid", "--num-images", 2,
                         "--class-shares", 1, 2, 3], capsys)
    assert_refused(code, err, "--class-shares", "needs --style photo")
