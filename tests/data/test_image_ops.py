"""yolo3.data.image_ops (NumPy and OpenCV) against TensorFlow's twins (yolo3.data.augment, the
letterbox) for the same draws, and its decoding against PIL's."""
from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf
from PIL import Image
from locations import shared
from scenes import textured_scene

from yolo3.core.errors import AnnotationError
from yolo3.data.augment import augment_image, distort_hsv, mosaic_images
from yolo3.data.planner import AugmentDraw
from yolo3.data.image_ops import (
    PAD_U8,
    apply_orientation_np,
    augment_image_np,
    colour_plan,
    decode_image_np,
    distort_hsv_np,
    letterbox_image_np,
    letterbox_u8,
    mosaic_images_np,
    mosaic_regions,
    place_image_u8,
    resize_bilinear,
    resized_window,
)
from yolo3.data.images import load_image
from yolo3.ops.letterbox import letterbox_tf

MEAN_LIMIT, MAX_LIMIT = 2 / 255, 8 / 255


def test_hsv_and_resize_are_tensorflows():
    rng = np.random.default_rng(0)
    image = rng.uniform(size=(40, 50, 3)).astype(np.float32)
    for hue, sat, val in [(0.07, 1.3, 0.8), (-0.1, 0.6, 1.5), (0.0, 1.0, 1.0)]:
        np.testing.assert_allclose(distort_hsv_np(image, hue, sat, val),
                                   distort_hsv(tf.constant(image), hue, sat, val).numpy(),
                                   atol=2e-6)
    u8 = (rng.uniform(size=(48, 64, 3)) * 255).astype(np.uint8)
    for hw in [(20, 30), (48, 64), (100, 90)]:
        ref = tf.image.resize(tf.constant(u8, tf.float32), hw).numpy()
        np.testing.assert_allclose(resize_bilinear(u8.astype(np.float32), hw), ref, rtol=2e-5,
                                   atol=1e-3)
        # uint8 in, uint8 out: the rounding only
        assert np.abs(resize_bilinear(u8, hw).astype(np.float32) - ref).max() <= 1.0


