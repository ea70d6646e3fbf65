"""What every head kind answers (yolo3.heads.base): a kind lacking a behaviour cannot be made;
decoding is the kind's candidates through one threshold and NMS, the network's input size read
off the maps when not given; a kind's head equals its facts."""
from __future__ import annotations

import numpy as np
import pytest

from yolo3.config.heads import AnchorHead as AnchorFacts
from yolo3.heads import AnchorHead, Head
from yolo3.heads.base import same_facts
from yolo3.ops.anchors import TINY_YOLO_ANCHORS
from yolo3.ops.decode import select_detections


def test_a_kind_without_every_behaviour_cannot_be_made():
    class Half(AnchorFacts, Head):
        def training_model(self, body, num_classes, max_boxes, options=None):
            return None

    with pytest.raises(TypeError, match="abstract"):
        Half.of(TINY_YOLO_ANCHORS)


def test_decode_is_the_candidates_through_select_detections(rng):
    head = AnchorHead.of(TINY_YOLO_ANCHORS)
    outputs = [rng.normal(size=(2, 3, 2, 24)).astype(np.float32),
               rng.normal(size=(2, 6, 4, 24)).astype(np.float32)]
    image_hw = np.array([[120, 50], [96, 64]])
    got = head.decode(outputs, 3, image_hw, score_threshold=0.4, iou_threshold=0.5, max_boxes=7)
    boxes, scores = head.raw_boxes_and_scores(outputs, 3, image_hw, (96, 64))  # 3 x 32, 2 x 32
    want = select_detections(boxes, scores, image_hw, 7, 0.4, 0.5)
    for a, b in zip(got, want):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    assert int(np.asarray(got[3]).max()) > 0  # something was kept


def test_a_kinds_head_equals_its_facts_and_nothing_else():
    head = AnchorHead.of(TINY_YOLO_ANCHORS)
    assert same_facts(head, AnchorFacts.of(TINY_YOLO_ANCHORS), AnchorFacts) is True
    assert same_facts(head, AnchorFacts.of(TINY_YOLO_ANCHORS, [[0, 1, 2], [3, 4, 5]]),
                      AnchorFacts) is False
    assert same_facts(head, "anchor", AnchorFacts) is NotImplemented
    assert head != "anchor" and head != None  # noqa: E711 - the comparison itself is tested
