"""Sliced inference: a scene detector that sees what a resized view would (objects of at least
1/40 of the view's longer side), and the Keras detector against a per-crop plain loop."""
from __future__ import annotations

import numpy as np
import pytest

from yolo3.inference.tiled import TiledDetector
from yolo3.ops.tiles import cut_by_window, merge_detections, tile_windows

COLOURS = [(200, 30, 30), (30, 200, 30), (30, 30, 200)]


class SceneDetector:
    """Finds each coloured rectangle's visible pixels in a view (class = colour, score by class)
    when its box is at least 1/40 of the view's longer side: a network seeing the view letterboxed
    to a fixed input would miss smaller ones. Records the views' sizes and batch sizes."""

    class_names = ["red", "green", "blue"]
    iou = 0.45
    max_boxes = 100

    def __init__(self):
        self.views, self.batch_sizes = [], []

    def detect(self, view):
        self.views.append(view.shape[:2])
        smallest = max(view.shape[:2]) / 40
        boxes, scores, classes = [], [], []
        for k, colour in enumerate(COLOURS):
            ys, xs = np.nonzero(np.all(view == colour, axis=-1))
            if len(xs):  # one object per colour and view in these scenes: its visible box
                box = [xs.min(), ys.min(), xs.max() + 1, ys.max() + 1]
                if max(box[2] - box[0], box[3] - box[1]) >= smallest:
                    boxes.append(box)
                    scores.append(0.5 + 0.1 * k)
                    classes.append(k)
        return (np.array(boxes, np.float32).reshape(-1, 4), np.array(scores, np.float32),
                np.array(classes, np.int32))

    def detect_stream(self, images, batch_size=1):
        self.batch_sizes.append(batch_size)
        for image in images:
            yield self.detect(image)


def scene(hw, objects):
    image = np.full((*hw, 3), 90, np.uint8)
    for k, (x1, y1, x2, y2) in objects:
        image[y1:y2, x1:x2] = COLOURS[k]
    return image


def test_small_objects_are_found_by_tiles_and_cut_ones_whole():
    # two small objects (seen only by tiles, one across a tile seam) and a large one (cut by
    # every tile: seen whole by the whole-image pass only)
    objects = [(0, (400, 300, 416, 314)), (1, (1500, 900, 1514, 912)),
               (2, (700, 150, 1400, 650))]
    image = scene((1080, 1920), objects)
    inner = SceneDetector()
    tiled = TiledDetector(inner, tile=416, overlap=0.25, batch_size=4)
    boxes, scores, classes = tiled.detect(image)
    order = np.argsort(classes)
    np.testing.assert_array_equal(classes[order], [0, 1, 2])
    np.testing.assert_array_equal(boxes[order], [box for _, box in objects])
    assert len(inner.views) == tiled.views_per_image(image.shape) == len(tiled.windows((1080, 1920))) + 1
    assert inner.views[-1] == (1080, 1920) and inner.batch_sizes == [4]
    # the plain detector misses the small ones
    assert inner.detect(image)[2].tolist() == [2]


def test_without_the_whole_image_cut_boxes_are_kept_and_merged():
    objects = [(2, (200, 200, 900, 700))]
    tiled = TiledDetector(SceneDetector(), tile=416, overlap=0.25, whole_image=False)
    boxes, _, classes = tiled.detect(scene((1080, 1920), objects))
    # the object is seen in pieces; every piece lies inside it, and together they span it
    assert len(boxes) >= 2 and set(classes.tolist()) == {2}
    assert boxes[:, 0].min() == 200 and boxes[:, 1].min() == 200
    assert boxes[:, 2].max() == 900 and boxes[:, 3].max() == 700


def test_a_stream_of_images_of_several_sizes_keeps_its_order():
    images = [scene((1080, 1920), [(0, (10, 10, 30, 30))]), scene((300, 200), [(1, (5, 5, 50, 50))]),
              scene((700, 900), [(2, (600, 400, 620, 430))])]
    inner = SceneDetector()
    tiled = TiledDetector(inner, tile=320, overlap=0.2, batch_size=2)
    found = list(tiled.detect_stream(iter(images), batch_size=3))  # the larger of the two
    assert [f[2].tolist() for f in found] == [[0], [1], [2]]
    np.testing.assert_array_equal(found[2][0], [[600, 400, 620, 430]])
    # the 300x200 image fits one tile: seen once
    assert len(inner.views) == sum(tiled.views_per_image(im.shape) for im in images)
    assert tiled.views_per_image((300, 200)) == 1 and inner.batch_sizes == [3]
    assert tiled.detect_batch(images)[1][2].tolist() == [1]
    assert tiled.class_names == SceneDetector.class_names  # the detector's attributes


