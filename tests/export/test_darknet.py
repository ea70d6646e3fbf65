"""Keras -> Darknet export: round trips and OpenCV loading exported yolo3 bodies."""
from __future__ import annotations

import keras
import numpy as np
import pytest
from darknet_helpers import (
    keras_forward,
    opencv_forward,
    random_images,
    randomise_batch_norms,
    rel_err,
)

from yolo3.cli.convert import main as cli_main
from yolo3.core.errors import DarknetError
from yolo3.darknet.cfg import equivalent, parse_cfg
from yolo3.darknet.random_weights import write_random_weights
from yolo3.export.darknet import export_darknet
from yolo3.modeling.bodies import build_body

TOLERANCE = 1e-5
CUSTOM_ANCHORS = np.array([[6, 9], [14, 20], [30, 26], [52, 70], [120, 96], [260, 210]], np.float32)


@pytest.mark.parametrize("name", ["yolov3-tiny", "darknet53",
                                  pytest.param("yolov3", marks=pytest.mark.slow)])
def test_round_trip_is_byte_identical(tmp_path, darknet_cfg_dir, name):
    """CLI import then CLI export (metadata from the sidecars) gives the same bytes and cfg."""
    cfg_path = darknet_cfg_dir / f"{name}.cfg"
    weights = tmp_path / "in.weights"
    write_random_weights(cfg_path, weights, seed=11, revision=3, seen=4242)
    model_path = tmp_path / "model.keras"
    assert cli_main([str(cfg_path), str(weights), str(model_path), "--no-progress"]) == 0
    assert cli_main([str(model_path), str(tmp_path / "out.cfg"), str(tmp_path / "out.weights")]) == 0
    assert (tmp_path / "out.weights").read_bytes() == weights.read_bytes()
    assert equivalent(parse_cfg(tmp_path / "out.cfg"), parse_cfg(cfg_path))


@pytest.mark.parametrize("kind, ref, masks", [
    ("yolov3", "yolov3.cfg", None),
    ("tiny", "yolov3-tiny.cfg", [[3, 4, 5], [1, 2, 3]]),
])
def test_yolo3_body_cfg_matches_darknet_structure(tmp_path, darknet_cfg_dir, kind, ref, masks):
    """An 80-class yolo3 body exports to a cfg equivalent to Darknet's own (layer by layer)."""
    body = build_body(kind, 80)
    export_darknet(body, tmp_path / "b.cfg", tmp_path / "b.weights", masks=masks)
    assert equivalent(parse_cfg(tmp_path / "b.cfg"), parse_cfg(darknet_cfg_dir / ref))


@pytest.mark.parametrize("kind, h, w", [("tiny", 160, 160), ("tiny", 96, 192),
                                        pytest.param("yolov3", 128, 128, marks=pytest.mark.slow)])
def test_opencv_runs_exported_body(tmp_path, kind, h, w):
    """A fresh 3-class body (tiny: custom anchors) exported: OpenCV's outputs match Keras's."""
    rng = np.random.default_rng(7)
    body = build_body(kind, 3)
    randomise_batch_norms(body, rng)
    anchors = CUSTOM_ANCHORS if kind == "tiny" else None
    cfg_out, weights_out = tmp_path / "e.cfg", tmp_path / "e.weights"
    export_darknet(body, cfg_out, weights_out, anchors=anchors, num_classes=3)
    cfg = parse_cfg(cfg_out)
    got_anchors, masks, classes = cfg.yolo_info()
    assert classes == 3
    if anchors is not None:
        np.testing.assert_array_equal(got_anchors, anchors)
        assert masks == [[3, 4, 5], [0, 1, 2]]
    images = random_images(rng, 2, h, w)
    ours = keras_forward(body, images)
    ref = opencv_forward(cfg, cfg_out, weights_out, images)
    assert [o.shape for o in ours] == [r.shape for r in ref]
    errors = [rel_err(o, r) for o, r in zip(ours, ref)]
    assert max(errors) <= TOLERANCE, errors


