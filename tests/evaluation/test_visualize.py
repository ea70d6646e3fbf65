"""yolo3.evaluation.visualize: stable class colours, readable labels, boxes drawn where they are (on
a copy), and the plots a person reads written as PNG files."""
from __future__ import annotations

import numpy as np
import pytest
from PIL import Image

from yolo3.evaluation.diagnostics import ConfidenceCurves
from yolo3.evaluation.visualize import (
    class_colors,
    draw_detections,
    draw_on_array,
    plot_confidence_curves,
    plot_confusion_matrix,
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
