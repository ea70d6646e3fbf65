"""Darknet -> Keras conversion checked against OpenCV's own Darknet importer (cv2.dnn)."""
from __future__ import annotations

import json
from pathlib import Path

import keras
import numpy as np
import pytest
from darknet_helpers import (
    keras_forward,
    opencv_forward,
    random_images,
    rel_err,
    spp_cfg_text,
)
from locations import shared

from yolo3.checkpoint.darknet_convert import build_model, convert
from yolo3.checkpoint.metadata import read_sidecars, sidecar_paths
from yolo3.cli.convert import main as cli_main
from yolo3.core.errors import DarknetError
from yolo3.darknet.cfg import parse_cfg
from yolo3.darknet.random_weights import write_random_weights

TOLERANCE = 1e-5  # |keras - opencv| / |opencv| per output map
# Outputs must depend on the input: two random images give clearly different maps.
MIN_INPUT_DEPENDENCE = 1e-2


@pytest.fixture(scope="module")
def converted(tmp_path_factory):
    """Converts a cfg (by name) once per module: ``(cfg_path, weights_path, model, result)``."""
    cache = {}
    darknet = shared("darknet")
    root = tmp_path_factory.mktemp("converted")

    def get(name: str):
        if name not in cache:
            if name == "yolov3-spp":
                cfg_path = root / "yolov3-spp.cfg"
                cfg_path.write_text(spp_cfg_text((darknet / "yolov3.cfg").read_text()))
            else:
                cfg_path = darknet / f"{name}.cfg"
            weights = root / f"{name}.weights"
            write_random_weights(cfg_path, weights, seed=5)
            result = convert(cfg_path, weights, root / f"{name}.keras", progress=False)
            model = keras.models.load_model(result.out_path)
            cache[name] = (cfg_path, weights, model, result)
        return cache[name]

    return get


def _compare(get, name, h, w, seed=0):
    cfg_path, weights, model, _ = get(name)
    cfg = parse_cfg(cfg_path)
    images = random_images(np.random.default_rng(seed), 2, h, w)
    ours = keras_forward(model, images)
    ref = opencv_forward(cfg, cfg_path, weights, images)
    assert [o.shape for o in ours] == [r.shape for r in ref]
    errors = [rel_err(o, r) for o, r in zip(ours, ref)]
    assert max(errors) <= TOLERANCE, errors
    for r in ref:
        assert rel_err(r[0], r[1]) > MIN_INPUT_DEPENDENCE
        assert np.all(np.isfinite(r)) and np.abs(r).max() < 1e4
    return errors


@pytest.mark.parametrize("name, h, w", [
    ("yolov3-tiny", 160, 160),
    ("yolov3-tiny", 96, 224),  # non-default, non-square input
    pytest.param("yolov3", 128, 128, marks=pytest.mark.slow),  # CI; YOLOv3 keeps 96x160
    ("yolov3", 96, 160),
    pytest.param("darknet53", 128, 128, marks=pytest.mark.slow),  # CI; YOLOv3 96x160 holds it
    ("yolov3-spp", 128, 128),
])
def test_matches_opencv(converted, name, h, w):
    _compare(converted, name, h, w)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["yolov3", "yolov3-tiny", "yolov3-spp"])
def test_matches_opencv_full_size(converted, name):
    _compare(converted, name, 416, 416, seed=1)


def test_output_names_follow_cfg_index(converted):
    _, _, model, result = converted("yolov3")
    assert result.output_names == ["conv_81", "conv_93", "conv_105"]
    assert model.input_shape == (None, None, None, 3)
    names = {l.name for l in model.layers}
    assert {"conv_0", "bn_0", "leaky_0", "pad_1", "shortcut_4", "route_86", "upsample_85"} <= names
    assert model.get_layer("bn_0").epsilon == pytest.approx(1e-6)
    _, _, backbone, result = converted("darknet53")
    assert result.output_names == ["shortcut_74"]
    _, _, spp, _ = converted("yolov3-spp")
    assert spp.get_layer("maxpool_82").pool_size == (13, 13)


