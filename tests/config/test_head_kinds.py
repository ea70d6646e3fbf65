"""yolo3.config.head_kinds: the one table of head kinds by name. The built-in kinds start as
their facts (a model file's head is read without Keras), a kind's behaviour replaces its facts
once, another class under a taken name is refused, and a record names its kind."""
from __future__ import annotations

import subprocess
import sys
from dataclasses import dataclass
from typing import ClassVar

import numpy as np
import pytest

from yolo3.config.anchor_free_head import AnchorFreeHead
from yolo3.config.head_kinds import KINDS, HeadKinds, head_of_record
from yolo3.config.heads import AnchorHead
from yolo3.ops.anchors import TINY_YOLO_ANCHORS


def test_a_kinds_behaviour_replaces_its_facts_once_and_unregistering_restores_them():
    kinds = HeadKinds(AnchorHead, AnchorFreeHead)
    assert kinds.as_dict() == {"anchor": AnchorHead, "anchor_free": AnchorFreeHead}

    class Behaviour(AnchorHead):
        pass

    class Other(AnchorHead):
        pass

    assert kinds.register(Behaviour) is Behaviour and kinds.get("anchor") is Behaviour
    assert kinds.register(Behaviour) is Behaviour  # again: the same class, accepted
    with pytest.raises(ValueError, match="'anchor' is registered already .*Behaviour"):
        kinds.register(Other)
    kinds.unregister("anchor")
    assert kinds.get("anchor") is AnchorHead  # a built-in kind goes back to its facts
    with pytest.raises(ValueError, match=r"no head kind 'toy' is registered \(known: anchor, "
                                         "anchor_free\\)"):
        kinds.get("toy")


def test_a_new_kind_is_one_entry_and_goes_again():
    @dataclass(frozen=True)
    class Toy:
        stride: int
        kind: ClassVar[str] = "toy-kinds-test"

        @classmethod
        def from_record(cls, record):
            return cls(record["stride"])

    kinds = HeadKinds(AnchorHead)
    kinds.register(Toy)
    assert kinds.get("toy-kinds-test") is Toy
    kinds.unregister("toy-kinds-test")
    with pytest.raises(ValueError, match="no head kind 'toy-kinds-test'"):
        kinds.get("toy-kinds-test")
    assert "toy-kinds-test" not in KINDS.as_dict()  # another table: the library's is untouched


def test_records_name_their_kind_and_none_is_darknets_anchor_head():
    masks = [[3, 4, 5], [0, 1, 2]]
    assert head_of_record(None, TINY_YOLO_ANCHORS, masks) == AnchorHead.of(TINY_YOLO_ANCHORS,
                                                                           masks)
    free = AnchorFreeHead((32, 16), 8)
    assert head_of_record(free.record()) == free
    with pytest.raises(ValueError, match="no head kind 'decoupled' is registered"):
        head_of_record({"kind": "decoupled"})
    with pytest.raises(ValueError, match="anchor-free head without 'reg_max'"):
        head_of_record({"kind": "anchor_free", "strides": [32]})
    with pytest.raises(ValueError, match="a mapping"):
        head_of_record(["anchor_free"])
    np.testing.assert_array_equal(head_of_record(None, TINY_YOLO_ANCHORS).anchor_array(),
                                  np.asarray(TINY_YOLO_ANCHORS, np.float32))


def test_a_model_files_head_is_read_without_keras():
    code = ("import sys\n"
            "from yolo3.checkpoint.metadata import ModelInfo\n"
            "free = {'kind': 'anchor_free', 'strides': [32, 16], 'reg_max': 16}\n"
            "info = ModelInfo.from_dict({'format': 'yolo3-model-info', 'version': 1, "
            "'anchors': [], 'masks': [], 'num_classes': 3, 'head': free})\n"
            "assert info.head.record() == free and info.num_classes == 3\n"
            "assert 'keras' not in sys.modules and 'tensorflow' not in sys.modules\n")
    subprocess.run([sys.executable, "-c", code], check=True)
