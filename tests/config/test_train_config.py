"""yolo3.config.train_config: the sections, settings by name, defaults, the rules, and the command
line's one builder (every flag of yolo3 train is a setting, every setting a flag)."""
from __future__ import annotations

import dataclasses

import pytest

from yolo3.config.train_config import (
    SECTIONS,
    DataSettings,
    HardwareSettings,
    TrainConfig,
    cautions,
    check,
    default,
    parse_setting,
)
from yolo3.core.errors import SettingError


def _files(tmp_path):
    ann, classes = tmp_path / "a.txt", tmp_path / "c.txt"
    ann.write_text("")
    classes.write_text("a\n")
    return dict(annotations=str(ann), classes=str(classes), output=str(tmp_path / "out"))


def test_settings_by_name_go_to_their_sections(tmp_path):
    config = TrainConfig(batch_size=16, model="tiny", schedule="plateau", lr=0.01, seed=3,
                         **_files(tmp_path))
    assert config.hardware.batch_size == 16 and config.model.variant == "tiny"
    assert config.schedule.schedule == "plateau" and config.recipe.lr == 0.01 and config.seed == 3
    assert config.output.output_dir == str(tmp_path / "out")
    assert config.data.annotations.endswith("a.txt")
    flat = config.settings()
    assert flat["batch_size"] == 16 and flat["variant"] == "tiny" and flat["seed"] == 3
    assert TrainConfig(**{k: v for k, v in flat.items()}) == config  # a round trip
    sectioned = TrainConfig(data=DataSettings(annotations="x", classes="y"),
                            hardware=HardwareSettings(batch_size=4), output="o")
    assert sectioned.hardware.batch_size == 4 and sectioned.data.annotations == "x"
    with pytest.raises(TypeError, match="no setting 'batch'"):
        TrainConfig(batch=3)


def test_every_setting_has_one_name_and_a_default():
    names = [f.name for cls in SECTIONS.values() for f in dataclasses.fields(cls)]
    assert len(names) == len(set(names))
    assert default("batch_size") == 8 and default("assign_iou") == 0.35
    assert default("ignore_iou") == 0.5  # keras-yolo3's ignore_thresh
    assert default("model") == default("variant") == "yolov3" and default("seed") == 0
    with pytest.raises(KeyError):
        default("nothing")


def test_a_size_the_variant_cannot_take_is_refused_naming_its_setting():
    with pytest.raises(SettingError, match=r"input_size: .*\(288, 500\).*500 is not") as e:
        check(TrainConfig(annotations=__file__, classes=__file__, input_size=(288, 500)))
    assert e.value.settings == ("input_size",)
    with pytest.raises(SettingError, match=r"multi_scale: sizes need multiples of 32") as e:
        check(TrainConfig(annotations=__file__, classes=__file__, multi_scale=(300, 416)))
    assert e.value.settings == ("multi_scale",)
    with pytest.raises(SettingError, match="MIN <= MAX") as e:
        check(TrainConfig(annotations=__file__, classes=__file__, multi_scale=(416, 320)))
    assert e.value.settings == ("multi_scale",)


def test_check_returns_the_cautions_of_what_it_accepts(tmp_path):
    config = TrainConfig(**_files(tmp_path), bn_stats_images=0)
    assert check(config) == cautions(config) and len(check(config)) == 1
    assert check(TrainConfig(**_files(tmp_path))) == []


