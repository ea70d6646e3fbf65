"""keras-yolo3 users move over unchanged: its yolo3.model contracts (yolo3.utils: test_utils.py),
YOLO's keyword arguments, detect_video, and its weight files (Keras 2 HDF5, written here with
h5py)."""
from __future__ import annotations

import argparse
import logging
import os

import numpy as np
import pytest
import tensorflow as tf
from keras_yolo3_reference import (
    layer_counts,
    outputs,
    randomise,
    reference_body,
    rel_err,
    write_keras2_h5,
)
from locations import shared
from PIL import Image

from yolo3.config.loss_options import LossOptions
from yolo3.data.class_names import write_classes
from yolo3.modeling.bodies import build_spec_body
from yolo3.ops.anchors import TINY_YOLO_ANCHORS, YOLO_ANCHORS, write_anchors

# -- yolo3.model contracts ------------------------------------------------------------------------

def _logit(p):
    return np.log(p / (1 - p))


def _plant(out, cell, k, box_rel, input_hw, anchor, cls, score=0.95):
    gh, gw = out.shape[:2]
    j, i = cell
    out[j, i, k, 0] = _logit(box_rel[0] * gw - i)
    out[j, i, k, 1] = _logit(box_rel[1] * gh - j)
    out[j, i, k, 2] = np.log(box_rel[2] * input_hw[1] / anchor[0])
    out[j, i, k, 3] = np.log(box_rel[3] * input_hw[0] / anchor[1])
    out[j, i, k, 4] = _logit(score)
    out[j, i, k, 5 + cls] = 12.0


def test_yolo_eval_is_keras_yolo3s_one_image_y_first_per_class():
    from yolo3.model import yolo_eval
    hw, anchors = (64, 64), TINY_YOLO_ANCHORS
    out32 = np.full((1, 2, 2, 3, 7), -12.0, np.float32)
    out16 = np.full((1, 4, 4, 3, 7), -12.0, np.float32)
    # keras-yolo3's tiny masks: stride 16 uses anchors 1, 2, 3 (slot 0 is anchor 1)
    _plant(out16[0], (1, 1), 0, (0.3, 0.35, 23 / 64, 27 / 64), hw, anchors[1], 0, 0.9)
    _plant(out16[0], (2, 2), 1, (0.6, 0.6, 0.4, 0.5), hw, anchors[2], 0, 0.8)
    _plant(out32[0], (0, 1), 2, (0.7, 0.3, 0.5, 0.6), hw, anchors[5], 1, 0.95)
    feats = [tf.constant(out32.reshape(1, 2, 2, 21)), tf.constant(out16.reshape(1, 4, 4, 21))]
    boxes, scores, classes = yolo_eval(feats, anchors, 2, tf.constant([128, 256]))
    assert boxes.shape == (3, 4) and scores.shape == (3,) and classes.numpy().tolist() == [0, 0, 1]
    # image 128x256 into 64x64: scale 0.25, 16 rows of padding top and bottom
    y1, x1, y2, x2 = boxes.numpy()[0]
    np.testing.assert_allclose([(x1 + x2) / 2, (y1 + y2) / 2], [0.3 * 64 / .25, (0.35 * 64 - 16) / .25],
                               atol=0.05)
    np.testing.assert_allclose([x2 - x1, y2 - y1], [23 / .25, 27 / .25], atol=0.05)
    one = yolo_eval(feats, anchors, 2, tf.constant([128, 256]), max_boxes=1, score_threshold=.5)
    assert one[2].numpy().tolist() == [0, 1]  # max_boxes per class
    with pytest.raises(TypeError):
        yolo_eval(feats, anchors, 2, tf.constant([128, 256]), 20, .6, .5, [[3, 4, 5], [0, 1, 2]])


