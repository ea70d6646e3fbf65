"""yolo3 tune's command line (bad input: one line, exit 2, nothing written) and yolo3 train
--settings (the file's values where no flag was given; flags win). The study itself:
tests/training/test_tuning.py."""
from __future__ import annotations

import pytest

from yolo3.cli.train import build_parser, config_from_args
from yolo3.cli.tune import main
from yolo3.data.synthetic import make_synthetic_dataset


@pytest.fixture(scope="module")
def dataset(tmp_path_factory):
    d = tmp_path_factory.mktemp("tune_ds")
    ann, classes = make_synthetic_dataset(str(d), 6, (64, 64), val_fraction=0.3)
    return ann, classes


def _args(dataset, out, *extra):
    ann, classes = dataset
    return ["--annotations", ann, "--classes", classes, "--variant", "tiny", "--input-size", "64",
            "--output", str(out), "--quiet", *extra]


@pytest.mark.parametrize("space, trials, message", [
    ("lr: {low: 0.1, high: 0.01}\n", "2", "space.yaml:1: lr: low (0.1) must be below high"),
    ("lr: {low: 0.001, high: 0.01}\n", "0", "argument --trials: expected a whole number from 1"),
    ("optimizer: {choices: [adam, rmsprop]}\n", "2", "space.yaml:1: choice 'rmsprop'"),
    ("mosaic: {low: 0, high: 1}\nlr: {low: 0.001, high: 0.01}\n", "2 --no-augment",
     "--space: --mosaic 1.0 cannot go with the other settings: --mosaic needs augmentation"),
])
def test_bad_input_is_one_line_exit_2_and_nothing_written(dataset, tmp_path, capsys, space,
                                                          trials, message):
    (tmp_path / "space.yaml").write_text(space)
    out = tmp_path / "study"
    code = main(_args(dataset, out, "--space", str(tmp_path / "space.yaml"), "--trials",
                      *trials.split()))
    err = capsys.readouterr().err
    assert code == 2 and message in err and "Traceback" not in err, err
    assert not out.exists()


def test_train_reads_a_settings_file_and_flags_given_beside_it_win(dataset, tmp_path):
    ann, classes = dataset
    path = tmp_path / "best.yaml"
    path.write_text(f"annotations: {ann}\nclasses: {classes}\nvariant: tiny-af\nlr: 0.002\n"
                    "mosaic: 0.25\nepochs: 7\n")
    parser = build_parser()
    args = parser.parse_args(["--settings", str(path), "--output", str(tmp_path / "o"),
                              "--epochs", "3"])
    args.parser = parser
    config = config_from_args(args)
    assert (config.model.variant, config.recipe.lr, config.data.mosaic) == ("tiny-af", 0.002, 0.25)
    assert config.schedule.epochs == 3 and config.data.annotations == ann  # the flag won
    path.write_text("lr: fast\n")
    from yolo3.core.errors import FileFormatError
    with pytest.raises(FileFormatError, match=r"best.yaml:1: lr must be none or a number, got .fast."):
        config_from_args(args)
