"""Training history files (yolo3.training.history)."""
from __future__ import annotations

from yolo3.training.history import truncate_history


def test_truncate_history_keeps_earlier_epochs_and_drops_cut_rows(tmp_path):
    path = tmp_path / "history.csv"
    path.write_text("epoch,loss,val_loss\n0,3.0,3.5\n1,2.0,2.5\n2,1.0,1.5\n3,0.9\n")
    truncate_history(path, 10)  # only the row a crash cut short goes
    assert path.read_text().splitlines()[-1] == "2,1.0,1.5"
    truncate_history(path, 2)
    assert path.read_text().splitlines() == ["epoch,loss,val_loss", "0,3.0,3.5", "1,2.0,2.5"]
    truncate_history(tmp_path / "missing.csv", 1)  # no file: nothing to do
    assert not (tmp_path / "missing.csv").exists()