def test_correct_boxes_and_boxes_and_scores_are_y_first():
    from yolo3.model import yolo_boxes_and_scores, yolo_correct_boxes
    from yolo3.ops.decode import correct_boxes
    rng = np.random.default_rng(0)
    xy, wh = rng.uniform(0, 1, (1, 3, 3, 3, 2)), rng.uniform(0.1, 0.5, (1, 3, 3, 3, 2))
    got = yolo_correct_boxes(xy, wh, (96, 96), (200, 300)).numpy()
    np.testing.assert_allclose(got, correct_boxes(xy, wh, (96, 96), (200, 300)).numpy()[..., [1, 0, 3, 2]])
    feats = rng.normal(size=(2, 3, 3, 21)).astype(np.float32)
    b, s = yolo_boxes_and_scores(feats, YOLO_ANCHORS[6:], 2, (96, 96), (200, 300))
    assert b.shape == (2 * 27, 4) and s.shape == (2 * 27, 2)


def test_yolo_loss_signature_masks_and_print(capfd):
    from yolo3.model import preprocess_true_boxes, yolo_loss
    from yolo3.modeling.loss import yolo_loss as project_loss
    boxes = np.array([[[8, 8, 30, 34, 1]], [[0, 0, 0, 0, 0]]], np.float32)
    y_true = preprocess_true_boxes(boxes, (64, 64), TINY_YOLO_ANCHORS, 2)
    assert [y.shape for y in y_true] == [(2, 2, 2, 3, 7), (2, 4, 4, 3, 7)]
    # the 22x26 box's best anchor is 1: keras-yolo3's tiny masks put it on stride 16, slot 0
    assert y_true[1][0, ..., 0, 4].sum() == 1 and y_true[0][..., 4].sum() == 0
    outputs_ = [np.random.default_rng(1).normal(size=(2, g, g, 21)).astype(np.float32) for g in (2, 4)]
    value = yolo_loss([*outputs_, *y_true], TINY_YOLO_ANCHORS, 2, 0.5, True)
    assert "loss:" in capfd.readouterr().err
    want = project_loss([*outputs_, *y_true], TINY_YOLO_ANCHORS, 2, LossOptions(ignore_iou=0.5),
                        anchor_mask=[[3, 4, 5], [1, 2, 3]])
    assert float(value) == pytest.approx(float(want), rel=1e-6)
    with pytest.raises(TypeError, match="is yolo3.model.yolo_loss"):
        project_loss([*outputs_, *y_true], TINY_YOLO_ANCHORS, 2, 0.5)
    with pytest.raises(TypeError):
        yolo_loss([*outputs_, *y_true], TINY_YOLO_ANCHORS, 2, 0.5, False, [[3, 4, 5], [0, 1, 2]])


# -- a keras-yolo3 user's train.py, as its README flow goes ---------------------------------------