def test_sidecars(converted):
    _, _, _, result = converted("yolov3-tiny")
    anchors_path, masks_path = sidecar_paths(result.out_path)
    assert (anchors_path, masks_path) == (result.anchors_path, result.masks_path)
    assert anchors_path.name == "yolov3-tiny.anchors.txt"
    meta = json.loads(masks_path.read_text())
    assert meta["masks"] == [[3, 4, 5], [1, 2, 3]]
    assert meta["num_classes"] == 80 and meta["input_size"] == [416, 416]
    side = read_sidecars(result.out_path)
    np.testing.assert_array_equal(side["anchors"][:2], [[10, 14], [23, 27]])
    assert sidecar_paths("a/b.weights.h5") == (Path("a/b.anchors.txt"), Path("a/b.masks.json"))


def test_weights_h5_output(converted, tmp_path):
    cfg_path, weights, model, _ = converted("yolov3-tiny")
    out = tmp_path / "tiny.weights.h5"
    convert(cfg_path, weights, out, progress=False)
    assert sidecar_paths(out)[1].is_file()
    fresh = build_model(parse_cfg(cfg_path))
    fresh.load_weights(out)
    images = random_images(np.random.default_rng(2), 1, 64, 64)
    for a, b in zip(keras_forward(fresh, images), keras_forward(model, images)):
        np.testing.assert_array_equal(a, b)


def test_int32_seen_header(tmp_path, darknet_cfg_dir):
    cfg_path = darknet_cfg_dir / "yolov3-tiny.cfg"
    weights = tmp_path / "old.weights"
    write_random_weights(cfg_path, weights, seed=1, major=0, minor=1, seen=99)
    result = convert(cfg_path, weights, tmp_path / "old.keras", progress=False)
    assert result.header.as_list() == [0, 1, 0, 99]


# --- bad inputs: each is a DarknetError with file, place and reason, never a NumPy/Keras error ---

@pytest.fixture(scope="module")
def tiny_weights(tmp_path_factory):
    darknet = shared("darknet")
    path = tmp_path_factory.mktemp("bad") / "tiny.weights"
    write_random_weights(darknet / "yolov3-tiny.cfg", path)
    return path


