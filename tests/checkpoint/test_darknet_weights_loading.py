"""Converted Darknet models (``conv_<i>`` names) loaded into yolo3 bodies by cfg index."""
from __future__ import annotations

import logging
from pathlib import Path

import keras
import numpy as np
import pytest
from darknet_helpers import keras_forward, random_images, rel_err
from locations import shared

from yolo3.checkpoint.darknet_convert import build_model, convert
from yolo3.checkpoint.weights import WeightsError, load_weights_by_name
from yolo3.cli.train import main as train_main
from yolo3.darknet.cfg import ConvSpec, parse_cfg, parse_cfg_text
from yolo3.darknet.layout import block_layer_names, body_to_cfg_index
from yolo3.darknet.random_weights import write_random_weights
from yolo3.data.synthetic import make_synthetic_dataset
from yolo3.modeling.bodies import build_body

TOLERANCE = 1e-5  # relative, per output map
CFG_FILES = {"tiny": "yolov3-tiny.cfg", "yolov3": "yolov3.cfg", "darknet53": "darknet53.cfg"}


@pytest.fixture(scope="module")
def converted(tmp_path_factory):
    """``get(kind)`` -> path of a converted random-weight ``.keras`` model (made once per module)."""
    darknet = shared("darknet")
    root = tmp_path_factory.mktemp("converted")
    cache = {}

    def get(kind: str) -> Path:
        if kind not in cache:
            weights = root / f"{kind}.weights"
            write_random_weights(darknet / CFG_FILES[kind], weights, seed=7)
            cache[kind] = convert(darknet / CFG_FILES[kind], weights, root / f"{kind}.keras",
                                  progress=False).out_path
            weights.unlink()  # the full YOLOv3 is 248 MB
        return cache[kind]

    return get


def _conv_weights(model, conv: str, bn):
    return model.get_layer(conv).get_weights() + (model.get_layer(bn).get_weights() if bn else [])


def _assert_same_weights_except(body, source, kind, except_blocks=()):
    """Every mapped block of ``body`` holds the converted ``conv_<i>``/``bn_<i>`` weights."""
    names = {l.name for l in body.layers}
    checked = 0
    for block, index in body_to_cfg_index(kind).items():
        if block in except_blocks:
            continue
        conv, bn = block_layer_names(block, names)
        ours = _conv_weights(body, conv, bn)
        theirs = _conv_weights(source, f"conv_{index}", f"bn_{index}" if bn else None)
        for a, b in zip(ours, theirs, strict=True):
            np.testing.assert_array_equal(a, b)
        checked += 1
    assert checked == len(body_to_cfg_index(kind)) - len(except_blocks)


def _assert_same_outputs(body, source, size):
    images = random_images(np.random.default_rng(3), 2, size, size)
    ours, theirs = keras_forward(body, images), keras_forward(source, images)
    assert [o.shape for o in ours] == [t.shape for t in theirs]
    errors = [rel_err(o, t) for o, t in zip(ours, theirs)]
    assert max(errors) <= TOLERANCE, errors
    assert rel_err(theirs[0][0], theirs[0][1]) > 1e-2  # outputs depend on the input


@pytest.mark.parametrize("kind", ["yolov3", "tiny", "darknet53"])
def test_mapping_points_at_the_reference_cfg_convs(darknet_cfg_dir, kind):
    cfg = parse_cfg(darknet_cfg_dir / CFG_FILES[kind])
    mapping = body_to_cfg_index(kind)
    assert sorted(mapping.values()) == [l.index for l in cfg.convs()]
    for block, index in mapping.items():
        spec = cfg.layers[index].spec
        assert isinstance(spec, ConvSpec)
        assert spec.batch_normalize == (not block.startswith("output_")), block
    if kind != "darknet53":
        outputs = {mapping[b] for b in mapping if b.startswith("output_")}
        assert outputs == {y.index - 1 for y in cfg.yolo_layers()}


def test_darknet53_is_the_yolov3_backbone():
    yolov3, backbone = body_to_cfg_index("yolov3"), body_to_cfg_index("darknet53")
    assert backbone == {b: i for b, i in yolov3.items() if b.startswith("backbone_")}
    with pytest.raises(Exception, match="unknown layout"):
        body_to_cfg_index("spp")


def test_tiny_80_classes_loads_everything(converted):
    source = keras.models.load_model(converted("tiny"), compile=False)
    body = build_body("tiny", 80)
    report = load_weights_by_name(body, converted("tiny"), verbose=False)
    assert report.skipped == [] and report.unmapped == []
    assert report.darknet_layout == "tiny" and len(report.loaded) == 13 + 11  # convs + bns
    _assert_same_outputs(body, source, 160)