def test_keras_yolo3_train_flow_runs(tmp_path, line_image):
    import keras
    from keras.layers import Input, Lambda
    from keras.models import Model
    from keras.optimizers import Adam

    from yolo3.model import preprocess_true_boxes, tiny_yolo_body, yolo_loss
    from yolo3.utils import get_random_data

    annotation_lines = [f"{line_image} 40,30,100,90,1"] * 4
    anchors, num_classes, input_shape = TINY_YOLO_ANCHORS, 2, (64, 64)

    def create_tiny_model():
        keras.backend.clear_session()
        image_input = Input(shape=(None, None, 3))
        h, w = input_shape
        num_anchors = len(anchors)
        y_true = [Input(shape=(h // {0: 32, 1: 16}[l], w // {0: 32, 1: 16}[l], num_anchors // 2,
                               num_classes + 5)) for l in range(2)]
        model_body = tiny_yolo_body(image_input, num_anchors // 2, num_classes)
        model_loss = Lambda(yolo_loss, output_shape=(1,), name="yolo_loss",
                            arguments={"anchors": anchors, "num_classes": num_classes,
                                       "ignore_thresh": 0.7})([*model_body.output, *y_true])
        return Model([model_body.input, *y_true], model_loss), model_body

    def data_generator(lines, batch_size):
        i = 0
        while True:
            image_data, box_data = [], []
            for _ in range(batch_size):
                image, box = get_random_data(lines[i], input_shape, random=True)
                image_data.append(image)
                box_data.append(box)
                i = (i + 1) % len(lines)
            y_true = preprocess_true_boxes(np.array(box_data), input_shape, anchors, num_classes)
            yield (np.array(image_data), *y_true), np.zeros(batch_size)

    model, body = create_tiny_model()
    model.compile(optimizer=Adam(learning_rate=1e-3), loss={"yolo_loss": lambda y_true, y_pred: y_pred})
    before = body.get_layer("output_s32").get_weights()[0].copy()
    history = model.fit(data_generator(annotation_lines, 2), steps_per_epoch=3, epochs=1, verbose=0)
    assert np.isfinite(history.history["loss"][0])
    assert not np.array_equal(before, body.get_layer("output_s32").get_weights()[0])
    # its last line (with Keras 3's suffix); the detector reads the training model's weights
    model.save_weights(tmp_path / "trained_weights_final.weights.h5")
    from yolo3.inference.detector import YOLO
    write_anchors(tmp_path / "anchors.txt", anchors)
    write_classes(tmp_path / "classes.txt", ["a", "b"])
    det = YOLO(tmp_path / "trained_weights_final.weights.h5", tmp_path / "anchors.txt",
               tmp_path / "classes.txt", input_size=64, precision="float32")
    x = np.random.default_rng(0).uniform(0, 1, (1, 64, 64, 3)).astype(np.float32)
    for ours, theirs in zip(det.forward(x), outputs(body, x)):
        assert rel_err(ours, theirs) < 1e-5


# -- its yolo.py flow on the real tiny weights ------------------------------------------------------

@pytest.fixture(scope="module")
def real_tiny(tmp_path_factory):
    from yolo3.checkpoint.darknet_convert import convert
    cfg, weights = shared("darknet", "yolov3-tiny.cfg"), shared("darknet", "yolov3-tiny.weights")
    if not weights.is_file():
        pytest.fail(f"real tiny weights not found at {weights}")
    out = tmp_path_factory.mktemp("real") / "yolov3-tiny.keras"
    convert(cfg, weights, out, progress=False,
            class_names=shared("darknet", "coco_classes.txt").read_text().split("\n")[:80])
    return out


def _opencv_dog(boxed: np.ndarray):
    """OpenCV's Darknet importer on the same letterboxed input: the best 'dog' row, as
    ``(cx, cy, w, h)`` in input pixels and its score."""
    import cv2
    net = cv2.dnn.readNetFromDarknet(str(shared("darknet", "yolov3-tiny.cfg")),
                                     str(shared("darknet", "yolov3-tiny.weights")))
    net.setInput(cv2.dnn.blobFromImage(boxed, 1 / 255.0, swapRB=False, crop=False))
    rows = np.concatenate([o.reshape(-1, 85) for o in net.forward(net.getUnconnectedOutLayersNames())])
    best = rows[np.argmax(rows[:, 5 + 16])]
    return best[:4] * [416, 416, 416, 416], best[5 + 16]


def test_keras_yolo3_yolo_py_flow_finds_the_dog(real_tiny):
    from keras.layers import Input

    from yolo3.checkpoint.weights import load_weights_by_name
    from yolo3.model import tiny_yolo_body, yolo_eval
    from yolo3.ops.letterbox import geometry_np
    from yolo3.utils import letterbox_image

    yolo_model = tiny_yolo_body(Input(shape=(None, None, 3)), 3, 80)
    load_weights_by_name(yolo_model, real_tiny, verbose=False)
    image = Image.open(shared("images", "dog.jpg"))
    boxed_image = letterbox_image(image, (416, 416))
    image_data = np.expand_dims(np.array(boxed_image, dtype="float32") / 255.0, 0)
    outs = yolo_model.predict(image_data, verbose=0)
    boxes, scores, classes = yolo_eval([tf.constant(o) for o in outs], TINY_YOLO_ANCHORS, 80,
                                       tf.constant([image.size[1], image.size[0]], tf.float32),
                                       score_threshold=0.3, iou_threshold=0.45)
    classes = classes.numpy().tolist()
    assert 16 in classes  # COCO 'dog'
    y1, x1, y2, x2 = boxes.numpy()[classes.index(16)]
    (cx, cy, w, h), cv_score = _opencv_dog(np.array(boxed_image))
    _, offset, scale = geometry_np((image.size[1], image.size[0]), (416, 416))
    ref = np.array([(cx - w / 2 - offset[1]) / scale[1], (cy - h / 2 - offset[0]) / scale[0],
                    (cx + w / 2 - offset[1]) / scale[1], (cy + h / 2 - offset[0]) / scale[0]])
    ours = np.array([x1, y1, x2, y2])
    inter = np.prod(np.clip(np.minimum(ours[2:], ref[2:]) - np.maximum(ours[:2], ref[:2]), 0, None))
    union = np.prod(ours[2:] - ours[:2]) + np.prod(ref[2:] - ref[:2]) - inter
    assert inter / union > 0.95, (ours, ref)
    assert float(scores.numpy()[classes.index(16)]) == pytest.approx(float(cv_score), abs=0.02)


# -- keras-yolo3's weight files ------------------------------------------------------------------

@pytest.fixture(scope="module", params=[("tiny", 3, 1), ("tiny", 80, 0),
                                        pytest.param(("yolov3", 5, 14), marks=pytest.mark.slow)],
                ids=["tiny-3-classes", "tiny-80-tfkeras-names", "yolov3-5-classes-offset-names"])
def keras_yolo3_files(request, tmp_path_factory):
    """A keras-yolo3 reference model, random weights, written as whole-model and weights-only .h5."""
    kind, classes, first_index = request.param
    folder = tmp_path_factory.mktemp(f"k3-{kind}")
    model, created = reference_body(kind, classes, first_index)
    randomise(created, np.random.default_rng(5))
    write_keras2_h5(folder / "yolo.h5", created, whole_model=True)
    write_keras2_h5(folder / "trained_weights_final.h5", created, whole_model=False)
    images = np.random.default_rng(6).uniform(0, 1, (2, 96, 128, 3)).astype(np.float32)
    return kind, classes, folder, created, outputs(model, images), images


def test_keras_yolo3_files_load_with_the_same_outputs(keras_yolo3_files, caplog):
    from yolo3.checkpoint.weights import load_weights_by_name
    from yolo3.config.specs import get_spec
    kind, classes, folder, created, reference, images = keras_yolo3_files
    counts = layer_counts(created)
    for name in ("yolo.h5", "trained_weights_final.h5"):
        body = build_spec_body(get_spec(kind), classes)
        with caplog.at_level(logging.INFO, logger="yolo3"):
            report = load_weights_by_name(body, folder / name)
        assert report.skipped == [] and len(report.loaded) == counts["conv2d"] + counts["batch_normalization"]
        assert "keras-yolo3 .h5" in caplog.text
        caplog.clear()
        errors = [rel_err(o, r) for o, r in zip(outputs(body, images), reference)]
        assert max(errors) <= 1e-6, errors
    other = build_spec_body(get_spec(kind), classes + 2)  # another class count: the outputs are skipped
    report = load_weights_by_name(other, folder / "yolo.h5", verbose=False)
    assert sorted(n for n, _ in report.skipped) == sorted(f"output_s{s}" for s in get_spec(kind).strides)


def test_detector_converter_and_trainer_take_keras_yolo3_files(keras_yolo3_files, tmp_path,
                                                                caplog):
    from yolo3.checkpoint.metadata import read_info
    from yolo3.cli.convert import main as convert_main
    from yolo3.inference.detector import YOLO
    kind, classes, folder, _, reference, images = keras_yolo3_files
    write_classes(tmp_path / "classes.txt", [f"c{i}" for i in range(classes)])
    det = YOLO(folder / "yolo.h5", classes_path=tmp_path / "classes.txt", input_size=(96, 128),
               precision="float32")
    masks = [[3, 4, 5], [1, 2, 3]] if kind == "tiny" else [[6, 7, 8], [3, 4, 5], [0, 1, 2]]
    assert det.anchor_mask == masks and det.info.variant == kind and det.num_classes == classes
    assert max(rel_err(o, r) for o, r in zip(det.forward(images), reference)) <= 1e-5
    out = tmp_path / "migrated.keras"
    assert convert_main([str(folder / "trained_weights_final.h5"), str(out), "--classes",
                         str(tmp_path / "classes.txt")]) == 0
    info = read_info(out)
    assert info.masks == masks and info.class_names == [f"c{i}" for i in range(classes)]
    again = YOLO(out, input_size=(96, 128), precision="float32")
    for a, b in zip(again.forward(images), det.forward(images)):
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-6)
    # without a class list, as keras-yolo3's yolo.py: the COCO names for 80 classes
    from yolo3.checkpoint.loading import load_keras_yolo3
    caplog.set_level("INFO")
    _, bare = load_keras_yolo3(folder / "yolo.h5")
    coco = [n for n in shared("darknet", "coco_classes.txt").read_text().splitlines() if n]
    assert bare.class_names == (coco if classes == 80 else None)
    assert ("no class list given or found beside it: the 80 COCO names" in caplog.text) == \
        (classes == 80)