@pytest.mark.parametrize("kwargs, match", [({"tile": 0}, "tile"), ({"tile": 416, "overlap": 1.0}, "overlap"),
                                           ({"tile": 416, "merge": "avg"}, "merge"),
                                           ({"tile": 416, "batch_size": 0}, "batch size")])
def test_bad_settings_are_refused(kwargs, match):
    with pytest.raises(ValueError, match=match):
        TiledDetector(SceneDetector(), **kwargs)


@pytest.fixture(scope="module")
def keras_detector(tmp_path_factory):
    import keras

    from yolo3.checkpoint.metadata import ModelInfo
    from yolo3.inference.detector import YOLO
    from yolo3.modeling.bodies import build_body
    from yolo3.ops.anchors import TINY_YOLO_ANCHORS

    keras.utils.set_random_seed(3)
    body = build_body("tiny", 3)
    for name in ("output_s32", "output_s16"):  # spread the scores
        layer = body.get_layer(name)
        w, b = layer.get_weights()
        layer.set_weights([w * 8.0, b])
    info = ModelInfo(variant="tiny", anchors=TINY_YOLO_ANCHORS, masks=[[3, 4, 5], [1, 2, 3]], num_classes=3,
                     class_names=["a", "b", "c"], input_size=(96, 96))
    return YOLO.from_body(body, info, score=0.2, iou=0.45, precision="float32")


def test_keras_detector_tiled_equals_a_per_crop_loop(keras_detector):
    rng = np.random.default_rng(0)
    image = rng.integers(0, 255, size=(250, 330, 3), dtype=np.uint8)
    tiled = TiledDetector(keras_detector, tile=128, overlap=0.2, batch_size=5)
    got = tiled.detect(image)
    views = []
    for window in tile_windows(image.shape[:2], 128, 0.2):
        x1, y1, x2, y2 = window
        boxes, scores, classes = keras_detector.detect(image[y1:y2, x1:x2])
        boxes = boxes + np.array([x1, y1, x1, y1], np.float32)
        keep = ~cut_by_window(boxes, window, image.shape[:2])
        views.append((boxes[keep], scores[keep], classes[keep]))
    views.append(keras_detector.detect(image))
    ref = merge_detections(views, 0.45, max_boxes=100)
    assert len(ref[0]) > 0
    np.testing.assert_allclose(got[0], ref[0], atol=1e-3)
    np.testing.assert_allclose(got[1], ref[1], atol=1e-5)
    np.testing.assert_array_equal(got[2], ref[2])
    # a tile as large as the image: the plain detection
    whole = TiledDetector(keras_detector, tile=400).detect(image)
    plain = keras_detector.detect(image)
    for a, b in zip(whole, plain):
        np.testing.assert_allclose(a, b, atol=1e-5)


class ViewScoredDetector(SceneDetector):
    """The scene detector with a network input (what ``whole_from`` measures at) that scores a
    tile's boxes 0.9 and the whole image's 0.6: the score tells which view a merged box came
    from."""

    input_hw = (320, 320)

    def detect(self, view):
        boxes, _, classes = super().detect(view)
        whole = view.shape[:2] == (1080, 1920)
        return boxes, np.full(len(boxes), 0.6 if whole else 0.9, np.float32), classes