@pytest.mark.parametrize("setting, value, settings, message", [
    ("batch_size", 0, ("batch_size",), r"batch_size must be in \[1, 4096\] or auto, got 0"),
    ("optimizer", "rmsprop", ("optimizer",), "optimizer must be one of adam, sgd"),
    ("box_loss", "l1", ("box_loss",), "box_loss must be one of mse, giou, diou, ciou"),
    ("objectness", "quality", ("objectness",), "objectness must be one of one, iou"),
    ("assign_iou", 0.0, ("assign_iou",), r"assign_iou must be in \(0, 1\]"),
    ("ignore_iou", 1.5, ("ignore_iou",), r"ignore_iou must be in \(0, 1\]"),
    ("box_gain", 0.0, ("box_gain",), "box_gain must be a positive number up to 1000, got 0.0"),
    ("class_gain", float("nan"), ("class_gain",), "class_gain must be a positive number up to 1000, got nan"),
    ("mosaic", 1.5, ("mosaic",), r"mosaic must be in \[0, 1\] \(a probability\)"),
    ("class_weights", "median", ("class_weights",), "class_weights must be auto, one of inverse, "
                                                    "sqrt, effective or a file of weights, got "
                                                    "'median'"),
    ("focal_gamma", -1.0, ("focal_gamma",), r"focal_gamma must be in \[0, 5\]"),
    ("repeat_threshold", 2.0, ("repeat_threshold",), r"repeat_threshold must be in \[0, 1\]"),
    ("tile", 16, ("tile",), "tile must be a size in pixels >= 32 or auto, got 16"),
    ("tile", "big", ("tile",), "tile must be a size in pixels >= 32 or auto, got 'big'"),
    ("tile_whole", 1.5, ("tile_whole",), r"tile_whole must be in \[0, 1\], got 1.5"),
    ("tile_background", -0.1, ("tile_background",), r"tile_background must be in \[0, 1\]"),
    ("tile_overlap", 1.0, ("tile_overlap",), r"tile_overlap must be in \[0, 0.75\], got 1.0"),
    ("tile_whole_from", -2.0, ("tile_whole_from",), r"tile_whole_from must be in \[0, 16384\] \(pixels at the input\), got -2.0"),
    ("variant", "yolo9", ("variant",), "unknown variant 'yolo9'"),
    ("input_size", 100, ("input_size",), "multiple of 32"),
    ("multi_scale", (320, 300), ("multi_scale",), "MIN <= MAX"),
    ("eval_every", -1, ("eval_every",), r"eval_every must be in \[0, 100000\] \(0: no evaluation\)"),
    ("strategy", "ring", ("strategy",), "strategy must be one of wrapper, mirrored, multiworker"),
    ("weights", "missing.keras", ("weights",), "weights not found: missing.keras"),
])
def test_check_names_the_setting(tmp_path, setting, value, settings, message):
    config = TrainConfig(**_files(tmp_path), **{setting: value})
    with pytest.raises(SettingError, match=message) as caught:
        check(config)
    assert caught.value.settings == settings


@pytest.mark.parametrize("setting, value, message", [
    ("ignore_iou", "abc", "ignore_iou must be a number, got 'abc'"),
    ("batch_size", 2.5, "batch_size must be a whole number or auto, got 2.5"),
    ("ema", "yes", "ema must be true or false, got 'yes'"),
    ("multi_scale", (320,), r"multi_scale must be none or two whole numbers, got \(320,\)"),
    ("weights", 3, "weights must be none or text, got 3"),
])
def test_check_refuses_a_value_of_the_wrong_type_naming_the_setting(tmp_path, setting, value,
                                                                     message):
    """A library caller's wrong type is a SettingError, not a TypeError from inside a rule."""
    config = TrainConfig(**_files(tmp_path), **{setting: value})
    with pytest.raises(SettingError, match=message) as caught:
        check(config)
    assert caught.value.settings == (setting,)


def test_paths_and_numpy_numbers_are_of_the_right_type(tmp_path):
    import numpy as np
    files = _files(tmp_path)
    check(TrainConfig(annotations=tmp_path / "a.txt", classes=files["classes"],
                      output=tmp_path / "out", batch_size=np.int64(4), lr=np.float32(1e-3),
                      multi_scale=[320, 416], input_size=[320, 416]))