def _windows(rng, image, count):
    """``count`` random resize sizes (a quarter to twice the image) and windows inside them."""
    for _ in range(count):
        scale = rng.uniform(0.25, 2.0)
        h = max(8, int(image.shape[0] * scale * rng.uniform(0.8, 1.2)))
        w = max(8, int(image.shape[1] * scale))
        r0, c0 = int(rng.integers(0, h // 2)), int(rng.integers(0, w // 2))
        yield (h, w), (r0, int(rng.integers(r0 + 1, h + 1))), (c0, int(rng.integers(c0 + 1, w + 1)))


def test_a_resized_window_is_the_window_of_the_whole_resize():
    """float32: the whole resize's window, bit for bit; uint8 (sampled alone by an affine warp,
    positions to 1/32 pixel): within a few levels of it, under half a level on average."""
    rng = np.random.default_rng(11)
    image, _ = textured_scene(rng, 90, 120, 3)
    floats = image.astype(np.float32) / 255
    for hw, rows, cols in _windows(rng, image, 30):
        np.testing.assert_array_equal(resized_window(floats, hw, rows, cols),
                                      resize_bilinear(floats, hw)[rows[0]:rows[1], cols[0]:cols[1]])
        got = resized_window(image, hw, rows, cols)
        assert got.dtype == np.uint8 and got.shape == (rows[1] - rows[0], cols[1] - cols[0], 3)
        diff = np.abs(got.astype(int) - resize_bilinear(image, hw)[rows[0]:rows[1],
                                                                   cols[0]:cols[1]])
        assert diff.mean() <= 1.0 and diff.max() <= 8, (hw, rows, cols, diff.mean(), diff.max())
    whole = resized_window(image, (50, 70), (0, 50), (0, 70))  # the whole: the resize itself
    np.testing.assert_array_equal(whole, resize_bilinear(image, (50, 70)))


def test_a_mirrored_window_is_the_window_mirrored_and_is_written_where_asked():
    """The mirror folded into the warp samples the same positions as the window it reverses, to
    OpenCV's 1/32 pixel (its fixed point rounds a few positions the other way: measured, 0.08%
    of the values differ, by 2 levels at most); ``out`` (a view into a canvas) is written in
    place and nothing around it."""
    rng = np.random.default_rng(13)
    image, _ = textured_scene(rng, 90, 120, 3)
    floats = image.astype(np.float32) / 255
    for hw, rows, cols in _windows(rng, image, 30):
        np.testing.assert_array_equal(resized_window(floats, hw, rows, cols, mirror=True),
                                      resized_window(floats, hw, rows, cols)[:, ::-1])
        mirrored = resized_window(image, hw, rows, cols, mirror=True)
        plain = resized_window(image, hw, rows, cols)[:, ::-1]
        diff = np.abs(mirrored.astype(int) - plain)
        assert diff.max() <= 4 and (diff > 0).mean() <= 0.02, (hw, rows, cols)
        canvas = np.zeros((rows[1] - rows[0] + 4, cols[1] - cols[0] + 6, 3), np.uint8)
        view = canvas[2:-2, 3:-3]
        assert resized_window(image, hw, rows, cols, mirror=True, out=view) is view
        np.testing.assert_array_equal(view, mirrored)
        assert not canvas[:2].any() and not canvas[-2:].any() and not canvas[:, :3].any() \
            and not canvas[:, -3:].any()


def test_a_resized_window_of_a_photograph_is_within_a_level_on_average():
    rng = np.random.default_rng(12)
    worst = []
    for path in sorted(shared("images").glob("*.jpg")):
        image = decode_image_np(str(path), 1)
        for hw, rows, cols in _windows(rng, image, 10):
            diff = np.abs(resized_window(image, hw, rows, cols).astype(int)
                          - resize_bilinear(image, hw)[rows[0]:rows[1], cols[0]:cols[1]])
            worst.append((diff.mean(), diff.max()))
    assert len(worst) == 50
    assert max(m for m, _ in worst) <= 0.6 and max(x for _, x in worst) <= 8, worst


@pytest.mark.parametrize("draw", [
    AugmentDraw((50, 70), (5, -3), False, 0.05, 1.3, 0.8),
    AugmentDraw((120, 40), (-30, 10), True, -0.08, 0.7, 1.4),
    AugmentDraw((20, 20), (60, 60), True, 0.0, 1.0, 1.0),   # off the canvas
    AugmentDraw((64, 96), (0, 0), False, 0.099, 1.5, 1.5),
], ids=["inside", "cropped and flipped", "off the canvas", "fills it"])
def test_the_image_operations_are_tensorflows(draw):
    rng = np.random.default_rng(1)
    image, _ = textured_scene(rng, 45, 60, 2)
    ours = augment_image_np(image, draw, (64, 96))
    theirs = augment_image(tf.constant(image, tf.float32) / 255, tf.constant(draw.new_hw),
                           tf.constant(draw.offset_hw), tf.constant(draw.flip),
                           tf.constant([draw.hue, draw.sat, draw.val], tf.float32),
                           tf.constant([64, 96])).numpy()
    assert ours.shape == theirs.shape == (64, 96, 3)
    diff = np.abs(ours - theirs)
    assert diff.mean() <= MEAN_LIMIT and diff.max() <= MAX_LIMIT
    # without the colour step: only the resize's rounding to uint8 differs
    plain = augment_image_np(image.astype(np.float32) / 255, draw, (64, 96), colours=False)
    ref = augment_image(tf.constant(image, tf.float32) / 255, tf.constant(draw.new_hw),
                        tf.constant(draw.offset_hw), tf.constant(draw.flip),
                        tf.constant([0.0, 1.0, 1.0]), tf.constant([64, 96]), colours=False)
    np.testing.assert_allclose(plain, ref.numpy(), atol=1e-5)


@pytest.mark.parametrize("draw", [
    AugmentDraw((50, 70), (5, -3), False, 0.05, 1.3, 0.8),
    AugmentDraw((120, 40), (-30, 10), True, -0.08, 0.7, 1.4),
    AugmentDraw((20, 20), (60, 60), True, 0.0, 1.0, 1.0),
], ids=["inside", "cropped and flipped", "off the canvas"])
@pytest.mark.parametrize("colours", [True, False])
def test_a_region_is_the_whole_canvass_slice(draw, colours):
    """What a mosaic asks of each source: a quarter of its canvas, the same pixels (to a float
    ulp with colours: OpenCV's colour conversion takes its vector or its scalar path by where a
    pixel falls in the row; without colours, bit for bit)."""
    rng = np.random.default_rng(4)
    image, _ = textured_scene(rng, 45, 60, 2)
    whole = augment_image_np(image, draw, (64, 96), colours)
    for split in [(20, 30), (0, 50), (64, 96), (33, 0)]:
        for y1, y2, x1, x2 in mosaic_regions(split, (64, 96)):
            part = augment_image_np(image, draw, (64, 96), colours, (y1, y2, x1, x2))
            assert part.shape == (y2 - y1, x2 - x1, 3)
            if colours:
                np.testing.assert_allclose(part, whole[y1:y2, x1:x2], rtol=0, atol=1e-6)
            else:
                np.testing.assert_array_equal(part, whole[y1:y2, x1:x2])


@pytest.mark.parametrize("draw", [
    AugmentDraw((50, 70), (5, -3), False, 0.05, 1.3, 0.8),
    AugmentDraw((120, 40), (-30, 10), True, -0.08, 0.7, 1.4),
    AugmentDraw((20, 20), (60, 60), True, 0.0, 1.0, 1.0),
], ids=["inside", "cropped and flipped", "off the canvas"])
def test_the_uint8_canvas_over_255_is_the_float_canvas_without_colours(draw):
    """What the device's colours start from: the host's canvas, as uint8, bit for bit, whole and
    region by region (written into a view of a batch)."""
    rng = np.random.default_rng(5)
    image, _ = textured_scene(rng, 45, 60, 2)
    whole = place_image_u8(image, draw, (64, 96))
    assert whole.dtype == np.uint8
    np.testing.assert_array_equal(whole.astype(np.float32) * np.float32(1 / 255),
                                  augment_image_np(image, draw, (64, 96), colours=False))
    batch = np.zeros((2, 64, 96, 3), np.uint8)
    for y1, y2, x1, x2 in mosaic_regions((20, 30), (64, 96)):
        place_image_u8(image, draw, (64, 96), (y1, y2, x1, x2), out=batch[1, y1:y2, x1:x2])
    np.testing.assert_array_equal(batch[1], whole)
    assert not batch[0].any()


def test_the_uint8_letterbox_is_the_float_one_and_takes_the_displayed_size():
    rng = np.random.default_rng(6)
    image, _ = textured_scene(rng, 45, 60, 2)
    np.testing.assert_array_equal(letterbox_u8(image, (64, 96)).astype(np.float32)
                                  * np.float32(1 / 255), letterbox_image_np(image, (64, 96)))
    small = resize_bilinear(image, (30, 40))  # a cached copy of a 45 x 60 image
    got = letterbox_u8(small, (64, 96), image_hw=(45, 60))
    assert got[0, 0].tolist() == [PAD_U8] * 3
    np.testing.assert_array_equal(got, (letterbox_image_np(small, (64, 96), (45, 60))
                                        * 255).round().astype(np.uint8))
    # the displayed 45 x 60 fills 64 x 85 (centred: 5 px of gray left, 6 right), not 30 x 40's
    np.testing.assert_array_equal(got[:, :5], PAD_U8)
    np.testing.assert_array_equal(got[:, 90:], PAD_U8)
    assert (got[:, 5] != PAD_U8).any() and (got[:, 89] != PAD_U8).any()


def test_a_colour_plan_holds_the_split_and_each_sources_colours():
    draws = [AugmentDraw((1, 1), (0, 0), False, 0.1 * k, 1.0 + k, 2.0 - k / 4) for k in range(4)]
    plan = colour_plan(draws, (20, 30), (64, 96))
    assert plan.dtype == np.float32 and plan.shape == (14,)
    assert plan[:2].tolist() == [20, 30]
    np.testing.assert_allclose(plan[2:].reshape(4, 3), [[0.1 * k, 1.0 + k, 2.0 - k / 4]
                                                        for k in range(4)], rtol=1e-6)
    one = colour_plan(draws[:1], None, (64, 96))
    assert one[:2].tolist() == [64, 96] and one[5:].tolist() == [0.0, 1.0, 1.0] * 3
    assert colour_plan(draws, (20, 30), (64, 96), colours=False)[2:].tolist() == [0, 1, 1] * 4
    assert colour_plan(None, None, (64, 96))[2:].tolist() == [0, 1, 1] * 4


def test_the_hue_wraps_as_np_mod_does():
    """The contiguous-channel HSV step against the plain formula (np.mod), hues at the wrap."""
    import cv2
    rng = np.random.default_rng(5)
    image = rng.uniform(size=(30, 40, 3)).astype(np.float32)
    image[0, :4] = [[1, 0, 0], [1, 0, 1e-6], [1, 1e-6, 0], [0, 0, 0]]  # hue 0, 359.99.., 0+, none
    for hue, sat, val in [(0.099, 1.5, 0.7), (-0.099, 0.6, 1.4), (0.0, 1.0, 1.0), (0.5, 1, 1)]:
        hsv = cv2.cvtColor(image, cv2.COLOR_RGB2HSV)
        hsv[..., 0] = np.mod(hsv[..., 0] + np.float32(hue * 360.0), np.float32(360.0))
        hsv[..., 1] = np.clip(hsv[..., 1] * np.float32(sat), 0.0, 1.0)
        hsv[..., 2] = np.clip(hsv[..., 2] * np.float32(val), 0.0, 1.0)
        np.testing.assert_array_equal(distort_hsv_np(image, hue, sat, val),
                                      cv2.cvtColor(hsv, cv2.COLOR_HSV2RGB))


def test_mosaic_and_letterbox_are_tensorflows():
    rng = np.random.default_rng(2)
    canvases = [rng.uniform(size=(40, 60, 3)).astype(np.float32) for _ in range(4)]
    for split in [(10, 45), (30, 15), (20, 30)]:
        np.testing.assert_array_equal(
            mosaic_images_np(canvases, split),
            mosaic_images([tf.constant(c) for c in canvases], tf.constant(split),
                          tf.constant([40, 60])).numpy())
    image, _ = textured_scene(rng, 70, 130, 1)
    np.testing.assert_allclose(letterbox_image_np(image.astype(np.float32) / 255, (96, 96)),
                               letterbox_tf(image, (96, 96)).numpy(), atol=1e-5)


@pytest.mark.parametrize("orientation", range(1, 9))
def test_decoding_applies_the_exif_orientation_as_pil_does(tmp_path, orientation):
    rng = np.random.default_rng(orientation)
    raw = np.kron(rng.integers(0, 255, (3, 5, 3)), np.ones((8, 8, 1))).astype(np.uint8)
    path = tmp_path / "rot.jpg"
    exif = Image.Exif()
    exif[0x0112] = orientation
    Image.fromarray(raw).save(path, quality=100, subsampling=0, exif=exif.tobytes())
    ours = decode_image_np(str(path), orientation)
    theirs = load_image(path)
    assert ours.shape == theirs.shape and ours.dtype == np.uint8
    assert np.abs(ours.astype(int) - theirs).mean() < 1.0


def test_grey_palette_and_16_bit_images_decode_as_pil_reads_them(tmp_path):
    rng = np.random.default_rng(3)
    grey = rng.integers(0, 255, (20, 30)).astype(np.uint8)
    Image.fromarray(grey).save(tmp_path / "grey.png")
    Image.fromarray(grey).convert("P").save(tmp_path / "palette.png")
    Image.fromarray((grey.astype(np.uint16) * 257)).save(tmp_path / "deep.png")
    for name in ("grey.png", "palette.png", "deep.png"):
        path = str(tmp_path / name)
        np.testing.assert_array_equal(decode_image_np(path, 1), load_image(path))


def test_orientations_are_pils():
    image = np.arange(2 * 3 * 3).reshape(2, 3, 3).astype(np.uint8)
    for orientation in range(1, 9):
        with_exif = Image.fromarray(image)
        exif = with_exif.getexif()
        exif[0x0112] = orientation
        from PIL import ImageOps
        with_exif.info["exif"] = exif.tobytes()
        want = np.asarray(ImageOps.exif_transpose(with_exif))
        np.testing.assert_array_equal(apply_orientation_np(image, orientation), want)


def test_a_file_that_does_not_decode_is_named(tmp_path):
    bad = tmp_path / "broken.jpg"
    bad.write_bytes(b"\xff\xd8\xff\xe0 not a jpeg")
    with pytest.raises(AnnotationError, match="broken.jpg"):
        decode_image_np(str(bad), 1)
    with pytest.raises(AnnotationError, match="not found"):
        decode_image_np(str(tmp_path / "missing.png"), 1)
