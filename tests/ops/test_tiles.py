"""Tile windows, cut boxes and the merge, against plain-loop float64 references."""
from __future__ import annotations

import numpy as np
import pytest

from yolo3.ops.tiles import (
    cut_by_window,
    fuse_per_class,
    merge_detections,
    nms_per_class,
    tile_windows,
)


@pytest.mark.parametrize("image_hw, tile, overlap", [
    ((1080, 1920), 416, 0.2), ((3000, 4000), 640, 0.25), ((300, 1920), 416, 0.2),
    ((416, 416), 416, 0.2), ((100, 90), 416, 0.5), ((1000, 999), (320, 480), 0.0),
    ((101, 131), 9, 0.6)])
def test_windows_cover_the_image_with_the_overlap(image_hw, tile, overlap):
    h, w = image_hw
    th, tw = (tile, tile) if np.isscalar(tile) else tile
    windows = tile_windows(image_hw, tile, overlap)
    covered = np.zeros((h, w), np.int64)
    for x1, y1, x2, y2 in windows:
        assert 0 <= x1 < x2 <= w and 0 <= y1 < y2 <= h
        # a tile is the tile size, or the whole side where the image is shorter
        assert x2 - x1 == min(tw, w) and y2 - y1 == min(th, h)
        covered[y1:y2, x1:x2] += 1
    assert covered.min() >= 1
    # neighbours along each side overlap by at least the overlap (a plain loop over starts)
    for side, size, t in ((0, w, tw), (1, h, th)):
        starts = sorted(set(int(v) for v in windows[:, side]))
        assert starts[0] == 0 and starts[-1] + min(t, size) == size
        for a, b in zip(starts, starts[1:]):
            assert a + t - b >= overlap * t - 0.5


def test_an_object_no_longer_than_the_overlap_lies_whole_in_a_window(rng):
    windows = tile_windows((1080, 1920), 416, 0.25)
    for _ in range(500):
        w, h = rng.uniform(1, 104, size=2)
        x1, y1 = rng.uniform(0, 1920 - w), rng.uniform(0, 1080 - h)
        inside = [(wx1 <= x1 and wy1 <= y1 and x1 + w <= wx2 and y1 + h <= wy2)
                  for wx1, wy1, wx2, wy2 in windows]
        assert any(inside)


@pytest.mark.parametrize("tile, overlap", [(0, 0.2), (-3, 0.2), (2.5, 0.2), ((416,), 0.2),
                                           (416, 1.0), (416, -0.1)])
def test_bad_tiles_are_refused(tile, overlap):
    with pytest.raises(ValueError, match="tile"):
        tile_windows((100, 100), tile, overlap)


def test_boxes_at_inner_window_edges_are_cut_image_edges_are_not():
    image_hw = (1000, 2000)
    window = (400, 0, 816, 416)  # top edge is the image's
    boxes = np.array([[401, 50, 450, 90],     # at the left edge: cut
                      [500, 0, 540, 40],      # at the image's top: whole
                      [600, 380, 640, 415],   # at the bottom edge: cut
                      [780, 200, 815, 240],   # at the right edge: cut
                      [500, 100, 600, 200]],  # inside
                     float)
    np.testing.assert_array_equal(cut_by_window(boxes, window, image_hw),
                                  [True, False, True, True, False])
    # a window that is the whole image cuts nothing
    assert not cut_by_window(boxes, (0, 0, 2000, 1000), image_hw).any()