def test_every_setting_has_a_type_the_checks_know():
    import typing

    from yolo3.core.value_types import conforms, describe
    for cls in SECTIONS.values():
        for name, hint in typing.get_type_hints(cls).items():
            # a TypeError here: yolo3.core.value_types needs a rule for the new setting's type
            assert describe(hint) and conforms(default(name), hint), name


def test_parse_setting_reads_text_as_the_settings_type():
    assert parse_setting("ignore_iou", "0.7") == 0.7
    assert parse_setting("lr", "none") is None and parse_setting("lr", "1e-3") == 0.001
    assert parse_setting("ema", "false") is False and parse_setting("batch_size", "16") == 16
    assert parse_setting("multi_scale", "[160, 224]") == (160, 224)
    assert parse_setting("model", "tiny") == "tiny"  # the variant's old name
    assert parse_setting("weights", "runs/best.keras") == "runs/best.keras"


@pytest.mark.parametrize("name, text, message, settings", [
    ("ignore_io", "1", r"no setting 'ignore_io' \(did you mean ignore_iou\?\)", ()),
    ("nothing_like_it", "1", "no setting 'nothing_like_it'$", ()),
    ("lr", "abc", "lr must be none or a number, got 'abc'", ("lr",)),
    ("batch_size", "8.5", "batch_size must be a whole number or auto, got '8.5'", ("batch_size",)),
])
def test_parse_setting_refuses_an_unknown_name_or_a_bad_value(name, text, message, settings):
    with pytest.raises(SettingError, match=message) as caught:
        parse_setting(name, text)
    assert caught.value.settings == settings


def test_check_names_both_settings_of_a_contradiction(tmp_path):
    with pytest.raises(SettingError) as caught:
        check(TrainConfig(**_files(tmp_path), gpus=2, cpu_replicas=2))
    assert caught.value.settings == ("gpus", "cpu_replicas")
    with pytest.raises(SettingError, match="patience counts evaluations") as caught:
        check(TrainConfig(**_files(tmp_path), patience=3, eval_every=0))
    assert caught.value.settings == ("patience", "eval_every")
    check(TrainConfig(**_files(tmp_path)))  # the defaults pass


def test_cautions_name_frozen_batch_norm_and_moving_averages_and_nothing_by_default(tmp_path):
    assert cautions(TrainConfig(**_files(tmp_path))) == []
    config = TrainConfig(**_files(tmp_path), freeze_bn=True)
    check(config)  # allowed (the replica exactness tests use it), but cautioned
    (caution,) = cautions(config)
    assert caution.message.startswith("freeze_bn:") and "diverged" in caution.message
    assert caution.settings == ("freeze_bn", "bn_stats_images")
    (caution,) = cautions(TrainConfig(**_files(tmp_path), bn_stats_images=0))
    assert caution.message.startswith("bn_stats_images=0:")
    assert caution.settings == ("bn_stats_images",)


def test_the_command_line_words_a_cautions_settings_as_flags(tmp_path, capsys):
    import logging

    from yolo3.cli.common import configure_logging
    from yolo3.cli.train import build_parser
    configure_logging("train", parser=build_parser())
    for caution in cautions(TrainConfig(**_files(tmp_path), freeze_bn=True, bn_stats_images=0)):
        logging.getLogger("yolo3.training.train").warning("%s", caution.message,
                                                 extra={"settings": caution.settings})
    err = capsys.readouterr().err.splitlines()
    assert err[0].startswith("yolo3 train: warning: --freeze-bn: every batch norm")
    assert "(--bn-stats-images)" in err[0]  # every setting a record names is worded
    assert err[1].startswith("yolo3 train: warning: --bn-stats-images=0: the evaluated")


