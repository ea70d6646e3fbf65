"""Bodies (sizes, names, shapes), the training model, saving and one short training run."""
from __future__ import annotations

import keras
import numpy as np
import pytest

from yolo3.config.loss_options import LossOptions
from yolo3.model import BN_EPSILON, build_body, output_layer_names
from yolo3.modeling.loss import YoloLoss, identity_loss, yolo_training_model
from yolo3.ops.anchors import TINY_YOLO_ANCHORS, YOLO_ANCHORS
from yolo3.ops.targets import preprocess_true_boxes


@pytest.fixture(scope="module")
def yolov3_small():
    return build_body("yolov3", 2)  # dynamic input size


@pytest.fixture(scope="module")
def tiny_small():
    return build_body("tiny", 2)


@pytest.mark.parametrize("model,expected", [("yolov3", 62_001_757), ("tiny", 8_858_734)])
def test_parameter_count_matches_darknet(model, expected):
    # Darknet's yolov3.weights / yolov3-tiny.weights hold exactly this many floats (80 classes).
    assert build_body(model, 80).count_params() == expected


@pytest.mark.parametrize("hw", [(320, 256), (64, 96), (128, 128), (96, 64)])
def test_output_shapes(yolov3_small, tiny_small, hw):
    image = np.zeros((1, *hw, 3), np.float32)
    for body, strides in [(yolov3_small, [32, 16, 8]), (tiny_small, [32, 16])]:
        outputs = body(image)
        assert [tuple(o.shape) for o in outputs] == [(1, hw[0] // s, hw[1] // s, 3 * 7) for s in strides]


def test_static_input_gives_static_output_shapes():
    body = build_body("tiny", 3, input_shape=(256, 320))
    assert [tuple(o.shape) for o in body.outputs] == [(None, 8, 10, 24), (None, 16, 20, 24)]
    with pytest.raises(ValueError, match="multiples of 32"):
        build_body("tiny", 3, input_shape=(250, 320))


def _ancestors(body: keras.Model, layer_name: str) -> set:
    """Names of all layers feeding ``layer_name`` (inclusive), found through the graph."""
    sub = keras.Model(body.input, body.get_layer(layer_name).output)
    return {l.name for l in sub.layers if not isinstance(l, keras.layers.InputLayer)}


@pytest.mark.parametrize("model,taps,outputs", [
    ("yolov3", {"backbone_c3": 8, "backbone_c4": 16, "backbone_c5": 32}, ["output_s32", "output_s16", "output_s8"]),
    ("tiny", {"backbone_c4": 16, "backbone_c5": 32}, ["output_s32", "output_s16"]),
])
def test_layers_reachable_by_name(model, taps, outputs, yolov3_small, tiny_small):
    body = yolov3_small if model == "yolov3" else tiny_small
    assert output_layer_names(body) == outputs
    features = keras.Model(body.input, [body.get_layer(n).output for n in taps])
    got = features(np.zeros((1, 64, 128, 3), np.float32))
    assert [tuple(t.shape[1:3]) for t in got] == [(64 // s, 128 // s) for s in taps.values()]
    backbone = _ancestors(body, "backbone_c5")
    assert backbone and all(n.startswith("backbone_") for n in backbone)
    # Nothing outside the backbone pretends to be in it; heads are prefixed by their stride.
    for layer in body.layers:
        if isinstance(layer, keras.layers.InputLayer):
            continue
        if layer.name.startswith("backbone_"):
            assert layer.name in backbone or layer.name in _ancestors(body, "backbone_c4")
        else:
            assert layer.name.startswith(("head_s", "output_s")), layer.name


def test_batch_norm_epsilon_is_darknets(yolov3_small, tiny_small):
    for body in (yolov3_small, tiny_small):
        bns = [l for l in body.layers if isinstance(l, keras.layers.BatchNormalization)]
        assert bns and all(l.epsilon == 1e-6 for l in bns)
    assert BN_EPSILON == 1e-6


def test_training_model_inputs_and_errors():
    body = build_body("yolov3", 4, input_shape=(128, 96))
    model = yolo_training_model(body, YOLO_ANCHORS, 4)
    assert [t.name for t in model.inputs] == ["image", "y_true_s32", "y_true_s16", "y_true_s8"]
    assert [tuple(t.shape) for t in model.inputs[1:]] == [(None, 4, 3, 3, 9), (None, 8, 6, 3, 9),
                                                          (None, 16, 12, 3, 9)]
    assert tuple(model.output.shape) == (1,)
    assert isinstance(model.get_layer("yolo_loss"), YoloLoss)
    # jit_compile="auto" must not pick XLA on GPUs: the loss has data-dependent shapes.
    assert model.get_layer("yolo_loss").supports_jit is False
    dynamic = yolo_training_model(build_body("tiny", 1), TINY_YOLO_ANCHORS, 1)
    assert [tuple(t.shape) for t in dynamic.inputs[1:]] == [(None, None, None, 3, 6)] * 2
    with pytest.raises(ValueError, match="channels"):
        yolo_training_model(body, YOLO_ANCHORS, 5)
    with pytest.raises(ValueError, match="3 outputs"):
        yolo_training_model(body, TINY_YOLO_ANCHORS, 4)


def _synthetic(rng: np.random.Generator, n: int, hw, num_classes: int):
    """Grey images with coloured rectangles and their boxes ``(n, 2, 5)``."""
    images = np.full((n, *hw, 3), 0.5, np.float32)
    boxes = np.zeros((n, 2, 5), np.float32)
    colours = np.eye(3, dtype=np.float32)
    for b in range(n):
        for k in range(2):
            w, h = rng.integers(hw[1] // 6, hw[1] // 2.5), rng.integers(hw[0] // 6, hw[0] // 2.5)
            x1, y1 = rng.integers(0, hw[1] - w), rng.integers(0, hw[0] - h)
            c = (b + k) % num_classes
            images[b, y1:y1 + h, x1:x1 + w] = colours[c]
            boxes[b, k] = [x1, y1, x1 + w, y1 + h, c]
    return images, boxes


def test_save_and_load_body_and_training_model(tmp_path, rng):
    hw = (64, 96)
    body = build_body("tiny", 2, input_shape=hw)
    model = yolo_training_model(body, TINY_YOLO_ANCHORS, 2, LossOptions(ignore_iou=.6))
    images, boxes = _synthetic(rng, 2, hw, 2)
    y_true = preprocess_true_boxes(boxes, hw, TINY_YOLO_ANCHORS, 2)
    body.save(tmp_path / "body.keras")
    model.save(tmp_path / "train.keras")
    body2 = keras.models.load_model(tmp_path / "body.keras")  # default safe_mode
    model2 = keras.models.load_model(tmp_path / "train.keras", compile=False)
    for a, b in zip(body.predict(images, verbose=0), body2.predict(images, verbose=0)):
        np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(model.predict((images, *y_true), verbose=0),
                                  model2.predict((images, *y_true), verbose=0))
    assert model2.get_layer("yolo_loss").options.ignore_iou == .6


def test_training_lowers_the_loss_and_trains_the_body(rng):
    hw, n, num_classes = (96, 96), 4, 2
    images, boxes = _synthetic(rng, n, hw, num_classes)
    y_true = preprocess_true_boxes(boxes, hw, TINY_YOLO_ANCHORS, num_classes)
    body = build_body("tiny", num_classes, input_shape=hw)
    model = yolo_training_model(body, TINY_YOLO_ANCHORS, num_classes)
    model.compile(optimizer=keras.optimizers.SGD(1e-4, momentum=0.9), loss=identity_loss)
    x = (images, *y_true)
    kernel_before = body.get_layer("output_s32").kernel.numpy().copy()
    history = model.fit(x, np.zeros(n, np.float32), batch_size=n, epochs=6, verbose=0).history["loss"]
    assert np.all(np.isfinite(history))
    assert history[-1] < 0.85 * history[0], history
    assert not np.array_equal(body.get_layer("output_s32").kernel.numpy(), kernel_before)
