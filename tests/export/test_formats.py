"""yolo3.export.formats: SavedModel and TFLite outputs equal the Keras detector on images at the
input size; the facts every exported file carries (ONNX, OpenVINO and int8 round trips:
test_deploy.py, test_openvino.py)."""
from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf
from locations import shared

from yolo3.data.class_names import write_classes
from yolo3.ops.anchors import TINY_YOLO_ANCHORS, write_anchors

INPUT = 128


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    import keras

    from yolo3.cli.export import main
    from yolo3.modeling.bodies import build_body

    keras.utils.set_random_seed(5)
    folder = tmp_path_factory.mktemp("export")
    body = build_body("tiny", 3)
    for name in ("output_s32", "output_s16"):
        layer = body.get_layer(name)
        w, b = layer.get_weights()
        layer.set_weights([w * 8.0, b])
    body.save(folder / "final.keras")
    write_anchors(folder / "anchors.txt", TINY_YOLO_ANCHORS)
    write_classes(folder / "classes.txt", ["a", "b", "c"])
    rc = main(["--model", str(folder / "final.keras"), "--input-size", str(INPUT), "--score", "0.2",
               "--saved-model", str(folder / "saved"), "--tflite", str(folder / "model.tflite")])
    assert rc == 0
    return folder


def sample_images():
    from PIL import Image
    out = []
    for name in ("dog.jpg", "person.jpg"):
        with Image.open(shared("images", name)) as im:
            out.append(np.asarray(im.convert("RGB").resize((INPUT, INPUT))))
    out.append(np.random.default_rng(0).integers(0, 256, (INPUT, INPUT, 3), dtype=np.uint8))
    return out


def compare(result, reference, atol=1e-4):
    boxes, scores, classes = reference
    n = int(result["count"][0])
    assert n == len(boxes) > 0
    np.testing.assert_allclose(result["scores"][0, :n], scores, atol=atol)
    np.testing.assert_array_equal(result["classes"][0, :n], classes)
    np.testing.assert_allclose(result["boxes"][0, :n], boxes, atol=atol)
    assert not np.any(result["boxes"][0, n:]) and not np.any(result["scores"][0, n:])


def test_tflite_matches_keras_detector(exported):
    from yolo3.inference.detector import YOLO
    from yolo3.inference.exported import TFLiteDetector

    det = YOLO(exported / "final.keras", score=0.2, input_size=INPUT, precision="float32")
    lite = TFLiteDetector(exported / "model.tflite")
    assert lite.input_shape == (1, INPUT, INPUT, 3) and lite.input_dtype == np.uint8
    for image in sample_images():
        compare(lite.detect(image), det.detect(image))
    with pytest.raises(ValueError, match="shape"):
        lite.detect(np.zeros((INPUT, INPUT + 32, 3), np.uint8))


def test_saved_model_matches_keras_detector(exported):
    from yolo3.inference.detector import YOLO

    det = YOLO(exported / "final.keras", score=0.2, input_size=INPUT, precision="float32")
    loaded = tf.saved_model.load(str(exported / "saved"))
    images = sample_images()
    batch = loaded.signatures["serving_default"](images=tf.constant(np.stack(images)))
    floats = loaded.serve_float(tf.constant(np.stack(images).astype(np.float32) / 255.0))
    for i, image in enumerate(images):
        ref = det.detect(image)
        for res in (batch, floats):
            compare({k: v.numpy()[i:i + 1] for k, v in res.items()}, ref)


def test_saved_model_stores_each_weight_once(exported):
    """The checkpoint holds the inference body's weights once (Keras's ``track()`` would write
    each a second time, keras-team/keras#23553): its stored values number the folded body's."""
    from yolo3.inference.detector import YOLO
    det = YOLO(exported / "final.keras", input_size=INPUT, precision="float32")
    stored = sum(int(np.prod(shape)) for name, shape in
                 tf.train.list_variables(str(exported / "saved" / "variables" / "variables"))
                 if name != "_CHECKPOINTABLE_OBJECT_GRAPH")
    assert stored == det.inference_body.count_params()


def test_tflite_refuses_a_bfloat16_detector(exported, tmp_path):
    from yolo3.export import export_tflite
    from yolo3.inference.detector import YOLO

    half = YOLO(exported / "final.keras", input_size=INPUT, precision="bfloat16")
    with pytest.raises(ValueError, match="float32 detector"):
        export_tflite(half, tmp_path / "half.tflite")
    assert not (tmp_path / "half.tflite").exists()


def _full_size_images():
    from PIL import Image
    out = []
    for name in ("dog.jpg", "person.jpg"):
        with Image.open(shared("images", name)) as im:
            out.append(np.asarray(im.convert("RGB")))
    return out


def _same(got, ref, atol=1e-3):
    boxes, scores, classes = ref
    assert len(got[0]) == len(boxes) > 0
    np.testing.assert_allclose(got[1], scores, atol=1e-4)
    np.testing.assert_array_equal(got[2], classes)
    np.testing.assert_allclose(got[0], boxes, atol=atol)


def test_exported_models_letterbox_any_image_like_the_detector(exported, tmp_path):
    """SavedModel ``serve_image`` and ``TFLiteDetector.detect_image`` take images of any size and
    letterbox them with the detector's letterbox: the same detections, in the image's pixels."""
    from yolo3.export import export_tflite
    from yolo3.inference.detector import YOLO
    from yolo3.inference.exported import TFLiteDetector

    det = YOLO(exported / "final.keras", score=0.2, input_size=INPUT, precision="float32")
    loaded = tf.saved_model.load(str(exported / "saved"))
    export_tflite(det, tmp_path / "f.tflite", input_dtype="float32")
    lite = TFLiteDetector(tmp_path / "f.tflite")
    for image in _full_size_images():
        ref = det.detect(image)
        out = {k: v.numpy() for k, v in loaded.serve_image(image=tf.constant(image)).items()}
        n = int(out["count"][0])
        _same((out["boxes"][0, :n], out["scores"][0, :n], out["classes"][0, :n]), ref)
        _same(lite.detect_image(image), ref)


def test_exported_info_describes_the_export(exported):
    from yolo3.export.formats import exported_info
    from yolo3.inference.detector import YOLO
    det = YOLO(exported / "final.keras", score=0.2, input_size=INPUT, precision="float32")
    info = exported_info(det, "tflite", quantize="int8", input_dtype="uint8", batch=1)
    assert tuple(info.input_size) == (INPUT, INPUT) and info.class_names == ["a", "b", "c"]
    assert info.export == dict(format="tflite", score=0.2, iou=det.iou, max_boxes=det.max_boxes,
                               input_size=[INPUT, INPUT], quantize="int8", input_dtype="uint8",
                               batch=1)
    from yolo3.checkpoint.tflite_metadata import read_tflite_info
    written = read_tflite_info(exported / "model.tflite")
    assert written.export["format"] == "tflite" and written.class_names == ["a", "b", "c"]
    assert det.info.export is None  # the detector's own info is not changed