def _iou(a, b):
    iw = min(a[2], b[2]) - max(a[0], b[0])
    ih = min(a[3], b[3]) - max(a[1], b[1])
    inter = max(iw, 0.0) * max(ih, 0.0)
    union = (a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter
    return inter / union if union > 0 else 0.0


def _nms_reference(boxes, scores, classes, thr):
    order = sorted(range(len(scores)), key=lambda i: (-scores[i], i))
    kept = []
    for i in order:
        if all(classes[j] != classes[i] or _iou(boxes[i], boxes[j]) <= thr for j in kept):
            kept.append(i)
    return kept


def _random_views(rng, n=60, classes=3):
    centres = rng.uniform(0, 400, size=(n // 3, 2))
    boxes, scores, cls = [], [], []
    for _ in range(n):  # boxes jittered around a few centres: clusters to merge
        c = centres[rng.integers(len(centres))]
        wh = rng.uniform(10, 40, size=2)
        jitter = rng.normal(0, 3, size=2)
        boxes.append(np.concatenate([c + jitter - wh / 2, c + jitter + wh / 2]))
        scores.append(rng.uniform(0.05, 1.0))
        cls.append(int(rng.integers(classes)))
    return np.array(boxes), np.array(scores), np.array(cls)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_nms_equals_a_plain_loop(seed):
    boxes, scores, classes = _random_views(np.random.default_rng(seed))
    keep = nms_per_class(boxes, scores, classes, 0.45)
    ref = _nms_reference(boxes, scores, classes, 0.45)
    assert sorted(keep.tolist()) == sorted(ref)
    assert np.all(np.diff(scores[keep]) <= 0)


def _wbf_reference(boxes, scores, classes, thr):
    out = []
    for k in sorted(set(classes.tolist())):
        order = sorted((i for i in range(len(scores)) if classes[i] == k), key=lambda i: -scores[i])
        clusters = []  # [members]
        for i in order:
            for members in clusters:
                w = sum(scores[m] for m in members)
                fused = [sum(scores[m] * boxes[m][c] for m in members) / w for c in range(4)]
                if _iou(boxes[i], fused) > thr:
                    members.append(i)
                    break
            else:
                clusters.append([i])
        for members in clusters:
            w = sum(scores[m] for m in members)
            out.append(([sum(scores[m] * boxes[m][c] for m in members) / w for c in range(4)],
                        max(scores[m] for m in members), k))
    return sorted(out, key=lambda t: -t[1])


@pytest.mark.parametrize("seed", [0, 3])
def test_weighted_box_fusion_equals_a_plain_loop(seed):
    boxes, scores, classes = _random_views(np.random.default_rng(seed))
    fb, fs, fc = fuse_per_class(boxes, scores, classes, 0.55)
    ref = _wbf_reference(boxes, scores, classes, 0.55)
    assert len(fb) == len(ref) < len(boxes)
    np.testing.assert_allclose(fb, [r[0] for r in ref], rtol=0, atol=1e-9)
    np.testing.assert_allclose(fs, [r[1] for r in ref], rtol=0, atol=0)
    np.testing.assert_array_equal(fc, [r[2] for r in ref])


def test_merge_concatenates_views_and_caps_the_count():
    a = (np.array([[0, 0, 10, 10], [50, 50, 60, 60]], float), np.array([0.9, 0.4]), np.array([0, 1]))
    b = (np.array([[1, 1, 10, 10], [100, 100, 120, 130]], float), np.array([0.8, 0.7]),
         np.array([0, 0]))
    boxes, scores, classes = merge_detections([a, b], 0.45)
    np.testing.assert_allclose(scores, [0.9, 0.7, 0.4], rtol=1e-6)
    np.testing.assert_array_equal(classes, [0, 0, 1])
    assert boxes.dtype == np.float32 and classes.dtype == np.int32
    boxes, scores, _ = merge_detections([a, b], 0.45, "wbf", max_boxes=1)
    np.testing.assert_allclose(boxes[0], (0.9 * a[0][0] + 0.8 * b[0][0]) / 1.7, rtol=1e-6)
    assert scores.tolist() == pytest.approx([0.9])
    empty = merge_detections([], 0.45)
    assert empty[0].shape == (0, 4) and len(empty[1]) == len(empty[2]) == 0
    with pytest.raises(ValueError, match="merge method"):
        merge_detections([a], 0.45, "mean")


def test_the_suggested_tile_brings_small_boxes_to_the_input_threshold():
    from yolo3.ops.tiles import SMALL_AT_INPUT, TINY_AT_INPUT, suggest_tile

    rng = np.random.default_rng(4)
    sides = rng.uniform(8, 36, size=400)  # all under 8 px at the input: tiles
    box_wh = np.stack([sides, sides], axis=1)
    image_hw = np.tile([[1080.0, 1920.0]], (400, 1))
    tip = suggest_tile(box_wh, image_hw, (416, 416))
    p10 = np.percentile(sides, 10)
    # the largest multiple of 32 at which the 10th-percentile box is at least SMALL_AT_INPUT
    assert tip.size % 32 == 0 and tip.size >= 416
    assert p10 * 416 / tip.size >= SMALL_AT_INPUT or tip.size == 416
    assert p10 * 416 / (tip.size + 32) < SMALL_AT_INPUT
    assert tip.small_share == pytest.approx(np.mean(sides * 416 / 1920 < TINY_AT_INPUT))
    assert "10th-percentile" in tip.reason
    # large boxes: no tiles
    big = suggest_tile(box_wh * 10, image_hw, (416, 416))
    assert big.size is None and "whole image serves" in big.reason
    # small images: tiles would be the whole image
    near = suggest_tile(box_wh / 4, np.tile([[420.0, 560.0]], (400, 1)), (416, 416))
    assert near.size is None and "larger input size" in near.reason
    # objects small even at native resolution: tiles at the input size, and said so
    tiny = suggest_tile(box_wh / 4, image_hw, (416, 416))
    assert tiny.size == 416 and "native resolution" in tiny.reason
    assert suggest_tile(np.zeros((0, 2)), np.zeros((0, 2)), (416, 416)).size is None


@pytest.mark.parametrize("under, tiles", [(40, True), (39, False), (100, True), (0, False)])
def test_tiles_are_suggested_only_where_enough_boxes_are_tiny(under, tiles):
    """The measured rule (docs/benchmarks.md): tiles when at least TILE_SHARE (40%) of the boxes
    are under TINY_AT_INPUT (8) px at the input. 1920 wide into 320: a sixth, so 48 px."""
    from yolo3.ops.tiles import TILE_SHARE, TINY_AT_INPUT, suggest_tile
    assert (TILE_SHARE, TINY_AT_INPUT) == (0.40, 8.0)
    sides = np.array([47.9] * under + [48.0] * (100 - under))
    tip = suggest_tile(np.stack([sides, sides], 1), np.tile([[1080.0, 1920.0]], (100, 1)),
                       (320, 320))
    assert (tip.size is not None) == tiles, tip.reason
    assert tip.small_share == under / 100
    assert tip.reason.startswith(f"{under}% of the boxes are under 8 px at the 320x320 input")


def test_a_tiling_of_more_than_max_tiles_is_refused_with_the_figure():
    from yolo3.core.errors import SettingError
    from yolo3.ops.tiles import MAX_TILES
    assert len(tile_windows((1080, 1920), 320, 0.75)) <= MAX_TILES  # the flags' worst at HD
    with pytest.raises(SettingError) as caught:
        tile_windows((9000, 12000), 320, 0.9)
    assert "12000x9000" in str(caught.value) and f"more than {MAX_TILES}" in str(caught.value)
    assert {"tile", "overlap"} <= set(caught.value.settings)
    from yolo3.ops.tiles import check_tile_count
    check_tile_count([(1080, 1920), (480, 640)], 320, 0.75)
    check_tile_count([(1080, 1920)], 128, 0.5)  # 464 tiles
    with pytest.raises(SettingError, match="150000x100 pixels into 2343 tiles"):  # each size
        check_tile_count([(1080, 1920), (100, 150000)], 128, 0.5)


def test_side_at_whole_equals_a_plain_loop():
    from yolo3.ops.tiles import side_at_whole
    rng = np.random.default_rng(6)
    for image_hw, input_hw in (((1080, 1920), (320, 320)), ((960, 1280), (416, 608)),
                               ((300, 200), (640, 640))):
        xy = rng.uniform(0, 200, (20, 2))
        boxes = np.concatenate([xy, xy + rng.uniform(0, 90, (20, 2)), rng.integers(3, size=(20, 1))], 1)
        ref = []
        for x1, y1, x2, y2, _ in boxes.tolist():
            scale = min(input_hw[0] / image_hw[0], input_hw[1] / image_hw[1])
            ref.append(((x2 - x1) * (y2 - y1)) ** 0.5 * scale)
        np.testing.assert_allclose(side_at_whole(boxes, image_hw, input_hw), ref, rtol=1e-12)
        np.testing.assert_allclose(side_at_whole(boxes[:, :4], image_hw, input_hw), ref, rtol=1e-12)
    assert side_at_whole(np.zeros((0, 4)), (10, 10), (32, 32)).shape == (0,)


def test_slicing_records_its_hand_over_and_reads_files_without_it():
    from yolo3.ops.tiles import Slicing
    slicing = Slicing(320, 0.25, "wbf", whole_from=16)
    assert slicing.to_dict()["whole_from"] == 16.0
    assert Slicing.from_dict(slicing.to_dict()) == slicing
    # a model file written before the hand-over existed slices as it was validated: every box
    assert Slicing.from_dict({"tile": 320, "overlap": 0.2, "merge": "nms",
                              "whole_image": True}).whole_from == 0.0
    for bad in (-1, float("nan"), float("inf")):
        with pytest.raises(ValueError, match="whole_from must be pixels >= 0"):
            Slicing(320, whole_from=bad)


@pytest.mark.parametrize("seed", range(4))
def test_left_to_whole_equals_a_plain_loop(seed):
    from yolo3.ops.tiles import left_to_whole
    rng = np.random.default_rng(seed)
    image_hw, input_hw, whole_from = (960, 1280), (320, 320), 8.0  # a quarter: 32 px native

    def boxes(n, lo, hi):
        xy = rng.uniform(0, 900, (n, 2))
        return np.concatenate([xy, xy + rng.uniform(lo, hi, (n, 2))], 1), rng.integers(2, size=n)
    tiles, tile_classes = boxes(60, 4, 60)
    whole, whole_classes = boxes(12, 10, 300)
    tiles[:8, :2] = whole[:8, :2] + 3  # small pieces (18 px native, 4.5 at the input) inside
    tiles[:8, 2:] = tiles[:8, :2] + 18  # whole-image boxes
    tile_classes[:8] = whole_classes[:8]
    tile_scores, whole_scores = rng.uniform(0, 1, 60), rng.uniform(0, 1, 12)
    got = left_to_whole(tiles, tile_scores, tile_classes, whole, whole_scores, whole_classes,
                        image_hw, input_hw, whole_from)
    for i, (x1, y1, x2, y2) in enumerate(tiles.tolist()):
        side = ((x2 - x1) * (y2 - y1)) ** 0.5 / 4
        expected = side >= whole_from
        for (a1, b1, a2, b2), c, score in zip(whole.tolist(), whole_classes.tolist(), whole_scores):
            if ((a2 - a1) * (b2 - b1)) ** 0.5 / 4 < whole_from or c != tile_classes[i] or \
                    score < tile_scores[i]:
                continue
            overlap = max(min(x2, a2) - max(x1, a1), 0) * max(min(y2, b2) - max(y1, b1), 0)
            expected |= overlap >= 0.5 * (x2 - x1) * (y2 - y1)
        assert got[i] == expected, i
    assert 0 < got.sum() < len(got)
    # a piece is left to a surer whole-image box only
    surer = left_to_whole(tiles[:8], np.zeros(8), tile_classes[:8], whole, np.ones(12),
                          whole_classes, image_hw, input_hw, whole_from)
    unsure = left_to_whole(tiles[:8], np.ones(8), tile_classes[:8], whole, np.zeros(12),
                           whole_classes, image_hw, input_hw, whole_from)
    assert surer.sum() > unsure.sum()
    assert not left_to_whole(tiles, tile_scores, tile_classes, whole[:0], whole_scores[:0],
                             whole_classes[:0], image_hw, input_hw, 1e9).any()
    assert left_to_whole(tiles[:0], tile_scores[:0], tile_classes[:0], whole, whole_scores,
                         whole_classes, image_hw, input_hw, whole_from).shape == (0,)