def test_tiny_other_class_count_skips_outputs(converted, caplog):
    source = keras.models.load_model(converted("tiny"), compile=False)
    body = build_body("tiny", 3, input_shape=(96, 96))
    with caplog.at_level(logging.INFO, logger="yolo3"):
        report = load_weights_by_name(body, converted("tiny"))
    assert sorted(n for n, _ in report.skipped) == ["output_s16", "output_s32"]
    assert all("shape" in reason for _, reason in report.skipped)
    _assert_same_weights_except(body, source, "tiny", ("output_s16", "output_s32"))
    out = caplog.text
    assert "skipped output_s32" in out and "skipped output_s16" in out and "tiny cfg layout" in out


def test_wrong_or_unknown_layout_is_refused(converted, tmp_path):
    with pytest.raises(WeightsError, match="tiny cfg layout does not fit a yolov3 body"):
        load_weights_by_name(build_body("yolov3", 80, input_shape=(64, 64)), converted("tiny"))
    odd = build_model(parse_cfg_text("[net]\nchannels=3\n" + "[convolutional]\nbatch_normalize=1\n"
                                     "filters=8\nsize=3\nstride=1\npad=1\nactivation=leaky\n" * 2))
    odd.save(tmp_path / "odd.keras")
    with pytest.raises(WeightsError, match=r"odd.keras: .*follow none of"):
        load_weights_by_name(build_body("tiny", 80, input_shape=(64, 64)), tmp_path / "odd.keras")
    with pytest.raises(WeightsError, match="only onto a yolo3 body"):
        load_weights_by_name(keras.Sequential([keras.Input((4,)), keras.layers.Dense(2)]),
                             converted("tiny"))


@pytest.mark.slow  # writes, converts and reloads the full 248 MB YOLOv3 (about 20 s)
def test_yolov3_loads_and_other_class_count_skips_outputs(converted):
    path = converted("yolov3")
    source = keras.models.load_model(path, compile=False)
    body = build_body("yolov3", 80)
    report = load_weights_by_name(body, path, verbose=False)
    assert report.skipped == [] and report.unmapped == [] and report.darknet_layout == "yolov3"
    _assert_same_outputs(body, source, 128)
    del body
    voc = build_body("yolov3", 20, input_shape=(128, 128))
    report = load_weights_by_name(voc, path, verbose=False)
    outputs = ("output_s32", "output_s16", "output_s8")
    assert sorted(n for n, _ in report.skipped) == sorted(outputs)
    _assert_same_weights_except(voc, source, "yolov3", outputs)


@pytest.mark.slow
def test_darknet53_backbone_loads_into_yolov3(converted):
    path = converted("darknet53")
    source = keras.models.load_model(path, compile=False)
    body = build_body("yolov3", 20, input_shape=(128, 128))
    report = load_weights_by_name(body, path, verbose=False)
    assert report.darknet_layout == "darknet53" and report.unmapped == []
    assert {n for n, _ in report.skipped} == {l.name for l in body.layers if l.weights and
                                              not l.name.startswith("backbone_")}
    heads = {b for b in body_to_cfg_index("yolov3") if not b.startswith("backbone_")}
    _assert_same_weights_except(body, source, "yolov3", heads)


@pytest.mark.slow  # CI runs it (.ci/run); about 12 s on 2 cores, kept out of the default 15 minutes
def test_train_cli_reports_partly_loaded_outputs(converted, tmp_path, capsys):
    d = tmp_path / "ds"
    _, classes = make_synthetic_dataset(str(d), 4, (64, 64), val_fraction=0.5)
    rc = train_main(["--annotations", str(d / "train.txt"), "--val-annotations", str(d / "val.txt"),
                     "--classes", classes, "--variant", "tiny", "--input-size", "64",
                     "--batch-size", "2", "--epochs", "1", "--steps-per-epoch", "1",
                     "--validation-steps", "1", "--weights", str(converted("tiny")),
                     "--output", str(tmp_path / "out"), "--no-augment"])
    assert rc == 0
    out = capsys.readouterr().out
    assert "converted Darknet model, mapped by the tiny cfg layout" in out
    # COCO's 80-class heads lend their box and objectness channels (--no-head-transfer: skipped,
    # tests/training/test_train.py)
    assert ("2 output layers of another class count with their box and objectness channels"
            in out) and "skipped output_s32" not in out
