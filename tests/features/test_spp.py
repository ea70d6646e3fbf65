"""YOLOv3-SPP, the third variant, added as one registry entry: its Darknet cfg, its parameter count,
conversion from Darknet, export back (OpenCV agreement) and training through the CLI."""
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
    spp_cfg_text,
)
from locations import shared

from yolo3.checkpoint.darknet_convert import convert
from yolo3.checkpoint.weights import load_weights_by_name
from yolo3.config.specs import get_spec
from yolo3.darknet.cfg import equivalent, parse_cfg, parse_cfg_text
from yolo3.darknet.layout import body_to_cfg_index, layout_cfg_text
from yolo3.darknet.random_weights import write_random_weights
from yolo3.darknet.weights import conv_param_count
from yolo3.export.darknet import export_darknet
from yolo3.modeling.bodies import build_spec_body

TOLERANCE = 1e-5


@pytest.fixture(scope="module")
def spp_cfg(tmp_path_factory, darknet_cfg_dir_module):
    """Darknet's yolov3-spp.cfg structure, built from the reference yolov3.cfg (darknet_helpers)."""
    path = tmp_path_factory.mktemp("spp") / "yolov3-spp.cfg"
    path.write_text(spp_cfg_text((darknet_cfg_dir_module / "yolov3.cfg").read_text()))
    return path


@pytest.fixture(scope="module")
def darknet_cfg_dir_module():
    path = shared("darknet")
    if not path.is_dir():
        pytest.fail(f"reference Darknet cfgs not found at {path}")
    return path


def test_registry_cfg_is_darknets_yolov3_spp(spp_cfg):
    ours = parse_cfg_text(layout_cfg_text("yolov3-spp"))
    assert len(ours.layers) == 114 and len(ours.convs()) == 76
    assert equivalent(ours, parse_cfg(spp_cfg))


def test_parameter_count_matches_the_cfg(spp_cfg):
    cfg = parse_cfg(spp_cfg)
    floats = sum(conv_param_count(cfg, layer) for layer in cfg.convs())
    assert build_spec_body(get_spec("yolov3-spp"), 80).count_params() == floats


@pytest.mark.slow  # CI runs it; SPP against OpenCV keeps test_darknet_convert's default test
def test_exported_spp_body_runs_in_opencv(tmp_path):
    rng = np.random.default_rng(4)
    body = build_spec_body(get_spec("yolov3-spp"), 3)
    randomise_batch_norms(body, rng)
    cfg_out, weights_out = tmp_path / "spp.cfg", tmp_path / "spp.weights"
    export_darknet(body, cfg_out, weights_out, num_classes=3)
    cfg = parse_cfg(cfg_out)
    assert cfg.yolo_info()[1] == [[6, 7, 8], [3, 4, 5], [0, 1, 2]]
    images = random_images(rng, 2, 128, 128)
    errors = [rel_err(o, r) for o, r in zip(keras_forward(body, images),
                                             opencv_forward(cfg, cfg_out, weights_out, images))]
    assert max(errors) <= TOLERANCE, errors


@pytest.mark.slow  # CI runs it; converting SPP keeps test_darknet_convert's default test
def test_converted_spp_loads_into_the_spp_body(spp_cfg, tmp_path):
    weights = tmp_path / "spp.weights"
    write_random_weights(spp_cfg, weights, seed=9)
    converted = convert(spp_cfg, weights, tmp_path / "spp.keras", progress=False).out_path
    weights.unlink()
    source = keras.models.load_model(converted, compile=False)
    body = build_spec_body(get_spec("yolov3-spp"), 80)
    report = load_weights_by_name(body, converted, verbose=False)
    assert report.darknet_layout == "yolov3-spp" and report.skipped == [] and report.unmapped == []
    assert len(report.loaded) == 76 + 73  # convs + batch norms (the 3 output convs have none)
    images = random_images(np.random.default_rng(1), 2, 128, 128)
    errors = [rel_err(o, t) for o, t in zip(keras_forward(body, images), keras_forward(source, images))]
    assert max(errors) <= TOLERANCE, errors
    mapping = body_to_cfg_index("yolov3-spp")
    assert mapping["head_s32_spp_reduce"] == 84 and mapping["output_s32"] == 88


@pytest.mark.slow  # one step, but every checkpoint of a 62M-parameter body is written
@pytest.mark.extended  # 211 s in CI's slow set
def test_trains_through_the_cli(tmp_path):
    from yolo3.checkpoint.metadata import read_info
    from yolo3.cli.train import main
    from yolo3.data.synthetic import make_synthetic_dataset
    _, classes = make_synthetic_dataset(str(tmp_path / "ds"), 4, (64, 64), val_fraction=0.5)
    out = tmp_path / "run"
    assert main(["--annotations", str(tmp_path / "ds" / "train.txt"), "--val-annotations",
                 str(tmp_path / "ds" / "val.txt"), "--classes", classes, "--variant", "yolov3-spp",
                 "--input-size", "64", "--batch-size", "2", "--epochs", "1", "--output", str(out),
                 "--no-augment", "--quiet"]) == 0
    info = read_info(out / "final.keras")
    assert info.variant == "yolov3-spp" and info.masks == [[6, 7, 8], [3, 4, 5], [0, 1, 2]]
    assert "head_s32_spp_pool13" in {l.name for l in keras.models.load_model(out / "final.keras").layers}
