"""The anchor-free variants through every tool: training writes a model that carries its head
(no anchors), and detection, evaluation, export (ONNX, TFLite; OpenVINO as an engine), loading and fine-tuning
from Darknet weights take it; the anchor head's settings are named as unused; Darknet export is
refused with the file and the reason."""
from __future__ import annotations

import json
import os

import numpy as np
import pytest

from yolo3.checkpoint.metadata import read_info
from yolo3.config.specs import get_spec
from yolo3.core.errors import FileFormatError
from yolo3.data.synthetic import make_synthetic_dataset
from yolo3.ops.anchors import write_anchors

TINY_AF = get_spec("tiny-af")


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """A 1-epoch tiny-af model at 64 px."""
    from yolo3.cli.train import main
    root = tmp_path_factory.mktemp("anchor_free")
    _, classes = make_synthetic_dataset(str(root / "ds"), 10, (96, 96), val_fraction=0.2)
    out = root / "run"
    assert main(["--annotations", str(root / "ds" / "train.txt"), "--val-annotations",
                 str(root / "ds" / "val.txt"), "--classes", classes, "--variant", "tiny-af",
                 "--input-size", "64", "--batch-size", "2", "--epochs", "1", "--output", str(out),
                 "--quiet"]) == 0
    return root, out


@pytest.mark.slow  # CI runs it (.ci/run); about 15 s on 2 cores, kept out of the default 15 minutes
def test_training_writes_a_model_that_carries_its_head(trained):
    root, out = trained
    assert not (out / "anchors.txt").exists() and (out / "classes.txt").exists()
    for name in ("final.keras", "best.keras", "last.keras"):
        info = read_info(out / name)
        assert info.variant == "tiny-af" and info.head == TINY_AF.head
        assert info.anchors.shape == (0, 2) and info.masks == [] and info.strides == [32, 16, 8]
        assert info.class_names == ["circle", "square", "triangle"]
    history = (out / "history.csv").read_text().splitlines()
    assert len(history) == 2 and "mAP50_95" in history[0]


@pytest.mark.slow  # CI runs it (.ci/run); the trained run it needs: about 16 s on 2 cores, kept out of the default 15 minutes
def test_load_body_gives_the_head_and_refuses_anchors(trained, tmp_path):
    from yolo3.checkpoint.loading import load_body
    root, out = trained
    body, info = load_body(out / "final.keras")
    assert info.head == TINY_AF.head and info.num_classes == 3
    assert [tuple(o.shape[1:]) for o in body.outputs] == [(2, 2, 35), (4, 4, 35), (8, 8, 35)]
    write_anchors(tmp_path / "anchors.txt", get_spec("tiny").default_anchors())
    with pytest.raises(FileFormatError, match="final.keras: has an anchor-free head: it takes no "
                                              "anchors"):
        load_body(out / "final.keras", anchors_path=tmp_path / "anchors.txt")
    # a .weights.h5 needs the variant and the classes (no anchors)
    weights, info2 = load_body(out / "final.weights.h5", variant="tiny-af")
    assert info2.head == TINY_AF.head and info2.class_names == info.class_names
    for a, b in zip(body.get_weights(), weights.get_weights()):
        np.testing.assert_array_equal(a, b)


@pytest.mark.slow  # CI runs it (.ci/run); about 18 s on 2 cores, kept out of the default 15 minutes
def test_detect_and_evaluate_on_every_engine(trained, tmp_path, capsys):
    from yolo3.cli import main
    from yolo3.inference.detector import load_detector
    root, out = trained
    images = sorted((root / "ds" / "images").iterdir())[:3]
    from PIL import Image
    arrays = [np.asarray(Image.open(p).convert("RGB")) for p in images]
    results = {}
    for engine in ("keras", "onnxruntime", "openvino"):
        detector = load_detector(out / "final.keras", score=0.01, engine=engine,
                                 precision="float32")
        assert detector.engine.engine == engine, detector.engine.summary()
        results[engine] = detector.detect_batch(arrays)
    for engine in ("onnxruntime", "openvino"):
        for (b1, s1, c1), (b2, s2, c2) in zip(results["keras"], results[engine]):
            n = min(len(s1), len(s2), 10)
            assert n > 0
            np.testing.assert_allclose(s2[:n], s1[:n], atol=1e-4)
            np.testing.assert_allclose(b2[:n], b1[:n], atol=1e-2)
    val = root / "ds" / "val.txt"
    assert main(["evaluate", "--annotations", str(val), "--model", str(out / "final.keras"),
                 "--out", str(tmp_path / "e.json"), "--no-plot", "--quiet"]) == 0
    assert "mAP50" in json.loads((tmp_path / "e.json").read_text())
    assert main(["detect", "--model", str(out / "final.keras"), "--input", str(images[0]),
                 "--output", str(tmp_path / "d"), "--no-draw", "--json", str(tmp_path / "d.json"),
                 "--score", "0.01", "--quiet"]) == 0
    assert json.loads((tmp_path / "d.json").read_text())


