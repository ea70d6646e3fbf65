"""OpenVINO IR export (float32, float16, int8 by NNCF) and runtime: checked against the Keras model
on Darknet's real tiny weights and the shared photographs; an IR without yolo3's facts; bad input."""
from __future__ import annotations

import json
import sys

import numpy as np
import pytest
from locations import SHARED, shared

PHOTOS = sorted((SHARED / "images").glob("*.jpg"))
INPUT = (256, 320)  # not square: the IR keeps (h, w)


def rel_err(a, ref):
    a, ref = np.asarray(a, np.float64), np.asarray(ref, np.float64)
    return float(np.linalg.norm(a - ref) / np.linalg.norm(ref))


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    """Darknet's real COCO yolov3-tiny converted, its float32 detector at 256x320, the photos
    letterboxed, and a float32 IR of it (the command line's export)."""
    from yolo3.checkpoint.darknet_convert import convert
    from yolo3.cli.export import main
    from yolo3.data.images import load_image
    from yolo3.inference.detector import YOLO
    shared("images")  # the calibration and the photos: skipped, with the reason, without them
    root = tmp_path_factory.mktemp("openvino")
    convert(shared("darknet", "yolov3-tiny.cfg"), shared("darknet", "yolov3-tiny.weights"),
            root / "tiny.keras", progress=False)
    det = YOLO(root / "tiny.keras", precision="float32", score=0.25, input_size=INPUT)
    common = ["--model", str(root / "tiny.keras"), "--input-size", *map(str, INPUT),
              "--score", "0.25", "--calibration", str(SHARED / "images")]
    assert main(common + ["--openvino", str(root / "ir")]) == 0
    images = [load_image(p) for p in PHOTOS]
    x = np.stack([np.round(det.preprocess(im) * 255) / 255 for im in images]).astype(np.float32)
    return root, det, images, x


@pytest.fixture(scope="module")
def tiny_int8(tiny):
    """``tiny`` with an int8 IR beside the float one (``ir8``, NNCF calibrated on the photos)."""
    from yolo3.cli.export import main
    root = tiny[0]
    assert main(["--model", str(root / "tiny.keras"), "--input-size", *map(str, INPUT),
                 "--score", "0.25", "--calibration", str(SHARED / "images"),
                 "--openvino", str(root / "ir8"), "--quantize", "int8"]) == 0
    return tiny


def test_float_ir_carries_its_facts_and_computes_what_keras_computes(tiny):
    from yolo3.checkpoint.metadata import read_info
    from yolo3.inference.detector import YOLO
    from yolo3.inference.exported import ExportedDetector
    root, det, images, x = tiny
    for path in (root / "ir", root / "ir" / "model.xml"):  # the folder or its .xml
        info = read_info(path)
        assert info.class_names == det.class_names and tuple(info.input_size) == INPUT
        assert info.export["format"] == "openvino" and info.export["batch"] == 1
    ir = YOLO(root / "ir", precision="float32", score=0.25)  # YOLO(...) takes an IR
    assert isinstance(ir, ExportedDetector) and ir.engine.engine == "openvino"
    assert ir.input_hw == INPUT and ir.runner.input_dtype == np.uint8
    assert max(rel_err(a, b) for a, b in zip(ir.raw_outputs(x), det.forward(x))) <= 1e-4
    found = 0
    # the IR takes 8-bit pixels: images already at the input size (the letterboxed photos in 8
    # bits) reach both networks unchanged
    for image in np.round(x * 255).astype(np.uint8):
        (kb, ks, kc), (b, s, c) = det.detect(image), ir.detect(image)
        assert np.array_equal(np.sort(c), np.sort(kc))
        np.testing.assert_allclose(np.sort(s), np.sort(ks), atol=1e-3)
        order_k, order = np.argsort(-ks), np.argsort(-s)
        np.testing.assert_allclose(b[order], kb[order_k], atol=0.05)
        found += len(kb)
    assert found >= 10
    # the decoding inside the IR (fixed batch 1) gives the host's detections
    out = ir.runner.run(ir._to_input(x[:1]))
    assert int(out["count"][0]) == len(ir.detect_batch([np.round(x[0] * 255).astype(np.uint8)])[0][0])


def test_machine_precision_stays_close_to_keras(tiny):
    """OpenVINO's precision for the machine (bfloat16 where native): raw maps within 1e-2."""
    from yolo3.inference.detector import YOLO
    root, det, images, x = tiny
    auto = YOLO(root / "ir", score=0.25)
    limit = 1e-2 if auto.precision == "bfloat16" else 1e-4
    assert max(rel_err(a, b) for a, b in zip(auto.raw_outputs(x), det.forward(x))) <= limit


