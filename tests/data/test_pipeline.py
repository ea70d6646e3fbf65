"""tf.data pipeline: boxes follow the pixels, determinism, decoding of unusual images, letterbox."""
from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf
from PIL import Image, ImageOps

from yolo3.data.annotations import Record
from yolo3.data.augment import AugmentConfig, distort_hsv
from yolo3.data.images import load_image, probe_image
from yolo3.data.pipeline import MultiScale, decode_image, make_dataset
from yolo3.ops.anchors import TINY_YOLO_ANCHORS
from yolo3.ops.letterbox import geometry_np as letterbox_geometry_np
from yolo3.ops.letterbox import letterbox_np as letterbox_image

NO_COLOUR = AugmentConfig(hue=0.0, saturation=1.0, value=1.0)


def _rect_image(path, hw=(120, 160), rect=(40, 30, 100, 80)):
    """Gray image with a solid red rectangle covering columns x1..x2-1, rows y1..y2-1."""
    img = np.full(hw + (3,), 100, np.uint8)
    x1, y1, x2, y2 = rect
    img[y1:y2, x1:x2] = (255, 0, 0)
    Image.fromarray(img).save(path)
    return Record(str(path), np.array([[*rect, 1]], np.float32))


def _red_extent(image: np.ndarray):
    """Pixel-edge extent ``(x1, y1, x2, y2)`` of the pixels more than half red, or None."""
    mask = (image[..., 0] - image[..., 1]) > 0.5
    if not mask.any():
        return None
    ys, xs = np.nonzero(mask)
    return np.array([xs.min(), ys.min(), xs.max() + 1, ys.max() + 1], np.float64)


def _decode_y_true(y_true, input_hw):
    """Boxes ``(x1, y1, x2, y2, class)`` in input pixels from keras-yolo3 y_true arrays (one image)."""
    h, w = input_hw
    out = []
    for y in y_true:
        for cell in y.reshape(-1, y.shape[-1]):
            if cell[4] == 1:
                cx, cy, bw, bh = cell[0] * w, cell[1] * h, cell[2] * w, cell[3] * h
                out.append([cx - bw / 2, cy - bh / 2, cx + bw / 2, cy + bh / 2, np.argmax(cell[5:])])
    return np.array(out).reshape(-1, 5)


def test_augmented_box_covers_the_same_pixels(tmp_path):
    recs = [_rect_image(tmp_path / f"r{i}.png") for i in range(8)]
    hw = (96, 128)
    seen = 0
    ds = make_dataset(recs, hw, TINY_YOLO_ANCHORS, 2, 4, training=True, seed=0, augment=NO_COLOUR)
    for (images, *y_true), dummy in ds:
        assert dummy.shape == (4,) and images.shape == (4,) + hw + (3,)
        for k in range(4):
            img = images[k].numpy()
            extent = _red_extent(img)
            boxes = _decode_y_true([y[k].numpy() for y in y_true], hw)
            if extent is None or min(extent[2] - extent[0], extent[3] - extent[1]) < 3:
                continue  # the rectangle was cropped away (or to a sliver)
            assert len(boxes) == 1 and boxes[0, 4] == 1
            np.testing.assert_allclose(boxes[0, :4], extent, atol=1.01)
            seen += 1
    assert seen >= 6


def test_boxes_variant_matches_pixels_with_colour_jitter(tmp_path):
    # hue jitter moves red only slightly (<= 0.1 of the circle): red stays "more red than green"
    recs = [_rect_image(tmp_path / f"r{i}.png", hw=(80, 64), rect=(10, 20, 50, 70)) for i in range(6)]
    ds = make_dataset(recs, (64, 64), TINY_YOLO_ANCHORS, 2, 6, training=True, seed=5, targets=False,
                      augment=AugmentConfig(hue=0.02, saturation=1.0, value=1.0), max_boxes=7)
    images, boxes = next(iter(ds))
    assert boxes.shape == (6, 7, 5)
    for img, b in zip(images.numpy(), boxes.numpy()):
        extent = _red_extent(img)
        if extent is None or min(extent[2] - extent[0], extent[3] - extent[1]) < 3:
            continue
        assert np.count_nonzero(b.any(axis=1)) == 1
        np.testing.assert_allclose(b[0, :4], extent, atol=1.01)
        assert not b[1:].any()


