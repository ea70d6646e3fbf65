"""The head kinds' registry (yolo3.heads.registry): facts become the head that answers for them;
a new kind is one class and one register call, shown by a toy head this file alone defines, which
trains a step, is saved and loaded, and decodes; yolo3 0.6's training_model still builds."""
from __future__ import annotations

import importlib
import sys
from dataclasses import dataclass
from typing import ClassVar, List, Sequence, Tuple

import keras
import numpy as np
import pytest
from keras import ops

from yolo3.checkpoint.loading import load_body
from yolo3.checkpoint.metadata import ModelInfo, read_info
from yolo3.checkpoint.saving import atomic_save_model
from yolo3.config.anchor_free_head import AnchorFreeHead as AnchorFreeFacts
from yolo3.config.heads import AnchorHead as AnchorFacts
from yolo3.config.loss_options import LossOptions
from yolo3.config.specs import get_spec
from yolo3.core.errors import FileFormatError
from yolo3.data.dataset_config import TargetEncoding
from yolo3.ops.letterbox import letterbox_np
from yolo3.heads import AnchorFreeHead, AnchorHead, Head, as_head, head_kinds, register, unregister
from yolo3.modeling.loss import identity_loss
from yolo3.ops.anchors import YOLO_ANCHORS
from yolo3.inference.detector import YOLO
from yolo3.ops.decode import correct_boxes


def test_facts_become_their_kinds_head_and_equal_it():
    anchor_facts = AnchorFacts.of(YOLO_ANCHORS)
    head = as_head(anchor_facts)
    assert type(head) is AnchorHead and head.kind == "anchor"
    assert head == anchor_facts and anchor_facts == head and hash(head) == hash(anchor_facts)
    assert as_head(head) is head  # a head is its own head
    free = as_head(AnchorFreeFacts((32, 16), 16))
    assert type(free) is AnchorFreeHead and free == AnchorFreeFacts((32, 16), 16)
    assert free != AnchorFreeFacts((32, 16), 8) and free != head
    assert as_head(get_spec("tiny-af").default_head()) == get_spec("tiny-af").head
    assert {"anchor", "anchor_free"} <= set(head_kinds())


def test_an_unknown_kind_and_a_second_kind_of_one_name_are_refused():
    @dataclass(frozen=True)
    class Stranger:
        strides: Tuple[int, ...]
        kind: ClassVar[str] = "stranger"

    with pytest.raises(ValueError, match="no head kind 'stranger' is registered"):
        as_head(Stranger((32,)))

    class Impostor(AnchorHead):
        pass

    with pytest.raises(ValueError, match="a head kind named 'anchor' is registered already"):
        register(Impostor)
    assert head_kinds()["anchor"] is AnchorHead


def test_the_0_6_training_model_still_builds_from_a_heads_facts():
    spec = get_spec("tiny")
    from yolo3.modeling.bodies import build_spec_body
    body = build_spec_body(spec, 2, 3, (64, 64))
    sys.modules.pop("yolo3.modeling.heads", None)  # another test may have imported it first
    with pytest.warns(DeprecationWarning, match="yolo3.heads.registry"):
        old_path = importlib.import_module("yolo3.modeling.heads")
    model = old_path.training_model(body, spec.default_head(), 2, 4, LossOptions())
    assert model.get_layer("yolo_loss") is not None


# -- a toy head kind, defined here alone --------------------------------------------------------

@dataclass(frozen=True)
class ToyFacts:
    """One output of ``stride``; per cell ``4`` box logits (each side's distance from the cell's
    centre, ``exp(t)`` strides) then ``C`` class logits."""

    stride: int
    kind: ClassVar[str] = "toy"

    @property
    def strides(self) -> Tuple[int, ...]:
        return (self.stride,)

    def channels(self, num_classes: int) -> int:
        return 4 + num_classes