def test_the_command_line_builds_the_config_and_words_settings_as_flags(tmp_path):
    from yolo3.cli.common import _worded
    from yolo3.cli.train import build_parser, config_from_args
    parser = build_parser()
    files = _files(tmp_path)
    args = parser.parse_args(["--annotations", files["annotations"], "--classes", files["classes"],
                              "--output", files["output"], "--variant", "tiny", "--batch-size", "3",
                              "--multi-scale", "320", "416", "--quiet", "--no-ema",
                              "--no-head-transfer"])
    config = config_from_args(args)
    assert config.model.variant == "tiny" and config.hardware.batch_size == 3
    assert config.model.head_transfer is False and TrainConfig().model.head_transfer is True
    assert config.data.multi_scale == (320, 416) and config.output.verbose == 0
    assert config.recipe.ema is False and config.output.output_dir == files["output"]
    # every setting is a flag's destination: the CLI can word each one
    dests = {a.dest for a in parser._actions}
    assert set(TrainConfig(**files).settings()) <= dests
    error = SettingError("need 0 <= freeze_epochs (3) <= epochs (2)", "freeze_epochs", "epochs")
    assert str(_worded(error, parser)) == "need 0 <= --freeze-epochs (3) <= --epochs (2)"
    assert str(_worded(SettingError("output_dir must be a folder", "output_dir"), parser)) == \
        "--output must be a folder"


def test_trains_old_variant_flag_still_works_and_warns(tmp_path, capsys):
    from yolo3.cli.train import build_parser, config_from_args
    files = _files(tmp_path)
    args = build_parser().parse_args(["--annotations", files["annotations"], "--classes",
                                      files["classes"], "--output", files["output"], "--model",
                                      "tiny"])
    assert config_from_args(args).model.variant == "tiny"
    assert "--model is now --variant" in capsys.readouterr().err


@pytest.mark.parametrize("extra, message", [
    (["--batch-size", "0"], "yolo3 train: error: argument --batch-size: expected a whole number "
                            "from 1 to 4096, or auto, got '0'"),
    (["--freeze-epochs", "9", "--epochs", "5"],
     "yolo3 train: error: --freeze-epochs 9 must be at most --epochs 5"),
    (["--assign-iou", "0"], "yolo3 train: error: argument --assign-iou: expected a number above "
                            "0, up to 1, got '0'"),
    (["--ignore-iou", "0"], "yolo3 train: error: argument --ignore-iou: expected a number above "
                            "0, up to 1, got '0'"),
    (["--tile", "8"], "yolo3 train: error: argument --tile: expected a whole number from 32 to "
                      "16384, or auto, got '8'"),
    (["--tile", "64", "--tile-overlap", "1"], "yolo3 train: error: argument --tile-overlap/--overlap: "
                                              "expected a number from 0 to 0.75, got '1'"),
    (["--multi-scale", "48", "96"], "yolo3 train: error: argument --multi-scale: expected a "
                                    "whole number from 32 to 4096, a multiple of 32, got '48'"),
    (["--multi-scale", "320", "96"], "yolo3 train: error: --multi-scale 320 96: the first value "
                                     "must be at most the second"),
    (["--ema-momentum", "0.9", "--no-ema"], "yolo3 train: error: --ema-momentum needs --ema"),
])
def test_a_bad_setting_on_the_command_line_names_its_flag_and_exits_2(tmp_path, capsys, extra,
                                                                       message):
    from cli_harness import run_cli
    files = _files(tmp_path)
    code, err = run_cli(["train", "--annotations", files["annotations"], "--classes",
                         files["classes"], "--output", files["output"], "--variant", "tiny",
                         "--input-size", "64"] + extra, capsys)
    assert code == 2 and message in err and "Traceback" not in err, err
    assert not (tmp_path / "out").exists()  # refused before anything is written


def test_a_tile_that_is_not_a_size_is_refused_by_the_parser(tmp_path, capsys):
    from cli_harness import assert_refused, run_cli
    files = _files(tmp_path)
    code, err = run_cli(["train", "--annotations", files["annotations"], "--classes",
                         files["classes"], "--output", files["output"], "--tile", "huge"], capsys)
    assert_refused(code, err, "--tile", "or auto, got 'huge'")
    assert not (tmp_path / "out").exists()