def test_bad_h5_is_refused_with_the_reason(tmp_path):
    import h5py

    from yolo3.core.errors import FileFormatError
    from yolo3.inference.detector import YOLO
    with h5py.File(tmp_path / "other.h5", "w") as f:
        f.attrs["layer_names"] = [b"dense_1"]
        g = f.create_group("dense_1")
        g.attrs["weight_names"] = [b"dense_1/kernel:0"]
        g.create_dataset("dense_1/kernel:0", data=np.zeros((3, 3)))
    with pytest.raises(FileFormatError, match="not a keras-yolo3 .h5 file"):
        YOLO(tmp_path / "other.h5", classes_path=None)


# -- YOLO's keyword arguments, detect_image, close_session, detect_video ---------------------------

@pytest.fixture(scope="module")
def keras_yolo3_folder(tmp_path_factory):
    """A keras-yolo3 checkout's model_data/: yolo.h5 (tiny, 3 classes), anchors, classes."""
    root = tmp_path_factory.mktemp("k3repo")
    (root / "model_data").mkdir()
    model, created = reference_body("tiny", 3)
    randomise(created, np.random.default_rng(8))
    write_keras2_h5(root / "model_data" / "yolo.h5", created, whole_model=True)
    write_anchors(root / "model_data" / "yolo_anchors.txt", TINY_YOLO_ANCHORS)
    write_classes(root / "model_data" / "coco_classes.txt", ["cat", "dog", "bird"])
    return root