@keras.saving.register_keras_serializable("yolo3_test")
class ToyLoss(keras.layers.Layer):
    """Each cell's class logits toward the classes of the boxes whose centre falls in it, by
    squared error: ``(1,)``, summed over the batch."""

    def __init__(self, stride: int, num_classes: int, **kwargs):
        super().__init__(**kwargs)
        self.stride, self.num_classes = stride, num_classes

    def call(self, maps, true_boxes):
        _, gh, gw, _ = ops.shape(maps)
        centre = (true_boxes[..., :2] + true_boxes[..., 2:4]) / 2 // self.stride
        cell = ops.cast(centre[..., 1] * gw + centre[..., 0], "int32")  # (B, M)
        valid = ops.cast(true_boxes[..., 2] > true_boxes[..., 0], "float32")
        hot = ops.one_hot(cell, gh * gw) * valid[..., None]  # (B, M, cells)
        classes = ops.one_hot(ops.cast(true_boxes[..., 4], "int32"), self.num_classes)
        target = ops.minimum(ops.einsum("bmc,bmk->bck", hot, classes), 1.0)
        logits = ops.reshape(maps[..., 4:], [-1, gh * gw, self.num_classes])
        return ops.reshape(ops.sum((ops.sigmoid(logits) - target) ** 2), [1])

    def get_config(self):
        return {**super().get_config(), "stride": self.stride, "num_classes": self.num_classes}


class ToyHead(ToyFacts, Head):
    def training_model(self, body, num_classes, max_boxes, options=LossOptions()):
        boxes = keras.Input((max_boxes, 5), name="true_boxes")
        loss = ToyLoss(self.stride, num_classes, name="toy_loss")(body.outputs[0], boxes)
        return keras.Model([body.input, boxes], loss)

    def target_encoding(self, num_classes, assign_iou=1.0, true_boxes=True):
        return TargetEncoding(None, num_classes, true_boxes=True)

    def raw_boxes_and_scores(self, outputs: Sequence, num_classes, image_hw, input_hw):
        maps = ops.cast(outputs[0], "float32")
        _, gh, gw, _ = ops.shape(maps)
        y, x = ops.meshgrid(ops.arange(gh), ops.arange(gw), indexing="ij")
        centre = (ops.cast(ops.stack([x, y], -1), "float32") + 0.5) * self.stride
        sides = ops.exp(maps[..., :4]) * self.stride
        corners = ops.concatenate([centre - sides[..., :2], centre + sides[..., 2:]], -1)
        input_wh = ops.convert_to_tensor([float(input_hw[1]), float(input_hw[0])])
        xy = (corners[..., :2] + corners[..., 2:]) / 2 / input_wh
        wh = (corners[..., 2:] - corners[..., :2]) / input_wh
        boxes = correct_boxes(xy, wh, input_hw, image_hw)
        batch = ops.shape(maps)[0]
        return (ops.reshape(boxes, [batch, -1, 4]),
                ops.reshape(ops.sigmoid(maps[..., 4:]), [batch, -1, num_classes]))

    def output_layer_groups(self, body) -> List[Tuple[str, ...]]:
        return [("toy_out",)]


@pytest.fixture
def toy_kind():
    register(ToyHead)
    yield ToyHead
    unregister("toy")


def _toy_body(num_classes: int) -> keras.Model:
    image = keras.Input((64, 64, 3), name="image")
    x = keras.layers.Conv2D(8, 3, strides=4, padding="same", activation="relu")(image)
    x = keras.layers.Conv2D(8, 3, strides=4, padding="same", activation="relu")(x)
    x = keras.layers.Conv2D(8, 3, strides=2, padding="same", activation="relu")(x)
    return keras.Model(image, keras.layers.Conv2D(4 + num_classes, 1, name="toy_out")(x))