@pytest.mark.slow  # CI runs it (.ci/run); the int8 calibration takes about 30 s on 2 cores
def test_int8_stays_close_to_keras(tiny_int8):
    """int8: raw maps within 0.25 (the export check's limit), the same objects found on the
    photos, a third of the size."""
    from yolo3.inference.detector import YOLO
    from yolo3.ops.boxes import iou_xyxy
    root, det, images, x = tiny_int8
    int8 = YOLO(root / "ir8", score=0.2)
    assert int8.precision == "int8" and int8.info.export["quantize"] == "int8"
    assert max(rel_err(a, b) for a, b in zip(int8.raw_outputs(x), det.forward(x))) <= 0.25
    size = sum(f.stat().st_size for f in (root / "ir").iterdir())
    assert sum(f.stat().st_size for f in (root / "ir8").iterdir()) <= 0.35 * size
    matched = total = 0
    for image in images:
        (kb, ks, kc), (b, _, c) = det.detect(image), int8.detect(image)
        for box, cls in zip(kb[ks >= 0.4], kc[ks >= 0.4]):
            total += 1
            same = c == cls
            matched += bool(same.any() and iou_xyxy(box[None], b[same]).max() >= 0.7)
    assert total >= 5 and matched >= total - 1, (matched, total)


@pytest.mark.slow  # CI runs it (.ci/run): the int8 IR of test_int8_stays_close_to_keras
def test_int8_leaves_the_decoding_in_float(tiny_int8):
    import openvino as ov

    from yolo3.export.formats import _decoding_ops
    root = tiny_int8[0]
    model = ov.Core().read_model(str(root / "ir8" / "model.xml"))
    quantized = {op.get_friendly_name() for op in model.get_ordered_ops()
                 if op.get_type_name() == "FakeQuantize"}
    assert len(quantized) >= 10  # every convolution's inputs
    float_model = ov.Core().read_model(str(root / "ir" / "model.xml"))
    decoding = set(_decoding_ops(float_model))
    assert decoding and not any(name.split("/fq_")[0] in decoding for name in quantized)


def test_raw_ir_takes_any_batch_and_runs_folders_at_throughput(tiny, tmp_path):
    from yolo3.cli.export import main
    from yolo3.inference.detector import YOLO
    root, det, images, x = tiny
    assert main(["--model", str(root / "tiny.keras"), "--input-size", *map(str, INPUT),
                 "--openvino", str(tmp_path / "raw"), "--raw", "--openvino-batch", "0",
                 "--openvino-input", "float32"]) == 0
    raw = YOLO(tmp_path / "raw", precision="float32", score=0.25)
    assert raw.batch is None and raw.runner.input_shape[0] == -1
    one = [raw.detect(im) for im in images]
    fixed = YOLO(root / "ir", precision="float32", score=0.25)  # batch 1, uint8 input
    for one, many in ((one, raw.detect_batch(images)),  # asynchronous requests, in order
                      (one, list(raw.detect_stream(iter(images)))),  # read as they come
                      (one, list(raw.detect_stream(iter(images), batch_size=2))),  # pairs, one
                      ([fixed.detect(im) for im in images],  # its own batch of 1
                       list(fixed.detect_stream(iter(images), batch_size=2)))):
        assert len(many) == len(images)
        for (b1, s1, c1), (b2, s2, c2) in zip(one, many):
            assert len(s1) > 0
            np.testing.assert_allclose(b1, b2, atol=1e-3)
            np.testing.assert_allclose(s1, s2, atol=1e-6)
            assert np.array_equal(c1, c2)


def test_a_stream_left_early_finishes_its_requests(tiny, tmp_path):
    from yolo3.inference.runners import OpenVINORunner
    root, det, images, x = tiny
    runner = OpenVINORunner(str(root / "ir"), precision="float32")
    pixels = [np.round(x[i:i + 1] * 255).astype(np.uint8) for i in range(len(x))]  # uint8 input
    stream = runner.stream(iter(pixels * 3))
    first = next(stream)  # the others are in flight
    stream.close()
    assert set(first) == set(runner.run(pixels[0]))
    again = list(runner.stream(iter(pixels)))  # a new stream on the same compiled model
    assert len(again) == len(pixels)
    for one, result in zip(pixels, again):
        for name, value in runner.run(one).items():
            np.testing.assert_allclose(result[name], value, rtol=1e-4, atol=1e-4)