def _synthetic_records(tmp_path, n=8):
    rng = np.random.default_rng(0)
    recs = []
    for i in range(n):
        h, w = int(rng.integers(60, 120)), int(rng.integers(60, 120))
        img = rng.integers(0, 255, size=(h, w, 3), dtype=np.uint8)
        path = tmp_path / f"s{i}.png"
        Image.fromarray(img).save(path)
        recs.append(Record(str(path), np.array([[5, 6, w - 10, h - 3, i % 3]], np.float32)))
    return recs


def _first_batches(ds, n):
    it = iter(ds)
    return [tf.nest.map_structure(lambda t: t.numpy(), next(it)) for _ in range(n)]


def test_same_seed_same_batches_other_seed_differs(tmp_path):
    recs = _synthetic_records(tmp_path)
    make = lambda seed: make_dataset(recs, (64, 64), TINY_YOLO_ANCHORS, 3, 4, training=True, seed=seed)
    a, b, c = _first_batches(make(3), 2), _first_batches(make(3), 2), _first_batches(make(4), 2)
    for x, y in zip(tf.nest.flatten(a), tf.nest.flatten(b)):
        np.testing.assert_array_equal(x, y)
    assert not np.array_equal(a[0][0][0], c[0][0][0])
    # a second pass over the same dataset (next epoch) is shuffled and augmented differently
    ds = make(3)
    e1 = [x[0][0] for x in ds]
    e2 = [x[0][0] for x in ds]
    assert len(e1) == 2 and not np.array_equal(e1[0].numpy(), e2[0].numpy())


def _exif_displayed(raw: np.ndarray, orientation: int) -> np.ndarray:
    """The displayed image for a stored image and EXIF orientation, from the EXIF specification."""
    return {1: raw, 2: raw[:, ::-1], 3: raw[::-1, ::-1], 4: raw[::-1],
            5: raw.transpose(1, 0, 2), 6: np.rot90(raw, -1), 7: raw[::-1, ::-1].transpose(1, 0, 2),
            8: np.rot90(raw, 1)}[orientation]


@pytest.mark.parametrize("orientation", range(1, 9))
def test_exif_rotated_jpeg_loads_upright(tmp_path, orientation):
    rng = np.random.default_rng(orientation)
    blocks = rng.integers(0, 255, size=(3, 5, 3)).astype(np.uint8)
    raw = np.kron(blocks, np.ones((8, 8, 1), np.uint8))  # 24 x 40, JPEG-friendly 8x8 blocks
    path = tmp_path / "rot.jpg"
    exif = Image.Exif()
    exif[0x0112] = orientation
    Image.fromarray(raw).save(path, quality=100, subsampling=0, exif=exif.tobytes())
    want = _exif_displayed(raw, orientation).astype(np.float64)
    got = load_image(path)
    assert got.shape == want.shape and got.dtype == np.uint8
    assert np.abs(got - want).mean() < 3
    with Image.open(path) as im:  # a second reference: PIL's own transpose
        np.testing.assert_array_equal(got, np.asarray(ImageOps.exif_transpose(im).convert("RGB")))
    hw, o = probe_image(path)
    assert hw == want.shape[:2] and o == orientation
    tf_img = decode_image(tf.constant(str(path)), tf.constant(o)).numpy() * 255
    assert tf_img.shape == want.shape and np.abs(tf_img - want).mean() < 3


def test_grayscale_rgba_palette_load_as_rgb(tmp_path):
    rng = np.random.default_rng(1)
    gray = rng.integers(0, 255, size=(20, 30), dtype=np.uint8)
    rgba = rng.integers(0, 255, size=(20, 30, 4), dtype=np.uint8)
    Image.fromarray(gray, "L").save(tmp_path / "g.png")
    Image.fromarray(rgba, "RGBA").save(tmp_path / "a.png")
    Image.fromarray(rgba[..., :3]).convert("P", palette=Image.ADAPTIVE).save(tmp_path / "p.png")
    pal = np.asarray(Image.open(tmp_path / "p.png").convert("RGB"))
    cases = {"g.png": np.repeat(gray[..., None], 3, -1), "a.png": rgba[..., :3], "p.png": pal}
    for name, want in cases.items():
        np.testing.assert_array_equal(load_image(tmp_path / name), want)
        got = decode_image(tf.constant(str(tmp_path / name)), tf.constant(1)).numpy()
        np.testing.assert_array_equal(np.round(got * 255).astype(np.uint8), want)
    g = np.asarray(Image.open(tmp_path / "g.png").convert("RGB"))  # PIL's reference conversion
    np.testing.assert_array_equal(load_image(tmp_path / "g.png"), g)


