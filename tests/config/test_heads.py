"""yolo3.config.heads: both heads answer the same questions, the anchor head's answers equal the
rules it replaces (default masks, strides_for, A x (5 + C)), and model files keep recording it as
before (no head entry)."""
from __future__ import annotations

import numpy as np
import pytest

from yolo3.checkpoint.metadata import ModelInfo
from yolo3.config.anchor_free_head import AnchorFreeHead
from yolo3.config.heads import (ANCHOR_HEAD_STRIDES, AnchorHead, check_own_anchors, head_of,
                                output_bias_priors)
from yolo3.config.masks import default_masks
from yolo3.config.specs import SPECS, get_spec, strides_for
from yolo3.ops.anchors import TINY_YOLO_ANCHORS, YOLO_ANCHORS

INTERFACE = ("anchor_free", "strides", "num_scales", "anchors_per_scale", "channels",
             "num_classes", "anchor_array", "mask_lists", "record", "from_record", "masks_for",
             "output_channels", "with_found_anchors")


@pytest.mark.parametrize("head", [AnchorHead.of(YOLO_ANCHORS), AnchorFreeHead((32, 16, 8), 16)],
                         ids=["anchors", "anchor-free"])
def test_both_heads_answer_every_question_of_the_interface(head):
    missing = [name for name in INTERFACE if not hasattr(head, name)]
    assert not missing
    assert len(head.strides) == head.num_scales
    assert head.num_classes(head.channels(7)) == 7
    assert head.anchor_array().shape[1] == 2 and head.anchor_array().dtype == np.float32
    assert head.output_channels(7) == [head.channels(7)] * head.num_scales


def test_the_anchor_head_is_the_anchors_and_masks_it_replaces():
    head = AnchorHead.of(YOLO_ANCHORS)
    assert head.mask_lists() == default_masks(9) == [[6, 7, 8], [3, 4, 5], [0, 1, 2]]
    np.testing.assert_array_equal(head.anchor_array(), np.asarray(YOLO_ANCHORS, np.float32))
    assert head.channels(80) == 3 * 85 == 255 and head.anchors_per_scale == 3
    assert not head.anchor_free and head.record() is None
    tiny = AnchorHead.of(TINY_YOLO_ANCHORS, [[3, 4, 5], [1, 2, 3]])  # keras-yolo3's tiny masks
    assert tiny.strides == (32, 16) and tiny.mask_lists() == [[3, 4, 5], [1, 2, 3]]


@pytest.mark.parametrize("scales", [1, 2, 3])
def test_anchor_head_strides_are_the_registered_bodies(scales):
    assert list(ANCHOR_HEAD_STRIDES[:scales]) == strides_for(scales)


def test_every_variant_has_a_default_head_whose_outputs_fit_its_body():
    for spec in SPECS.values():
        head = spec.default_head()
        assert head.anchor_free == spec.anchor_free
        assert head.strides == spec.strides
        assert head.channels(5) == spec.output_filters(5)


def test_the_anchor_head_refuses_what_no_body_has():
    with pytest.raises(ValueError, match="outside the 6 anchors"):
        AnchorHead.of(TINY_YOLO_ANCHORS, [[3, 4, 6], [0, 1, 2]])
    with pytest.raises(ValueError, match="1 to 3 outputs"):
        AnchorHead.of(np.ones((12, 2)), [[0, 1, 2]] * 4)
    with pytest.raises(ValueError, match="not 3 anchors"):
        AnchorHead.of(YOLO_ANCHORS).num_classes(256)