def test_yolo_takes_keras_yolo3_arguments(keras_yolo3_folder, monkeypatch):
    from yolo3.inference.detector import YOLO
    monkeypatch.chdir(keras_yolo3_folder)
    default = YOLO()  # keras-yolo3's model_data defaults
    assert default.class_names == ["cat", "dog", "bird"] and default.input_hw == (416, 416)
    assert YOLO.get_defaults("score") == 0.3 and "Unrecognized" in YOLO.get_defaults("nope")
    # yolo_video.py: argparse with argument_default=SUPPRESS, then YOLO(**vars(FLAGS))
    parser = argparse.ArgumentParser(argument_default=argparse.SUPPRESS)
    parser.add_argument("--model", type=str)
    parser.add_argument("--anchors", type=str)
    parser.add_argument("--classes", type=str)
    parser.add_argument("--gpu_num", type=int)
    parser.add_argument("--image", default=False, action="store_true")
    parser.add_argument("--input", nargs="?", type=str, required=False, default="./path2your_video")
    parser.add_argument("--output", nargs="?", type=str, default="")
    flags = parser.parse_args(["--model", "model_data/yolo.h5", "--gpu_num", "2", "--image"])
    yolo = YOLO(**vars(flags))
    assert yolo.gpu_num == 2 and yolo.class_names == ["cat", "dog", "bird"]
    sized = YOLO(model_path="model_data/yolo.h5", anchors_path="model_data/yolo_anchors.txt",
                 classes_path="model_data/coco_classes.txt", score=0.2, iou=0.4,
                 model_image_size=(320, 256), gpu_num=1)
    assert sized.input_hw == (320, 256) and sized.score == 0.2
    with pytest.raises(TypeError, match="unexpected keyword argument 'scroe'"):
        YOLO(scroe=0.5)
    image = Image.fromarray(np.random.default_rng(0).integers(0, 256, (150, 210, 3), np.uint8))
    free = YOLO(model_image_size=(None, None), score=0.0)
    assert free.preprocess(np.asarray(image)).shape == (128, 192, 3)
    drawn = free.detect_image(image)
    assert isinstance(drawn, Image.Image) and drawn.size == image.size
    free.close_session()
    assert free.detect_image(image).size == image.size  # still works after close_session


