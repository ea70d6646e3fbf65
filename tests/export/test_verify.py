"""yolo3.export.verify with stand-ins for the exported model and the Keras detector: the raw-map
limit per quantisation, non-finite maps, in-model decoding against the host's, the file removed
and named when the check fails."""
from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
import tensorflow as tf

from yolo3.config.masks import default_masks
from yolo3.export import verify as verify_module
from yolo3.export.verify import TOLERANCES, ExportError, VerifyReport, verify_export
from yolo3.heads import AnchorHead
from yolo3.ops.anchors import TINY_YOLO_ANCHORS
from yolo3.ops.decode import decode_detections

HW = (64, 64)
MASKS = default_masks(6)


def _raw(rng, batch):
    maps = [rng.normal(0, 1, (batch, 2, 2, 21)), rng.normal(0, 1, (batch, 4, 4, 21))]
    for m in maps:  # a few confident boxes
        m[..., 4::7] = rng.choice([-8.0, 4.0], size=m[..., 4::7].shape, p=[0.9, 0.1])
    return [m.astype(np.float32) for m in maps]


def _host(raw, max_boxes=10, score=0.3, iou=0.45):
    return [t.numpy() for t in decode_detections(
        [tf.constant(r) for r in raw], TINY_YOLO_ANCHORS, 2, tf.constant(HW, tf.int32),
        max_boxes=max_boxes, score_threshold=score, iou_threshold=iou, anchor_mask=MASKS,
        input_shape=HW)]


class FakeExported:
    """What verify_export reads of an ExportedDetector; ``noise`` is added to the raw maps,
    ``decoded`` replaces the in-model decoding's output."""

    def __init__(self, raw, export, noise=0.0, decoded=None, batch=None):
        self.raw, self.noise, self.batch = raw, noise, batch
        self.info = SimpleNamespace(export=export)
        self.anchors, self.num_classes, self.anchor_mask = TINY_YOLO_ANCHORS, 2, MASKS
        self.head = AnchorHead.of(TINY_YOLO_ANCHORS, MASKS)  # an exported detector's, never None
        host = _host(raw, export.get("max_boxes", 10), export.get("score", 0.3),
                     export.get("iou", 0.45))
        out = decoded or {"boxes": host[0], "scores": host[1], "classes": host[2],
                          "count": host[3]}
        self.runner = SimpleNamespace(run=lambda x: out)

    def raw_outputs(self, x):
        return [r + self.noise for r in self.raw]

    def _to_input(self, x):
        return x


@pytest.fixture
def setup(tmp_path, monkeypatch):
    rng = np.random.default_rng(0)
    raw = _raw(rng, 3)
    detector = SimpleNamespace(forward=lambda x: raw, input_hw=HW)
    path = tmp_path / "model.onnx"
    path.write_bytes(b"exported")
    images = [rng.uniform(0, 1, (*HW, 3)).astype(np.float32) for _ in range(3)]

    def use(fake):
        monkeypatch.setattr(verify_module, "ExportedDetector", lambda p, precision: fake)
    return SimpleNamespace(raw=raw, detector=detector, path=path, images=images, use=use)


def test_raw_maps_within_the_limit_pass(setup):
    setup.use(FakeExported(setup.raw, {"raw": True}, noise=1e-6))
    report = verify_export(setup.path, setup.detector, setup.images)
    assert report.images == 3 and max(report.raw_errors) < TOLERANCES["none"]
    assert "raw maps within" in report.summary() and setup.path.exists()


@pytest.mark.parametrize("quantize, noise, passes", [("none", 1e-3, False), ("float16", 1e-3, True),
                                                     ("int8", 0.05, True), ("int8", 1.0, False)])
def test_each_quantisation_has_its_limit(setup, quantize, noise, passes):
    setup.use(FakeExported(setup.raw, {"raw": True}, noise=noise))
    if passes:
        verify_export(setup.path, setup.detector, setup.images, quantize)
        assert setup.path.exists()
    else:
        with pytest.raises(ExportError, match=rf"model\.onnx: .*raw maps differ .*limit "
                                              rf"{TOLERANCES[quantize]:g}.*nothing was kept"):
            verify_export(setup.path, setup.detector, setup.images, quantize)
        assert not setup.path.exists()


def test_non_finite_maps_fail_and_the_file_stays_when_asked(setup):
    setup.use(FakeExported(setup.raw, {"raw": True}, noise=np.nan))
    with pytest.raises(ExportError, match="missing or not finite"):
        verify_export(setup.path, setup.detector, setup.images, remove_on_failure=False)
    assert setup.path.exists()


def test_in_model_decoding_is_checked_against_the_hosts(setup):
    export = {"raw": False, "max_boxes": 10, "score": 0.3, "iou": 0.45}
    setup.use(FakeExported(setup.raw, export))
    report = verify_export(setup.path, setup.detector, setup.images)
    host = _host(setup.raw)
    assert report.detections_checked == int(host[3].sum()) > 0 and not report.mismatches
    assert f"agrees with the host's on {report.detections_checked} of" in report.summary()
    wrong = dict(boxes=host[0], scores=host[1] * 0.5, classes=host[2], count=host[3])
    setup.use(FakeExported(setup.raw, export, decoded=wrong))
    with pytest.raises(ExportError, match="detections differ from the host's decoding"):
        verify_export(setup.path, setup.detector, setup.images)
    assert not setup.path.exists()


def test_summary_counts_the_boxes_that_differ():
    report = VerifyReport(4, [1e-6, 2e-6], 1e-4, detections_checked=10,
                          mismatches=["image 1: 3 of the model's 5 detections differ"])
    assert report.summary().endswith("agrees with the host's on 7 of 10 boxes")
