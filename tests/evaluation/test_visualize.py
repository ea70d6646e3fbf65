"""yolo3.evaluation.visualize: stable class colours, readable labels, boxes drawn where they are (on
a copy), and the plots a person reads written as PNG files."""
from __future__ import annotations

import numpy as np
import pytest
from PIL import Image

from yolo3.evaluation.diagnostics import ConfidenceCurves
from yolo3.evaluation.visualize import (
    class_colors,
    draw_batch,
    draw_detections,
    draw_on_array,
    plot_confidence_curves,
    plot_confusion_matrix,
    plot_labels,
    plot_pr_curves,
    text_color,
)


def test_class_colours_are_stable_and_distinct():
    colors = class_colors(80)
    assert colors == class_colors(80) and len(set(colors)) == 80
    assert class_colors(3) == colors[:3]  # a class keeps its colour whatever the class count
    assert all(0 <= c <= 255 for rgb in colors for c in rgb)


@pytest.mark.parametrize("background, text", [((255, 255, 0), (0, 0, 0)), ((0, 0, 128), (255, 255, 255)),
                                              ((255, 255, 255), (0, 0, 0)), ((0, 0, 0), (255, 255, 255))])
def test_label_text_contrasts_with_its_background(background, text):
    assert text_color(background) == text


def test_boxes_are_drawn_on_a_copy_in_their_class_colour():
    image = Image.fromarray(np.full((120, 160, 3), 128, np.uint8))
    colors = [(255, 0, 0), (0, 255, 0)]
    boxes = np.array([[20, 50, 80, 100], [100, 0, 150, 40]], np.float32)  # the second at the top
    drawn = np.asarray(draw_detections(image, boxes, np.array([0.9, 0.4]), np.array([0, 1]),
                                       ["cat", "dog"], colors))
    assert np.all(np.asarray(image) == 128)  # the input is not touched
    assert tuple(drawn[75, 20]) == (255, 0, 0) and tuple(drawn[75, 80]) == (255, 0, 0)  # sides
    assert tuple(drawn[75, 50]) == (128, 128, 128)  # inside stays
    above = drawn[30:50, 20:60].reshape(-1, 3)  # the label of box 0 sits above it
    assert (above == (255, 0, 0)).all(axis=1).mean() > 0.3
    inside_top = drawn[1:12, 101:140].reshape(-1, 3)  # no room above box 1: inside at its top
    assert (inside_top == (0, 255, 0)).all(axis=1).mean() > 0.3


def test_ground_truth_labels_and_unknown_ids_and_arrays():
    image = np.zeros((64, 64, 3), np.uint8)
    out = draw_on_array(image, np.array([[10, 30, 50, 60]]), None, np.array([7]), ["a"])
    assert out.shape == image.shape and out.dtype == np.uint8
    assert out.any() and not image.any()


def test_plots_are_written_as_png(tmp_path):
    names = ["cat", "dog"]
    matrix = np.array([[5, 1, 2], [0, 7, 1], [1, 0, 0]])
    curves = [{"recall": np.array([0.2, 0.5, 0.9]), "precision": np.array([1.0, 0.8, 0.6]),
               "ap": 0.71}, None]
    grid = np.linspace(0, 1, 11)
    precision = np.vstack([grid, grid ** 2])
    recall = np.vstack([1 - grid, 1 - grid ** 2])
    f1 = 2 * precision * recall / np.maximum(precision + recall, 1e-9)
    confidence = ConfidenceCurves(grid, [0, 1], precision, recall, f1)
    written = [plot_confusion_matrix(matrix, names, str(tmp_path / "sub" / "confusion.png")),
               plot_pr_curves(curves, names, str(tmp_path / "pr.png")),
               plot_confidence_curves(confidence, names, str(tmp_path / "confidence.png"))]
    for path in written:
        with Image.open(path) as im:
            assert im.format == "PNG" and min(im.size) > 200


def test_tracks_are_drawn_in_their_ids_colour_with_a_trail():
    """Two boxes of one class, two IDs: two colours (the palette's, by ID), '#ID' labels, and
    each track's trail drawn in its colour."""
    image = Image.new("RGB", (120, 80), (255, 255, 255))
    boxes = np.array([[10, 30, 40, 60], [70, 30, 100, 60]], float)
    trails = [np.array([[5.0, 75.0], [25.0, 75.0]]), np.array([[80.0, 75.0]])]
    drawn = np.asarray(draw_detections(image, boxes, np.array([0.9, 0.8]), np.array([0, 0]),
                                       ["thing"], ids=np.array([3, 4]), trails=trails))
    palette = class_colors(32)
    assert tuple(drawn[45, 10]) == palette[3] and tuple(drawn[45, 70]) == palette[4]
    assert tuple(drawn[75, 15]) == palette[3]  # the first track's trail
    assert tuple(drawn[75, 90]) == (255, 255, 255)  # one point: no line
    plain = np.asarray(draw_detections(image, boxes, np.array([0.9, 0.8]), np.array([0, 0]),
                                       ["thing"]))
    assert tuple(plain[45, 10]) == tuple(plain[45, 70]) == class_colors(1)[0]


