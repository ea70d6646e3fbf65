"""Loading weights by layer name (yolo3.checkpoint.weights): what loads, what is skipped and why,
and the refusals. Converted Darknet and keras-yolo3 sources are covered by
test_darknet_weights_loading and test_keras_yolo3 (their renaming by test_weight_names)."""
from __future__ import annotations

import logging

import keras
import numpy as np
import pytest

from yolo3.checkpoint.saving import layers_with_weights
from yolo3.checkpoint.weights import LoadReport, WeightsError, load_weights_by_name
from yolo3.modeling.bodies import build_body


@pytest.fixture(scope="module")
def coco_tiny(tmp_path_factory):
    """A tiny body for 80 classes with random weights, saved both ways: ``(body, folder)``."""
    folder = tmp_path_factory.mktemp("coco")
    src = build_body("tiny", 80, input_shape=(64, 64))
    rng = np.random.default_rng(0)
    src.set_weights([rng.normal(size=w.shape).astype("float32") for w in src.get_weights()])
    src.save_weights(folder / "coco.weights.h5")
    src.save(folder / "coco.keras")
    return src, folder


@pytest.mark.parametrize("name", ["coco.weights.h5", "coco.keras"])
def test_other_class_count_loads_everything_but_the_outputs(coco_tiny, name, caplog):
    src, folder = coco_tiny
    dst = build_body("tiny", 3, input_shape=(64, 64))
    untouched = {n: [np.copy(w) for w in layer.get_weights()]
                 for n, layer in layers_with_weights(dst).items() if n.startswith("output_s")}
    with caplog.at_level(logging.INFO, logger="yolo3"):
        report = load_weights_by_name(dst, folder / name, variant="tiny")
    assert sorted(n for n, _ in report.skipped) == ["output_s16", "output_s32"]
    assert dict(report.skipped)["output_s32"] == ("shape [(1, 1, 512, 255), (255,)] in the file, "
                                                  "[(1, 1, 512, 24), (24,)] in the model")
    assert "skipped output_s32" in caplog.text
    src_layers = layers_with_weights(src)
    assert sorted(report.loaded) == sorted(n for n in src_layers if not n.startswith("output_s"))
    for n in report.loaded:
        for a, b in zip(dst.get_layer(n).get_weights(), src_layers[n].get_weights()):
            np.testing.assert_array_equal(a, b)
    for n, values in untouched.items():
        for a, b in zip(dst.get_layer(n).get_weights(), values):
            np.testing.assert_array_equal(a, b)


def test_the_same_class_count_loads_every_layer_quietly(coco_tiny, caplog):
    src, folder = coco_tiny
    dst = build_body("tiny", 80, input_shape=(64, 64))
    with caplog.at_level(logging.INFO, logger="yolo3"):
        report = load_weights_by_name(dst, folder / "coco.keras", verbose=False)
    assert not report.skipped and len(report.loaded) == len(layers_with_weights(src))
    assert caplog.text == ""
    np.testing.assert_array_equal(dst.predict(np.ones((1, 64, 64, 3)), verbose=0)[0],
                                  src.predict(np.ones((1, 64, 64, 3)), verbose=0)[0])


def test_nothing_in_common_or_no_file_is_refused(coco_tiny, tmp_path):
    _, folder = coco_tiny
    stranger = keras.Sequential([keras.Input((4,)), keras.layers.Dense(3, name="dense_head")])
    with pytest.raises(WeightsError, match="coco.keras: no layer matches the model by name and shape"):
        load_weights_by_name(stranger, folder / "coco.keras")
    with pytest.raises(WeightsError, match="missing.weights.h5: weights file not found"):
        load_weights_by_name(stranger, tmp_path / "missing.weights.h5")


def test_report_summary_lists_every_skip_and_unmapped_layer():
    report = LoadReport(loaded=["a", "b"], skipped=[("output_s32", "not in the weights file")],
                        darknet_layout="tiny", unmapped=["conv_99"])
    assert report.summary().splitlines() == [
        "loaded 2 layers, skipped 1",
        "  converted Darknet model, mapped by the tiny cfg layout",
        "  skipped output_s32: not in the weights file",
        "  not in the tiny mapping (unused): conv_99"]


def test_with_head_anchors_the_outputs_keep_the_files_box_and_objectness(coco_tiny, caplog):
    src, folder = coco_tiny
    dst = build_body("tiny", 3, input_shape=(64, 64))
    before = {n: [np.copy(w) for w in layer.get_weights()]
              for n, layer in layers_with_weights(dst).items() if n.startswith("output_s")}
    with caplog.at_level(logging.INFO, logger="yolo3"):
        report = load_weights_by_name(dst, folder / "coco.keras", variant="tiny", head_anchors=3)
    assert sorted(report.partial) == ["output_s16", "output_s32"] and not report.skipped
    assert "2 output layers of another class count" in caplog.text
    for name, (old_kernel, old_bias) in before.items():
        theirs = [w.reshape(*w.shape[:-1], 3, 85) for w in src.get_layer(name).get_weights()]
        got = [w.reshape(*w.shape[:-1], 3, 8) for w in dst.get_layer(name).get_weights()]
        old = [w.reshape(*w.shape[:-1], 3, 8) for w in (old_kernel, old_bias)]
        for g, t, o in zip(got, theirs, old):
            np.testing.assert_array_equal(g[..., :5], t[..., :5])
            np.testing.assert_array_equal(g[..., 5:], o[..., 5:])
    # widths that are no heads of the anchors given (255 filters are not 4 anchors' worth): skips
    again = build_body("tiny", 3, input_shape=(64, 64))
    report = load_weights_by_name(again, folder / "coco.keras", variant="tiny", head_anchors=4)
    assert not report.partial and sorted(n for n, _ in report.skipped) == ["output_s16",
                                                                          "output_s32"]