def test_detect_video_writes_every_frame(keras_yolo3_folder, tmp_path):
    import cv2

    import yolo3
    from yolo3.inference.detector import YOLO
    video = tmp_path / "clip.avi"
    writer = cv2.VideoWriter(str(video), cv2.VideoWriter_fourcc(*"MJPG"), 10.0, (96, 64))
    for i in range(5):
        writer.write(np.full((64, 96, 3), 40 * i, np.uint8))
    writer.release()
    yolo = YOLO(os.path.join(keras_yolo3_folder, "model_data", "yolo.h5"),
                os.path.join(keras_yolo3_folder, "model_data", "yolo_anchors.txt"),
                os.path.join(keras_yolo3_folder, "model_data", "coco_classes.txt"), input_size=64)
    out = tmp_path / "out.avi"
    assert yolo3.detect_video(yolo, str(video), str(out), show=False) == 5
    cap = cv2.VideoCapture(str(out))
    frames = 0
    while cap.read()[0]:
        frames += 1
    assert frames == 5 and cap.get(cv2.CAP_PROP_FPS) == pytest.approx(10.0)


@pytest.mark.slow  # CI runs it; the trainer taking keras-yolo3 files keeps its default test above
def test_trainer_starts_from_a_keras_yolo3_file(keras_yolo3_folder, tmp_path, capsys):
    from yolo3.cli.train import main
    from yolo3.data.synthetic import make_synthetic_dataset
    _, classes = make_synthetic_dataset(str(tmp_path / "ds"), 4, (64, 64), val_fraction=0.5)
    assert main(["--annotations", str(tmp_path / "ds" / "train.txt"), "--val-annotations",
                 str(tmp_path / "ds" / "val.txt"), "--classes", classes, "--variant", "tiny",
                 "--input-size", "64", "--batch-size", "2", "--epochs", "1", "--output",
                 str(tmp_path / "run"), "--no-augment", "--weights",
                 str(keras_yolo3_folder / "model_data" / "yolo.h5")]) == 0
    out = capsys.readouterr().out
    assert "keras-yolo3 .h5: 13 convolutions and 11 batch norms mapped by creation order" in out
    assert "loaded 24 layers, skipped 0" in out  # 3 classes in both


def test_keras_yolo3_darknet53_backbone_file_loads_into_the_backbone(tmp_path):
    """keras-yolo3's ``convert.py -w darknet53.cfg ...`` file: the 52 backbone convolutions."""
    from yolo3.checkpoint.weights import load_weights_by_name
    from yolo3.config.specs import get_spec
    _, created = reference_body("yolov3", 2)
    randomise(created, np.random.default_rng(2))
    convs = [c for c in created if c[0].startswith("conv2d")][:52]
    bns = [c for c in created if c[0].startswith("batch_normalization")][:52]
    write_keras2_h5(tmp_path / "darknet53_weights.h5", convs + bns, whole_model=False)
    body = build_spec_body(get_spec("yolov3"), 2)
    report = load_weights_by_name(body, tmp_path / "darknet53_weights.h5", verbose=False)
    assert "darknet53 backbone" in report.keras_yolo3 and len(report.loaded) == 104
    assert all(not name.startswith("backbone_") for name, _ in report.skipped)
    np.testing.assert_array_equal(body.get_layer("backbone_s5_b4_conv2_conv").get_weights()[0],
                                  convs[-1][1].get_weights()[0])