def test_export_errors(tmp_path):
    inputs = keras.Input((None, None, 3))
    plain = keras.Model(inputs, keras.layers.Conv2D(4, 3, name="c")(inputs))
    with pytest.raises(DarknetError, match="neither a yolo3 body"):
        export_darknet(plain, tmp_path / "x.cfg", tmp_path / "x.weights")
    body = build_body("tiny", 3)
    with pytest.raises(DarknetError, match="3 anchor masks for a model with 2 outputs"):
        export_darknet(body, tmp_path / "x.cfg", tmp_path / "x.weights",
                       masks=[[0], [1], [2]], anchors=CUSTOM_ANCHORS)
    with pytest.raises(DarknetError, match=r"\[yolo\] input has 24 channels"):
        export_darknet(body, tmp_path / "x.cfg", tmp_path / "x.weights", num_classes=5,
                       anchors=CUSTOM_ANCHORS)
    assert not (tmp_path / "x.cfg").exists()


def test_cli_export_of_missing_model(tmp_path, capsys):
    rc = cli_main([str(tmp_path / "none.keras"), str(tmp_path / "o.cfg"), str(tmp_path / "o.weights")])
    err = capsys.readouterr().err
    assert rc == 2 and "none.keras" in err and "Traceback" not in err  # bad input: exit 2


def test_a_non_square_model_exports_its_height_and_width_and_converts_back(tmp_path, capsys):
    """A body trained at 96 x 160 (height x width): the cfg's [net] says so, and converting the cfg
    back gives a model that carries (96, 160) and computes the same maps."""
    from yolo3.checkpoint.darknet_convert import convert
    from yolo3.checkpoint.metadata import ModelInfo, read_info
    from yolo3.checkpoint.saving import atomic_save_model
    from yolo3.config.specs import get_spec
    rng = np.random.default_rng(3)
    body = build_body("tiny", 3, input_shape=(96, 160))
    randomise_batch_norms(body, rng)
    spec = get_spec("tiny")
    info = ModelInfo(anchors=CUSTOM_ANCHORS, masks=spec.default_masks(6), num_classes=3,
                     class_names=["a", "b", "c"], variant="tiny", input_size=(96, 160))
    model = atomic_save_model(body, tmp_path / "wide.keras", info)
    cfg_out, weights_out = tmp_path / "wide.cfg", tmp_path / "wide.weights"
    assert cli_main([str(model), str(cfg_out), str(weights_out)]) == 0
    cfg = parse_cfg(cfg_out)
    assert (cfg.height, cfg.width) == (96, 160)
    back = convert(cfg_out, weights_out, tmp_path / "back.keras", progress=False)
    assert read_info(back.out_path).input_size == (96, 160)
    images = random_images(rng, 2, 96, 160)
    ours = keras_forward(body, images)
    theirs = keras_forward(keras.models.load_model(back.out_path), images)
    assert max(rel_err(a, b) for a, b in zip(theirs, ours)) <= TOLERANCE


def test_a_failed_export_leaves_no_file_and_keeps_an_earlier_export(tmp_path, monkeypatch):
    """Each file is written whole or not at all, the weights first: a failure while writing the
    weights leaves neither a new cfg nor a partial weights file, and earlier files unchanged."""
    import yolo3.export.darknet as export_module
    body = build_body("tiny", 3)
    cfg_out, weights_out = tmp_path / "e.cfg", tmp_path / "e.weights"
    export_darknet(body, cfg_out, weights_out, anchors=CUSTOM_ANCHORS)
    before = cfg_out.read_bytes(), weights_out.read_bytes()

    def fail_midway(path, header, blocks):
        with open(path, "wb") as f:
            f.write(header.to_bytes())
        raise OSError(28, "No space left on device")
    monkeypatch.setattr(export_module, "write_weights", fail_midway)
    with pytest.raises(OSError, match="No space left"):
        export_darknet(body, cfg_out, weights_out, anchors=CUSTOM_ANCHORS[::-1].copy())
    assert (cfg_out.read_bytes(), weights_out.read_bytes()) == before
    with pytest.raises(OSError):
        export_darknet(body, tmp_path / "new.cfg", tmp_path / "new.weights", anchors=CUSTOM_ANCHORS)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["e.cfg", "e.weights"]