def test_the_labels_plot_is_written_for_the_records_with_their_sizes(tmp_path):
    from yolo3.core.output_folder import written_by_yolo3
    from yolo3.data.annotations import Record
    rng = np.random.default_rng(0)
    records = []
    for k in range(30):
        xy = rng.uniform(0, 200, (4, 2))
        boxes = np.concatenate([xy, xy + rng.uniform(4, 80, (4, 2)), rng.integers(0, 3, (4, 1))],
                               axis=1).astype(np.float32)
        records.append(Record(f"{k}.jpg", boxes, image_hw=(300, 400) if k else None))
    path = plot_labels(records, ["a", "b", "c"], (320, 320), str(tmp_path / "labels.png"),
                       anchors=np.array([[10, 13], [30, 60]]), notes=["tiles: none"])
    with Image.open(path) as im:
        assert im.format == "PNG" and im.size[0] > 800
    assert written_by_yolo3(path)
    empty = plot_labels([], ["a"], (320, 320), str(tmp_path / "empty.png"))
    assert Image.open(empty).size[0] > 800


def test_a_batch_is_drawn_as_a_grid_of_its_images_and_boxes():
    """Five 32x48 images in a grid of four columns: two rows, each cell its own image with its
    boxes (padding rows left out), the empty cells grey."""
    images = np.zeros((5, 32, 48, 3), np.float32)
    images[2] = 1.0
    boxes = np.zeros((5, 3, 5), np.float32)
    boxes[1, 0] = [4, 4, 20, 20, 1]  # one box in the second image; the other rows are padding
    grid = draw_batch(images, boxes, ["a", "b"], columns=4)
    assert grid.shape == (64, 192, 3) and grid.dtype == np.uint8
    assert tuple(grid[12, 48 + 4]) == class_colors(2)[1]  # the box's left edge, in cell 1
    assert (grid[:32, :48] == 0).all()  # cell 0: no box drawn (padding only)
    assert (grid[5:30, 96 + 2:96 + 46] == 255).all()  # cell 2: the white image, untouched
    assert (grid[32:, 48:] == 114).all()  # cells 5-7 hold no image


def test_labels_beside_predictions_and_the_gallery(tmp_path):
    from yolo3.core.output_folder import written_by_yolo3
    from yolo3.evaluation.visualize import labels_beside_predictions, save_png, stack_rows
    image = Image.new("RGB", (200, 100), (40, 40, 40))
    truth = np.array([[10, 10, 60, 60, 0]], np.float64)
    dets = (np.array([[100, 10, 150, 60]], np.float64), np.array([0.9]), np.array([1]))
    caption = "most missed area: a very long file name that is wider than both panels.jpg"
    row = labels_beside_predictions(image, truth, dets, ["cat", "dog"], caption, height=50)
    assert row.height > 50 and row.width > 2 * 100  # the caption is never cut
    pixels = np.asarray(row)
    strip = row.height - 50
    left, right = pixels[strip:, :100], pixels[strip:, 108:208]
    assert (left[5:30, 5] != 40).any() and (right[5:30, 5] == 40).all()  # the label on the left
    assert (right[5:30, 50] != 40).any()                                 # the detection on the right
    sheet = stack_rows([row, row], gap=4)
    assert sheet.size == (row.width, 2 * row.height + 4)
    path = save_png(sheet, str(tmp_path / "worst.png"))
    assert written_by_yolo3(path) and Image.open(path).size == sheet.size


def test_error_breakdown_plot(tmp_path):
    from yolo3.core.output_folder import written_by_yolo3
    from yolo3.evaluation.error_analysis import error_breakdown
    from yolo3.evaluation.visualize import plot_error_breakdown
    gt = {"a": np.array([[0, 0, 10, 10, 0], [20, 20, 30, 30, 0]], np.float64)}
    dets = {"a": (np.array([[0, 0, 10, 10]], np.float64), np.array([0.9]), np.array([0]))}
    path = plot_error_breakdown(error_breakdown(gt, dets), str(tmp_path / "errors.png"))
    assert written_by_yolo3(path) and Image.open(path).size[0] > 500