def test_validation_letterbox_maps_boxes_and_pixels(tmp_path):
    rec = _rect_image(tmp_path / "v.png", hw=(100, 60), rect=(10, 20, 50, 90))
    hw = (64, 96)
    ds = make_dataset([rec], hw, TINY_YOLO_ANCHORS, 2, 1, training=False, targets=False)
    images, boxes = next(iter(ds))
    new_hw, off, scale = letterbox_geometry_np((100, 60), hw)
    want = np.array([10 * scale[1] + off[1], 20 * scale[0] + off[0], 50 * scale[1] + off[1],
                     90 * scale[0] + off[0], 1])
    np.testing.assert_allclose(boxes[0, 0], want, atol=1e-4)
    assert not boxes[0, 1:].numpy().any()
    img = images[0].numpy()
    np.testing.assert_allclose(_red_extent(img), want[:4], atol=1.01)
    # padding is gray 128/255 outside the placed image, and the helper gives the same pixels
    np.testing.assert_allclose(img[:, : int(off[1])], 128 / 255, atol=1e-6)
    np.testing.assert_allclose(letterbox_image(load_image(rec.path), hw), img, atol=1e-6)
    # y_true version: dummy target and the right shapes for tiny YOLOv3 (strides 32, 16)
    (im2, y32, y16), dummy = next(iter(make_dataset([rec], hw, TINY_YOLO_ANCHORS, 2, 1, training=False)))
    assert y32.shape == (1, 2, 3, 3, 7) and y16.shape == (1, 4, 6, 3, 7) and dummy.numpy().tolist() == [0.0]
    np.testing.assert_allclose(_decode_y_true([y32[0].numpy(), y16[0].numpy()], hw)[0], want, atol=1e-4)


def test_multi_scale_changes_size_every_n_batches(tmp_path):
    recs = _synthetic_records(tmp_path, n=16)
    ms = MultiScale(sizes=((32, 32), (64, 64), (96, 96)), every=2)
    ds = make_dataset(recs, (64, 64), TINY_YOLO_ANCHORS, 3, 2, training=True, seed=0, multi_scale=ms)
    shapes = [tuple(x[0][0].shape[1:3]) for x in ds]
    assert len(shapes) == 8
    for g in range(4):
        assert shapes[2 * g] == shapes[2 * g + 1]
    assert set(shapes) <= {(32, 32), (64, 64), (96, 96)} and len(set(shapes)) >= 2
    again = [tuple(x[0][0].shape[1:3]) for x in make_dataset(recs, (64, 64), TINY_YOLO_ANCHORS, 3, 2,
                                                               training=True, seed=0, multi_scale=ms)]
    assert again == shapes


def test_mosaic_boxes_stay_inside_and_nonempty_and_deterministic(tmp_path):
    recs = _synthetic_records(tmp_path)
    make = lambda: make_dataset(recs, (64, 64), TINY_YOLO_ANCHORS, 3, 8, training=True, seed=1,
                                targets=False, augment=AugmentConfig(mosaic=1.0), max_boxes=10)
    images, boxes = next(iter(make()))
    b = boxes.numpy()
    real = b[b.any(axis=-1)]
    assert len(real) > 8  # four source images each
    assert np.all(real[:, 2] - real[:, 0] > 1) and np.all(real[:, 3] - real[:, 1] > 1)
    assert np.all(real[:, :4] >= 0) and np.all(real[:, [0, 2]] <= 64) and np.all(real[:, [1, 3]] <= 64)
    assert float(images.numpy().min()) >= 0 and float(images.numpy().max()) <= 1
    images2, boxes2 = next(iter(make()))
    np.testing.assert_array_equal(images.numpy(), images2.numpy())
    np.testing.assert_array_equal(b, boxes2.numpy())


def test_hsv_distortion_matches_matplotlib():
    from matplotlib.colors import hsv_to_rgb, rgb_to_hsv
    rng = np.random.default_rng(2)
    img = rng.uniform(0, 1, size=(8, 9, 3)).astype(np.float32)
    for hue, sat, val in [(0.0, 1.0, 1.0), (0.07, 1.4, 0.8), (-0.1, 0.7, 1.3)]:
        ref = rgb_to_hsv(img.astype(np.float64))
        ref[..., 0] = (ref[..., 0] + hue) % 1
        ref[..., 1] = np.clip(ref[..., 1] * sat, 0, 1)
        ref[..., 2] = np.clip(ref[..., 2] * val, 0, 1)
        got = distort_hsv(tf.constant(img), tf.constant(hue), tf.constant(sat), tf.constant(val)).numpy()
        np.testing.assert_allclose(got, hsv_to_rgb(ref), atol=2e-3)