def test_a_toy_head_registered_here_trains_a_step_saves_loads_and_decodes(toy_kind, tmp_path):
    keras.utils.set_random_seed(0)
    head = as_head(ToyFacts(16))  # the facts, as a variant or a model file would hold them
    assert isinstance(head, ToyHead) and head == ToyHead(16)
    body = _toy_body(2)
    model = head.training_model(body, 2, max_boxes=3)
    model.compile(keras.optimizers.SGD(0.5), loss=identity_loss)
    rng = np.random.default_rng(0)
    images = rng.uniform(0, 1, (2, 64, 64, 3)).astype("float32")
    boxes = np.zeros((2, 3, 5), "float32")
    boxes[:, 0] = [8, 8, 24, 24, 1]
    encoding = head.target_encoding(2)
    assert encoding.anchors is None and encoding.true_boxes  # the padded boxes, as fed
    before = float(model.train_on_batch([images, boxes], np.zeros((2, 1))))
    after = float(model.evaluate([images, boxes], np.zeros((2, 1)), verbose=0))
    assert after < before  # one step learned

    path = tmp_path / "toy.keras"
    body.save(path)
    loaded = keras.saving.load_model(path)
    maps, loaded_maps = body(images), loaded(images)
    np.testing.assert_allclose(np.asarray(loaded_maps), np.asarray(maps), rtol=1e-6, atol=1e-6)
    got = head.decode([loaded_maps], 2, np.array([[64, 64], [128, 64]]), (64, 64),
                      max_boxes=5, score_threshold=0.0, iou_threshold=1.0)
    want = head.decode([maps], 2, np.array([[64, 64], [128, 64]]), (64, 64),
                       max_boxes=5, score_threshold=0.0, iou_threshold=1.0)
    for a, b in zip(got, want):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-5, atol=1e-4)
    valid = np.asarray(got[3])
    assert valid.tolist() == [5, 5]
    # the first image is the input's size: its boxes are the maps' own, read by hand
    centre = 8.0  # cell (0, 0) of stride 16
    cell = np.asarray(maps)[0, 0, 0]
    corner = [centre - np.exp(cell[0]) * 16, centre - np.exp(cell[1]) * 16,
              centre + np.exp(cell[2]) * 16, centre + np.exp(cell[3]) * 16]
    raw, scores = head.raw_boxes_and_scores([maps], 2, np.array([[64, 64]] * 2), (64, 64))
    np.testing.assert_allclose(np.asarray(raw)[0, 0], corner, rtol=1e-5, atol=1e-3)
    np.testing.assert_allclose(np.asarray(scores)[0, 0], 1 / (1 + np.exp(-cell[4:])), rtol=1e-5)
    assert [body.get_layer(n).name for group in head.output_layer_groups(body)
            for n in group] == ["toy_out"]


def test_a_toy_heads_model_file_records_it_and_the_detector_decodes_with_it(toy_kind, tmp_path):
    """yolo3's own model file: the toy head recorded in its info (kind and facts), read back as
    the registered kind, loaded by ``load_body`` and ``YOLO`` (which ask nothing of the kind);
    once the kind is gone, the file is refused naming it."""
    keras.utils.set_random_seed(1)
    head = as_head(ToyFacts(16))
    body = _toy_body(2)
    info = ModelInfo.of_head(head, 2, class_names=["cat", "dog"], input_size=(64, 64))
    assert info.head == head and info.anchors.shape == (0, 2) and info.masks == []
    assert info.to_dict()["head"] == {"kind": "toy", "stride": 16}
    path = atomic_save_model(body, tmp_path / "toy.keras", info)

    read = read_info(path)
    assert type(read.head) is ToyHead and read.head == head and read.class_names == ["cat", "dog"]
    loaded, loaded_info = load_body(path)
    assert type(loaded_info.head) is ToyHead and loaded_info.num_classes == 2
    with pytest.raises(FileFormatError, match="a toy head: it takes no anchors"):
        load_body(path, anchor_mask=[[0]])

    detector = YOLO(path, score=0.0, iou=1.0, max_boxes=4, precision="float32")
    image = np.random.default_rng(1).integers(0, 255, (64, 64, 3), np.uint8)
    boxes, scores, classes = detector.detect(image)
    x = letterbox_np(image, (64, 64))[None]
    want = head.decode([body(x)], 2, np.array([[64, 64]]), (64, 64), max_boxes=4,
                       score_threshold=0.0, iou_threshold=1.0)
    np.testing.assert_allclose(boxes, np.asarray(want[0])[0, :len(boxes)], rtol=1e-4, atol=1e-2)
    np.testing.assert_allclose(scores, np.asarray(want[1])[0, :len(scores)], rtol=1e-4, atol=1e-5)
    assert len(boxes) == 4

    unregister("toy")
    with pytest.raises(FileFormatError, match="no head kind 'toy' is registered"):
        read_info(path)
