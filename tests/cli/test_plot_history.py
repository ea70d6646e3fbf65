"""Loss-curve plotting from a CSVLogger history."""
from __future__ import annotations

import numpy as np
import pytest
from PIL import Image

from yolo3.cli.plot_history import main, read_history
from yolo3.core.errors import FileFormatError


def test_reads_columns_and_writes_png(tmp_path):
    history = tmp_path / "history.csv"
    history.write_text("epoch,loss,lr,val_loss\n0,10.5,0.001,12\n1,5.25,0.001,6\n0,4,0.0001,5\n")
    columns = read_history(str(history))
    # Epochs are renumbered in file order (a second training stage restarts Keras's counter).
    assert columns["epoch"] == [1.0, 2.0, 3.0]
    assert columns["loss"] == [10.5, 5.25, 4.0]
    assert columns["val_loss"] == [12.0, 6.0, 5.0]
    out = tmp_path / "curves.png"
    assert main(["--history", str(history), "--out", str(out)]) == 0
    image = np.asarray(Image.open(out).convert("RGB"))
    assert image.shape[0] > 100 and image.shape[1] > 100
    assert image.std() > 10  # something was drawn


@pytest.mark.parametrize("text, reason", [
    ("", "no epochs"),
    ("epoch,val_loss\n0,1\n", "no 'loss' column"),
    ("epoch,loss\n0,abc\n", r"h\.csv:2: column .loss.: .abc. is not a number"),
])
def test_bad_history_is_refused_with_location(tmp_path, text, reason):
    history = tmp_path / "h.csv"
    history.write_text(text)
    with pytest.raises(FileFormatError, match=reason) as info:
        read_history(str(history))
    assert str(history) in str(info.value)
    assert main(["--history", str(history), "--out", str(tmp_path / "x.png")]) == 2  # bad input


def test_without_matplotlib_one_line_naming_the_extra(tmp_path, monkeypatch, capsys):
    import builtins
    history = tmp_path / "history.csv"
    history.write_text("epoch,loss\n0,1.0\n")
    real_import = builtins.__import__

    def no_matplotlib(name, *args, **kwargs):
        if name == "matplotlib" or name.startswith("matplotlib."):
            raise ImportError(f"No module named {name!r}")
        return real_import(name, *args, **kwargs)
    monkeypatch.setattr(builtins, "__import__", no_matplotlib)
    monkeypatch.setattr("importlib.import_module", lambda name, *a: no_matplotlib(name))
    assert main(["--history", str(history), "--out", str(tmp_path / "c.png")]) == 2
    err = capsys.readouterr().err
    assert "yolo3[plot]" in err and "Traceback" not in err
    assert not (tmp_path / "c.png").exists()