def test_whole_from_leaves_objects_large_at_the_whole_image_to_it():
    """1920x1080 into 320x320: a sixth. With whole_from 16, a tile's box of side 96 px or more
    (16 at the whole image) is dropped, the whole image's kept; smaller ones keep the tile's box
    (NMS keeps the higher score); without whole_from, the tiles' boxes win everywhere."""
    objects = [(0, (100, 100, 195, 195)),    # side 95: 15.8 px at the whole image: the tile's
               (1, (600, 500, 697, 597)),    # side 97: 16.2 px: the whole image's
               (2, (1400, 700, 1420, 720))]  # side 20: found by tiles only
    image = scene((1080, 1920), objects)
    expected = {0: 0.9, 1: 0.6, 2: 0.9}
    for whole_from, want in ((16.0, expected), (0.0, {0: 0.9, 1: 0.9, 2: 0.9})):
        tiled = TiledDetector(ViewScoredDetector(), tile=416, overlap=0.25, whole_from=whole_from)
        boxes, scores, classes = tiled.detect(image)
        assert dict(zip(classes.tolist(), np.round(scores.astype(float), 3).tolist())) == want, \
            whole_from
        np.testing.assert_array_equal(boxes[np.argsort(classes)], [b for _, b in objects])
    # without the whole image nothing is left to it: whole_from does nothing
    tiled = TiledDetector(ViewScoredDetector(), tile=416, overlap=0.25, whole_image=False,
                          whole_from=16.0)
    assert sorted(tiled.detect(image)[2].tolist()) == [0, 1, 2]
    assert "objects from 16 px at the whole-image input: from the whole image" in \
        TiledDetector(ViewScoredDetector(), 416, whole_from=16).summary()


def test_whole_from_must_be_pixels():
    with pytest.raises(ValueError, match="whole_from"):
        TiledDetector(SceneDetector(), 416, whole_from=-1)
    with pytest.raises(ValueError, match="whole_from"):
        TiledDetector(SceneDetector(), 416, whole_from=float("nan"))


class ScriptedDetector:
    """Gives each view the boxes of a script, by the view's size: tiles a 20 px box (a piece of
    the large object where the tile lies inside it) and an 8 px one; the whole image the large
    object."""

    class_names = ["a", "b"]
    iou = 0.45
    max_boxes = 100
    input_hw = (320, 320)

    def __init__(self, whole_score=0.95):
        self.whole_score = whole_score

    def detect_stream(self, images, batch_size=1):
        for view in images:
            if view.shape[:2] == (960, 1280):
                yield (np.array([[400, 300, 700, 600]], np.float32),
                       np.array([self.whole_score], np.float32), np.array([0], np.int32))
            else:  # every tile reports the same boxes; shifted into the image by its window
                yield (np.array([[100, 100, 120, 120], [20, 20, 28, 28]], np.float32),
                       np.array([0.9, 0.8], np.float32), np.array([0, 0], np.int32))


def test_pieces_of_an_object_the_whole_image_owns_are_dropped():
    """A tile's box mostly inside a whole-image box of its class that is large at the whole image
    (here 75 px at the input) and scored at least as high is a piece of it, though small itself
    (20 px, 5 at the input); kept without whole_from."""
    image = np.zeros((960, 1280, 3), np.uint8)
    with_hand_over = TiledDetector(ScriptedDetector(), 320, 0.2, whole_from=8)
    windows = with_hand_over.windows((960, 1280))
    boxes, scores, _ = with_hand_over.detect(image)
    pieces = [w[:2] + 100 for w in windows if 400 <= w[0] + 100 and w[0] + 120 <= 700
              and 300 <= w[1] + 100 and w[1] + 120 <= 600]
    assert pieces  # some tile's piece lies inside the large box
    kept = {tuple(b) for b in boxes.astype(int).tolist()}
    assert (400, 300, 700, 600) in kept
    for x, y in pieces:
        assert (x, y, x + 20, y + 20) not in kept
    # small boxes (8 px: 2 at the input) outside the large one are kept, one per tile
    outside = [w for w in windows if not (400 <= w[0] + 20 and w[0] + 28 <= 700
                                          and 300 <= w[1] + 20 and w[1] + 28 <= 600)]
    assert sum(1 for b in boxes if b[2] - b[0] == 8) == len(outside) > 1
    without = TiledDetector(ScriptedDetector(), 320, 0.2)
    kept0 = {tuple(b) for b in without.detect(image)[0].astype(int).tolist()}
    assert all((x, y, x + 20, y + 20) in kept0 for x, y in pieces)
    # a whole-image box scored under the pieces (0.5 against 0.9) owns none of them
    unsure = TiledDetector(ScriptedDetector(whole_score=0.5), 320, 0.2, whole_from=8)
    kept1 = {tuple(b) for b in unsure.detect(image)[0].astype(int).tolist()}
    assert all((x, y, x + 20, y + 20) in kept1 for x, y in pieces)