@pytest.mark.slow  # CI runs it (.ci/run); about 20 s on 2 cores, kept out of the default 15 minutes
def test_exports_check_their_raw_maps_and_decoding(trained, tmp_path, capsys):
    from yolo3.cli import main
    from yolo3.inference.exported import ExportedDetector
    _, out = trained
    model = str(out / "final.keras")
    # OpenVINO: the engine test above converts and checks it (the same export code)
    assert main(["export", "--model", model, "--score", "0.01", "--onnx", str(tmp_path / "m.onnx"),
                 "--tflite", str(tmp_path / "m.tflite")]) == 0
    printed = capsys.readouterr().err  # the CLI's progress lines
    assert printed.count("raw maps within") == 2 and "in-model decoding agrees" in printed
    for path in ("m.onnx", "m.tflite"):
        info = (ExportedDetector(tmp_path / path).info if path != "m.tflite"
                else __import__("yolo3.checkpoint.tflite_metadata", fromlist=["x"]).read_tflite_info(
                    str(tmp_path / path)))
        assert info.head == TINY_AF.head and info.export["format"]


@pytest.mark.slow  # CI runs it (.ci/run); the trained run it needs: about 16 s on 2 cores, kept out of the default 15 minutes
def test_darknet_export_is_refused_naming_the_file(trained, tmp_path, capsys):
    from yolo3.cli.convert import main
    _, out = trained
    rc = main([str(out / "final.keras"), str(tmp_path / "o.cfg"), str(tmp_path / "o.weights")])
    err = capsys.readouterr().err
    assert rc == 2 and "Traceback" not in err
    assert f"{out / 'final.keras'}: a tiny-af body has an anchor-free head" in err
    assert not os.listdir(tmp_path)


def test_anchor_head_settings_are_named_as_unused(tmp_path, capsys):
    from yolo3.config.train_config import TrainConfig, cautions
    base = dict(annotations="a.txt", classes="c.txt", output=str(tmp_path), variant="tiny-af")
    assert cautions(TrainConfig(**base)) == []
    found = cautions(TrainConfig(**base, anchors="auto", assign_iou=1.0, objectness="one"))
    assert len(found) == 1
    assert found[0].settings == ("anchors", "objectness", "assign_iou", "variant")
    assert "anchor-free head; these settings are the anchor head's and not used" in found[0].message
    assert cautions(TrainConfig(**dict(base, variant="tiny"), assign_iou=1.0)) == []


def test_fine_tuning_loads_darknets_tiny_weights_into_all_but_the_head(darknet_cfg_dir, tmp_path):
    from yolo3.checkpoint.darknet_convert import convert
    from yolo3.checkpoint.weights import load_weights_by_name
    from yolo3.modeling.bodies import build_spec_body
    cfg, weights = darknet_cfg_dir / "yolov3-tiny.cfg", darknet_cfg_dir / "yolov3-tiny.weights"
    convert(str(cfg), str(weights), str(tmp_path / "coco.keras"))
    body = build_spec_body(TINY_AF, 4, input_shape=(64, 64))
    report = load_weights_by_name(body, tmp_path / "coco.keras", variant="tiny-af")
    assert report.darknet_layout == "tiny"
    head = {n for n, _ in report.skipped}
    assert all(n.startswith(tuple(f"head_s{s}_{b}" for s in (32, 16, 8) for b in ("box", "cls")))
               or n.startswith(("head_s8_reduce", "head_s8_conv1")) for n in head)
    # 11 blocks (conv, bn); 3 x 10 head layers and the stride-8 branch's 2 blocks (conv, bn)
    assert len(report.loaded) == 22 and len(head) == 34
    assert report.unmapped == ["conv_15", "conv_22"]  # tiny's output convolutions
    from yolo3.modeling.bodies import build_spec_body as build
    tiny = build(get_spec("tiny"), 80, input_shape=(64, 64))
    load_weights_by_name(tiny, tmp_path / "coco.keras", variant="tiny")
    for name in report.loaded:
        for a, b in zip(body.get_layer(name).get_weights(), tiny.get_layer(name).get_weights()):
            np.testing.assert_array_equal(a, b)