def test_colouring_the_placed_part_equals_colouring_the_whole_canvas():
    from yolo3.data.augment import place_on_canvas, random_augment, sample_params
    rng = np.random.default_rng(4)
    img = tf.constant(rng.uniform(0, 1, size=(50, 70, 3)).astype(np.float32))
    hw = tf.constant([64, 96])
    cfg = AugmentConfig()
    for s in range(6):
        seed = tf.constant([s, 11])
        p = sample_params(seed, tf.shape(img)[:2], hw, cfg)
        want = distort_hsv(place_on_canvas(img, p["new_hw"], p["offset_hw"], hw), p["hue"], p["sat"], p["val"])
        if bool(p["flip"]):
            want = want[:, ::-1]
        got, _ = random_augment(img, tf.zeros((0, 5)), hw, seed, cfg)
        np.testing.assert_allclose(got.numpy(), want.numpy(), atol=1e-5)


def test_assign_iou_reaches_the_targets(tmp_path):
    """The dataset's y_true are the targets of its own boxes at the given assign_iou: a box with
    several anchors above the threshold is a positive on each of them."""
    from yolo3.ops.targets import preprocess_true_boxes
    rec = _rect_image(tmp_path / "v.png", hw=(96, 96), rect=(20, 20, 60, 62))
    hw = (96, 96)
    counts = {}
    for assign_iou in (1.0, 0.2):
        ds = make_dataset([rec], hw, TINY_YOLO_ANCHORS, 2, 1, training=False, true_boxes=True,
                          assign_iou=assign_iou)
        (_, *y_true, boxes), _ = next(iter(ds))
        want = preprocess_true_boxes(boxes.numpy(), hw, TINY_YOLO_ANCHORS, 2,
                                     assign_iou=assign_iou)
        for got, expected in zip(y_true, want):
            np.testing.assert_array_equal(got.numpy(), expected)
        counts[assign_iou] = sum(int(y.numpy()[..., 4].sum()) for y in y_true)
    assert counts[1.0] == 1 and counts[0.2] > 1


def test_the_config_object_and_the_earlier_call_give_the_same_batches(tmp_path):
    from yolo3.data.pipeline import DatasetConfig, TargetEncoding
    recs = [_rect_image(tmp_path / f"r{i}.png") for i in range(6)]
    old = make_dataset(recs, (64, 64), TINY_YOLO_ANCHORS, 3, 2, training=True, seed=4,
                       true_boxes=True, assign_iou=0.35, max_boxes=7)
    config = DatasetConfig((64, 64), 2, training=True, seed=4, max_boxes=7,
                           targets=TargetEncoding(TINY_YOLO_ANCHORS, 3, assign_iou=0.35,
                                                  true_boxes=True))
    for a, b in zip(old, make_dataset(recs, config)):
        for x, y in zip(a[0], b[0]):
            np.testing.assert_array_equal(x.numpy(), y.numpy())
    with pytest.raises(TypeError, match="no other arguments"):
        make_dataset(recs, config, 3)


def test_without_anchors_the_inputs_are_the_image_and_its_padded_boxes(tmp_path):
    """An anchor-free training model takes ``(image, boxes)``: no y_true is encoded."""
    from yolo3.data.pipeline import DatasetConfig, TargetEncoding
    recs = [_rect_image(tmp_path / f"r{i}.png") for i in range(4)]
    plain = make_dataset(recs, DatasetConfig((64, 64), 2, training=False, max_boxes=5))
    boxes_only = make_dataset(recs, DatasetConfig(
        (64, 64), 2, training=False, max_boxes=5,
        targets=TargetEncoding(None, 3, true_boxes=True)))
    for (image, boxes), ((image2, boxes2), dummy) in zip(plain, boxes_only):
        np.testing.assert_array_equal(image.numpy(), image2.numpy())
        np.testing.assert_array_equal(boxes.numpy(), boxes2.numpy())
        assert boxes2.shape == (2, 5, 5) and dummy.shape == (2,)