def test_the_tiles_hand_over_defaults_to_where_the_whole_image_sees_as_well():
    """config cannot import ops (the layers): the default is written twice, and kept equal here."""
    from yolo3.ops.tiles import WHOLE_SEES
    assert TrainConfig().data.tile_whole_from == WHOLE_SEES


def test_each_ranged_setting_has_one_declaration_read_by_its_flag_and_the_check(tmp_path):
    """RANGES is the one declaration: the train flag of every ranged setting parses by it (so a
    value the flag takes is never refused later, as --focal-gamma 6 once was), and check()
    refuses just outside it with the setting named."""
    from yolo3.cli.flags import Number
    from yolo3.cli.train import build_parser
    from yolo3.config.train_config import RANGES
    flags = {a.dest: a.type for a in build_parser()._actions if isinstance(a.type, Number)}
    assert set(RANGES) <= set(flags)
    for name, r in RANGES.items():
        flag = flags[name]
        assert (flag.kind, flag.lo, flag.hi, flag.lo_open, flag.hi_open) == \
            (r.kind, r.lo, r.hi, r.lo_open, r.hi_open), name
        step = 1 if r.kind is int else 1e-3
        for value, inside in ((r.lo - step, False), (r.hi + step, False),
                              (r.lo, not r.lo_open), (r.hi, not r.hi_open)):
            assert flag.accepts(value) == inside == r.holds(value), (name, value)
            if not inside:
                with pytest.raises(SettingError, match=f"^{name} must be") as caught:
                    check(TrainConfig(**_files(tmp_path), **{name: value}))
                assert caught.value.settings == (name,)


def test_auto_batch_is_refused_with_multiworker(tmp_path):
    """Each worker would choose its own batch; the collectives need one."""
    assert check(TrainConfig(**_files(tmp_path), batch_size="auto")) == []
    with pytest.raises(SettingError, match="batch_size auto cannot go with strategy multiworker") \
            as caught:
        check(TrainConfig(**_files(tmp_path), batch_size="auto", strategy="multiworker"))
    assert caught.value.settings == ("batch_size", "strategy")


@pytest.mark.parametrize("settings, named, message", [
    (dict(num_processes=2, process_id=0), ("num_processes", "process_id", "coordinator"),
     "num_processes and process_id place this process in a cluster: they need coordinator"),
    (dict(coordinator="node0"), ("coordinator",), "coordinator must be HOST:PORT"),
    (dict(coordinator="node0:99999", num_processes=2, process_id=0), ("coordinator",),
     "coordinator must be HOST:PORT"),
    (dict(coordinator="node0:1234", num_processes=2), ("coordinator", "process_id"),
     "coordinator node0:1234 needs process_id"),
    (dict(coordinator="node0:1234", num_processes=2, process_id=2),
     ("process_id", "num_processes"), "process_id 2 must be below num_processes 2"),
    (dict(coordinator="auto", strategy="mirrored"), ("coordinator", "strategy"),
     "strategy multiworker with TF_CONFIG"),
    (dict(coordinator="auto", batch_size="auto"), ("batch_size", "coordinator"),
     "each process would choose on its own"),
    (dict(coordinator="auto", cluster_timeout=0), ("cluster_timeout",),
     r"cluster_timeout must be in \[1, 86400\]"),
])
def test_the_cluster_settings_are_checked_together(tmp_path, settings, named, message):
    with pytest.raises(SettingError, match=message) as caught:
        check(TrainConfig(**_files(tmp_path), **settings))
    assert caught.value.settings == named


def test_a_whole_cluster_description_passes(tmp_path):
    for settings in (dict(coordinator="10.0.0.1:12355", num_processes=4, process_id=3),
                     dict(coordinator="auto"), dict(coordinator="auto", process_id=1)):
        check(TrainConfig(**_files(tmp_path), **settings))