def test_head_of_prefers_the_given_head_and_model_files_record_as_before():
    free = get_spec("tiny-af").head
    assert head_of(np.zeros((0, 2)), [], free) is free
    assert head_of(YOLO_ANCHORS, None, None) == AnchorHead.of(YOLO_ANCHORS)
    anchors = AnchorHead.of(YOLO_ANCHORS)
    assert head_of(TINY_YOLO_ANCHORS, None, anchors) is anchors  # 0.6: the anchors are not read
    check_own_anchors(anchors, YOLO_ANCHORS, default_masks(9))  # its own: taken
    check_own_anchors(free, None, None)
    with pytest.raises(ValueError, match="anchor-free head's anchors and masks are its own"):
        check_own_anchors(free, YOLO_ANCHORS, None)
    with pytest.raises(ValueError, match="anchor head's anchors and masks are its own"):
        check_own_anchors(anchors, TINY_YOLO_ANCHORS, None)
    with pytest.raises(ValueError, match="masks"):
        check_own_anchors(anchors, None, [[0, 1, 2]])
    anchor_info = ModelInfo(YOLO_ANCHORS, default_masks(9), 3)
    assert anchor_info.to_dict()["head"] is None  # what yolo3 0.5 wrote and reads
    assert anchor_info.head == anchors and anchor_info.detection_head is anchor_info.head
    assert anchor_info.strides == [32, 16, 8]
    free_info = ModelInfo(np.zeros((0, 2)), [], 3, head=free)
    assert free_info.to_dict()["head"] == free.to_dict()
    assert ModelInfo.from_dict(free_info.to_dict()).head == free
    with pytest.raises(ValueError, match="its own"):  # yolo3 0.6's message named the kind
        ModelInfo(YOLO_ANCHORS, default_masks(9), 3, head=free)


def test_a_kind_with_anchors_takes_the_found_ones_and_one_without_never_asks():
    asked = []

    def find():
        asked.append(True)
        return TINY_YOLO_ANCHORS, [[3, 4, 5], [0, 1, 2]]

    tiny = AnchorHead.of(YOLO_ANCHORS).with_found_anchors(find)
    assert tiny == AnchorHead.of(TINY_YOLO_ANCHORS, [[3, 4, 5], [0, 1, 2]]) and asked == [True]
    free = AnchorFreeHead((32, 16), 16)
    assert free.with_found_anchors(find) is free and asked == [True]
    assert AnchorHead.from_record({"anchors": YOLO_ANCHORS}) == AnchorHead.of(YOLO_ANCHORS)
    with pytest.raises(ValueError, match="without 'anchors'"):
        AnchorHead.from_record({})
    assert AnchorFreeHead.from_record(free.record()) == free
    assert AnchorHead.of(TINY_YOLO_ANCHORS, [[3, 4, 5], [0, 1]]).output_channels(2) == [21, 14]


def test_the_facts_answer_for_their_kind_where_a_variant_asked_which_it_had():
    """Masks for another anchor count, channels for another count per output, and a model's
    facts of its head: each head answers; the variants (every one holds its head's
    facts) pass the questions on."""
    anchors = AnchorHead.of(YOLO_ANCHORS)
    assert anchors.masks_for() == default_masks(9, 3)
    assert anchors.masks_for(6) == default_masks(6, 3)
    assert anchors.channels(4, anchors_per_scale=2) == 2 * 9
    free = AnchorFreeHead((32, 16, 8), 16)
    assert free.channels(4, anchors_per_scale=None) == 64 + 4
    with pytest.raises(ValueError, match="an anchor-free head has no anchors or masks"):
        free.masks_for(9)
    tiny = get_spec("tiny")
    assert tiny.head == AnchorHead.of(tiny.anchors, default_masks(6, 2))
    assert tiny.default_masks(8) == default_masks(8, 2) and tiny.output_filters(3, 2) == 16
    for spec in SPECS.values():
        info = ModelInfo.of_head(spec.head, 5, variant=spec.name, input_size=(64, 96))
        assert info.head == spec.head
        assert (info.variant, info.input_size, info.num_classes) == (spec.name, (64, 96), 5)
        assert ModelInfo.from_dict(info.to_dict()).to_dict() == info.to_dict()


def test_output_bias_priors_match_the_expected_positives():
    bias = output_bias_priors(3, 4, cells=36, num_scales=2, objects_per_image=6.0)
    head = AnchorHead.of(np.ones((6, 2)) * 10, [[3, 4, 5], [0, 1, 2]])
    np.testing.assert_array_equal(head.bias_priors(4, 36, 6.0)[0], bias)
    assert bias.shape == (3 * 9,)
    per_anchor = bias.reshape(3, 9)
    np.testing.assert_array_equal(per_anchor[:, :4], 0.0)
    sigmoid = 1 / (1 + np.exp(-per_anchor.astype(np.float64)))
    # expected positives on this scale: half of the 6 objects, over 36 cells x 3 anchors
    np.testing.assert_allclose(sigmoid[:, 4] * 36 * 3, 3.0, rtol=1e-5)
    np.testing.assert_allclose(sigmoid[:, 5:], 0.25, rtol=1e-5)
