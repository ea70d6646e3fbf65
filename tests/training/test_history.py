"""Training history files (yolo3.training.history): written whole through the run's output folder,
read back, repaired on resume."""
from __future__ import annotations

import math

import pytest

from yolo3.core.errors import SettingError
from yolo3.core.output_folder import OutputFolder
from yolo3.training.history import append_epoch, read_history, truncate_history, write_history


def test_truncate_history_keeps_earlier_epochs_and_drops_cut_rows(tmp_path):
    with OutputFolder(tmp_path / "run", "--output") as folder:
        folder.write_text("history.csv", "epoch,loss,val_loss\n0,3.0,3.5\n1,2.0,2.5\n2,1.0,1.5\n"
                                         "3,0.9\n")
        path = folder.path / "history.csv"
        truncate_history(folder, 10)  # only the row a crash cut short goes
        assert path.read_text().splitlines()[-1] == "2,1.0,1.5"
        truncate_history(folder, 2)
        assert path.read_text().splitlines() == ["epoch,loss,val_loss", "0,3.0,3.5", "1,2.0,2.5"]
        truncate_history(folder, 1, "missing.csv")  # no file: nothing to do
        assert not (folder.path / "missing.csv").exists()


def test_epochs_are_appended_with_columns_first_logged_later(tmp_path):
    with OutputFolder(tmp_path / "run", "--output") as folder:
        append_epoch(folder, 0, {"loss": 2.0, "val_loss": 2.5})
        append_epoch(folder, 1, {"loss": 1.0, "val_loss": 1.5, "mAP50": 0.25})
        text = (folder.path / "history.csv").read_text().splitlines()
    assert text == ["epoch,loss,val_loss,mAP50", "0,2.0,2.5,", "1,1.0,1.5,0.25"]
    columns = read_history(folder.path / "history.csv")
    assert columns["loss"] == [2.0, 1.0] and math.isnan(columns["mAP50"][0])


def test_a_history_file_the_user_wrote_is_never_replaced(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    (run / "history.csv").write_text("epoch,loss\n0,9.0\n")
    with OutputFolder(run, "--output", exist_ok=True) as folder:
        with pytest.raises(SettingError, match="never replaces"):
            write_history(folder, ["epoch", "loss"], [{"epoch": 0, "loss": 1.0}])
    assert (run / "history.csv").read_text() == "epoch,loss\n0,9.0\n"


def test_the_history_files_own_path_still_works(tmp_path):
    path = tmp_path / "run" / "history.csv"
    with OutputFolder(path.parent, "--output") as folder:
        write_history(folder, ["epoch", "loss"], [{"epoch": 0, "loss": 2.0},
                                                  {"epoch": 1, "loss": 1.0}])
    truncate_history(path, 1)  # yolo3 0.4's form
    assert path.read_text().splitlines() == ["epoch,loss", "0,2.0"]
    truncate_history(tmp_path / "none.csv", 1)  # no file: nothing to do