def test_an_ir_without_yolo3_facts_runs_with_anchors_and_classes(tiny, tmp_path, capsys):
    """An IR made by other tools (NCHW input, NCHW outputs under other names) is refused with the
    reason, and runs like the model it came from when the anchors and classes are given."""
    import openvino as ov
    import tensorflow as tf

    from yolo3.cli import main
    from yolo3.ops.anchors import write_anchors
    root, det, images, x = tiny

    def nchw(images_nchw):
        outs = det.raw_outputs(tf.transpose(images_nchw, [0, 2, 3, 1]))
        return {f"conv_{i}": tf.transpose(o, [0, 3, 1, 2]) for i, o in enumerate(reversed(outs))}
    function = tf.function(nchw, input_signature=[tf.TensorSpec([1, 3, *INPUT], tf.float32)])
    (tmp_path / "foreign").mkdir()
    ov.save_model(ov.convert_model(function), str(tmp_path / "foreign" / "net.xml"))
    write_anchors(tmp_path / "anchors.txt", det.anchors)
    # Darknet's tiny masks (3,4,5 / 1,2,3), not the default rule's: the converter's side file
    (tmp_path / "foreign" / "net.masks.json").write_text(json.dumps({"masks": det.anchor_mask}))
    (tmp_path / "classes.txt").write_text("\n".join(det.class_names) + "\n")
    common = ["detect", "--model", str(tmp_path / "foreign" / "net.xml"), "--input",
              str(PHOTOS[0]), "--no-draw", "--score", "0.25"]
    assert main(common + ["--output", str(tmp_path / "o1")]) == 2
    err = capsys.readouterr().err
    assert "carries no yolo3 info" in err and "anchors and classes" in err
    assert "Traceback" not in err
    assert main(common + ["--output", str(tmp_path / "o2"), "--json", str(tmp_path / "d.json"),
                          "--anchors", str(tmp_path / "anchors.txt"), "--classes",
                          str(tmp_path / "classes.txt"), "--precision", "float32"]) == 0
    got = json.loads((tmp_path / "d.json").read_text())[0]
    boxes, scores, classes = det.detect(images[0])
    assert sorted(got["names"]) == sorted(det.class_names[c] for c in classes)
    np.testing.assert_allclose(sorted(got["scores"]), sorted(scores), atol=2e-3)


def test_bad_ir_files_are_named(tiny, tmp_path, capsys):
    import shutil

    from yolo3.cli import main
    root = tiny[0]
    shutil.copytree(root / "ir", tmp_path / "cut")
    data = (tmp_path / "cut" / "model.bin").read_bytes()
    (tmp_path / "cut" / "model.bin").write_bytes(data[: len(data) // 2])  # truncated weights
    shutil.copytree(root / "ir", tmp_path / "bad")
    text = (tmp_path / "bad" / "model.xml").read_text()
    (tmp_path / "bad" / "model.xml").write_text(text[: len(text) // 2])  # malformed XML
    for model, message in [(tmp_path / "cut", "Incorrect weights in bin file"),
                           (tmp_path / "bad" / "model.xml", "malformed XML")]:
        assert main(["detect", "--model", str(model), "--input", str(PHOTOS[0]), "--output",
                     str(tmp_path / "o"), "--no-draw"]) == 2
        err = capsys.readouterr().err
        assert "model." in err and message in err and "Traceback" not in err
    bad = tmp_path / "bad" / "model.xml"
    from yolo3.checkpoint.metadata import read_info
    from yolo3.core.errors import FileFormatError
    with pytest.raises(FileFormatError, match=r"model\.xml:\d+"):  # the line of the damage
        read_info(bad)


@pytest.mark.parametrize("argv, message", [
    (["--openvino", "{root}"], "--openvino"),  # the output folder holds the input model
    (["--openvino", "{tmp}/o", "--openvino-batch", "0"], "needs --raw"),
    (["--openvino", "{tmp}/o", "--quantize", "int8"], "needs --calibration"),
])
def test_bad_openvino_export_arguments(tiny, tmp_path, capsys, argv, message):
    from yolo3.cli.export import main
    root = tiny[0]
    args = [a.format(tmp=tmp_path, root=root) for a in argv]
    assert main(["--model", str(root / "tiny.keras"), *args]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err
    assert not (tmp_path / "o").exists() and (root / "tiny.keras").is_file()


def test_missing_openvino_or_nncf_is_named_with_its_install_command(tiny, tmp_path, capsys,
                                                                     monkeypatch):
    from yolo3.cli import main
    root = tiny[0]
    monkeypatch.setitem(sys.modules, "nncf", None)  # as if not installed
    assert main(["export", "--model", str(root / "tiny.keras"), "--openvino", str(tmp_path / "q"),
                 "--quantize", "int8", "--calibration", str(SHARED / "images")]) == 2
    assert "pip install 'yolo3[openvino]'" in capsys.readouterr().err
    monkeypatch.setitem(sys.modules, "openvino", None)
    assert main(["export", "--model", str(root / "tiny.keras"), "--openvino",
                 str(tmp_path / "f")]) == 2
    assert "pip install 'yolo3[openvino]'" in capsys.readouterr().err
    assert main(["detect", "--model", str(root / "ir"), "--input", str(PHOTOS[0]), "--output",
                 str(tmp_path / "o"), "--no-draw"]) == 2
    err = capsys.readouterr().err
    assert "pip install 'yolo3[openvino]'" in err and "Traceback" not in err
    assert not (tmp_path / "q").exists() and not (tmp_path / "f").exists()


@pytest.mark.parametrize("engine", ["keras", "onnxruntime"])
def test_an_exported_model_refuses_another_engine(tiny, tmp_path, capsys, engine):
    from yolo3.cli import main
    root = tiny[0]
    assert main(["detect", "--model", str(root / "ir"), "--input", str(PHOTOS[0]), "--output",
                 str(tmp_path / "o"), "--no-draw", "--engine", engine]) == 2
    err = capsys.readouterr().err
    assert "runs on its own runtime (openvino)" in err and "Traceback" not in err