def test_truncated_weights(tmp_path, darknet_cfg_dir, tiny_weights):
    data = tiny_weights.read_bytes()
    bad = tmp_path / "short.weights"
    bad.write_bytes(data[: len(data) // 2])
    with pytest.raises(DarknetError, match=r"ends inside \[convolutional\] layer 12 \(cfg line"):
        convert(darknet_cfg_dir / "yolov3-tiny.cfg", bad, tmp_path / "o.keras", progress=False)
    assert not (tmp_path / "o.keras").exists()


def test_extra_bytes(tmp_path, darknet_cfg_dir, tiny_weights):
    bad = tmp_path / "long.weights"
    bad.write_bytes(tiny_weights.read_bytes() + b"\0" * 12)
    with pytest.raises(DarknetError, match="12 bytes left over"):
        convert(darknet_cfg_dir / "yolov3-tiny.cfg", bad, tmp_path / "o.keras", progress=False)


def test_cfg_weights_mismatch(tmp_path, darknet_cfg_dir, tiny_weights):
    with pytest.raises(DarknetError, match=r"ends inside \[convolutional\] layer \d+"):
        convert(darknet_cfg_dir / "yolov3.cfg", tiny_weights, tmp_path / "o.keras", progress=False)
    small = tmp_path / "one.cfg"
    small.write_text("[net]\nchannels=3\n[convolutional]\nfilters=4\nsize=1\nactivation=linear\n")
    with pytest.raises(DarknetError, match="left over.*do not belong to the cfg"):
        convert(small, tiny_weights, tmp_path / "o.keras", progress=False)


def test_unknown_section_and_missing_route(tmp_path, darknet_cfg_dir, tiny_weights):
    text = (darknet_cfg_dir / "yolov3-tiny.cfg").read_text()
    bad = tmp_path / "bad.cfg"
    bad.write_text(text.replace("[upsample]", "[reorg]"))
    line = text.splitlines().index("[upsample]") + 1
    with pytest.raises(DarknetError, match=rf"bad.cfg:{line} \(layer 19\): section \[reorg\]"):
        convert(bad, tiny_weights, tmp_path / "o.keras", progress=False)
    bad.write_text(text.replace("layers = -1, 8", "layers = -1, 30"))
    with pytest.raises(DarknetError, match=r"\[route\] layer 20.*absolute 30"):
        convert(bad, tiny_weights, tmp_path / "o.keras", progress=False)


def test_bad_output_name(tmp_path, darknet_cfg_dir, tiny_weights):
    with pytest.raises(DarknetError, match=r"\.keras.*\.weights\.h5"):
        convert(darknet_cfg_dir / "yolov3-tiny.cfg", tiny_weights, tmp_path / "o.h5")


def test_cli_reports_errors_without_traceback(tmp_path, darknet_cfg_dir, capsys):
    missing = tmp_path / "missing.weights"
    rc = cli_main([str(darknet_cfg_dir / "yolov3-tiny.cfg"), str(missing), str(tmp_path / "o.keras")])
    err = capsys.readouterr().err
    assert rc == 2 and "missing.weights: cannot read weights file" in err  # bad input: exit 2
    assert "Traceback" not in err


def test_cli_import_prints_anchors_and_masks(tmp_path, darknet_cfg_dir, tiny_weights, capsys):
    out = tmp_path / "m.keras"
    rc = cli_main([str(darknet_cfg_dir / "yolov3-tiny.cfg"), str(tiny_weights), str(out),
                   "--no-progress"])
    text = capsys.readouterr().out
    assert rc == 0 and out.is_file()
    assert "10,14,  23,27" in text and "[[3, 4, 5], [1, 2, 3]]" in text and "classes: 80" in text


@pytest.mark.parametrize("name", ["yolov3", "yolov3-tiny", "darknet53"])
@pytest.mark.parametrize("h,w", [(416, 416), (320, 192)])
def test_conv_flops_match_the_built_model(darknet_cfg_dir, name, h, w):
    """``DarknetCfg.conv_flops`` equals 2 x multiply-adds counted from the built layers' shapes."""
    cfg = parse_cfg(darknet_cfg_dir / f"{name}.cfg")
    model = build_model(cfg, (h, w), kernel_initializer="zeros")
    expected = 0
    for layer in model.layers:
        if isinstance(layer, keras.layers.Conv2D):
            _, out_h, out_w, _ = layer.output.shape
            expected += 2 * int(np.prod(layer.kernel.shape)) * out_h * out_w
    assert cfg.conv_flops(h, w) == pytest.approx(expected, rel=1e-12)
    if (name, h) == ("yolov3", 416):  # Darknet prints 65.864 BFLOPs for yolov3.cfg at 416
        assert cfg.conv_flops() == pytest.approx(65.864e9, rel=1e-4)


def test_pretrained_class_counts_get_their_names_unless_a_list_is_given(tmp_path, darknet_cfg_dir,
                                                                      tiny_weights, capsys):
    """An 80-class model converted without a class list names its classes as COCO does (the
    reference list is Darknet's coco names file, read here), 20 classes as VOC, others by number."""
    from yolo3.checkpoint.metadata import read_info
    darknet = darknet_cfg_dir
    coco = [n.strip() for n in (darknet / "coco_classes.txt").read_text().splitlines() if n.strip()]
    voc = [n.strip() for n in (darknet / "voc_classes.txt").read_text().splitlines() if n.strip()]
    out = tmp_path / "coco.keras"
    assert cli_main([str(darknet / "yolov3-tiny.cfg"), str(tiny_weights), str(out),
                     "--no-progress"]) == 0
    assert "the 80 COCO names" in capsys.readouterr().out
    assert read_info(out).class_names == coco
    for classes, names in ((20, voc), (3, None)):
        cfg = tmp_path / f"tiny{classes}.cfg"
        text = (darknet / "yolov3-tiny.cfg").read_text()
        cfg.write_text(text.replace("classes=80", f"classes={classes}").replace(
            "filters=255", f"filters={3 * (classes + 5)}"))
        weights = tmp_path / f"tiny{classes}.weights"
        write_random_weights(cfg, weights, seed=1)
        result = convert(cfg, weights, tmp_path / f"tiny{classes}.keras", progress=False)
        assert read_info(result.out_path).class_names == names
        assert result.default_names == (None if names is None else "VOC")
    given = convert(darknet / "yolov3-tiny.cfg", tiny_weights, tmp_path / "given.keras",
                    progress=False, class_names=[f"c{i}" for i in range(80)])
    assert given.default_names is None and read_info(given.out_path).class_names[0] == "c0"
