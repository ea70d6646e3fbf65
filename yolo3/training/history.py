"""The training history file (``history.csv``): the one reader, writer and repair.

Columns are ``epoch`` plus one per logged value (``loss``, ``val_loss``, ``lr``, ``mAP50`` ...);
each row is one epoch. A second training stage restarts Keras's epoch counter only when it is
started without ``initial_epoch``; yolo3 numbers epochs absolutely.
"""
from __future__ import annotations

import csv
import math
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple, Union

from yolo3.core.errors import FileFormatError, PathLike
from yolo3.core.fileio import read_csv_rows
from yolo3.core.output_folder import OutputFolder

__all__ = ["HISTORY", "read_history", "read_rows", "truncate_history", "write_history",
           "append_epoch", "completed_epochs"]

HISTORY = "history.csv"  # in a run folder


def read_rows(path: PathLike) -> Tuple[List[str], List[Dict[str, str]]]:
    """``(field names, rows)`` of a history file as text; ``([], [])`` when it does not exist."""
    path = Path(path)
    if not path.exists():
        return [], []
    return read_csv_rows(path, "history")


def read_history(path: PathLike) -> Dict[str, List[float]]:
    """Columns of a history file as float lists; ``epoch`` is renumbered 1..N in file order.

    Empty cells read as NaN. Raises :class:`FileFormatError` (file and line) for a missing file, no
    rows, no ``loss`` column, or a cell that is not a number.
    """
    if not Path(path).exists():
        raise FileFormatError(path, "history file not found")
    fields, rows = read_rows(path)
    if not rows:
        raise FileFormatError(path, "history file has no epochs")
    columns: Dict[str, List[float]] = {}
    for line_no, row in enumerate(rows, start=2):
        for key, value in row.items():
            if key is None or key == "epoch":
                continue
            try:
                columns.setdefault(key, []).append(float(value) if value not in ("", None) else math.nan)
            except ValueError:
                raise FileFormatError(path, f"column {key!r}: {value!r} is not a number",
                                      line=line_no) from None
    if "loss" not in columns:
        raise FileFormatError(path, "history file has no 'loss' column")
    columns["epoch"] = [float(i) for i in range(1, len(rows) + 1)]
    return columns


def _row_epoch(row: Dict[str, str]) -> Optional[int]:
    try:
        return int(row.get("epoch") or "")
    except ValueError:
        return None


def completed_epochs(path: PathLike) -> int:
    """Number of complete epoch rows in a history file (0 when there is none)."""
    _, rows = read_rows(path)
    return sum(1 for r in rows if _row_epoch(r) is not None and None not in r.values())


def truncate_history(folder: Union[OutputFolder, PathLike], epochs: int,
                     name: str = HISTORY) -> None:
    """Keep only the rows of epochs ``0 .. epochs - 1`` of the history file ``name`` in the run's
    ``folder`` (:class:`yolo3.core.output_folder.OutputFolder`; atomically). yolo3 0.4's form, the
    history file's own path, still works: its folder is opened under the ownership rule.

    On resume the epochs after the restored state are trained again, so their rows (written before a
    crash lost the matching checkpoint) must go: history.csv then lists every epoch exactly once.
    Malformed rows (a line cut by a crash) are dropped too.
    """
    if not isinstance(folder, OutputFolder):
        path = Path(folder)
        if not path.exists():
            return
        with OutputFolder(path.parent, "output_dir", exist_ok=True) as opened:
            return truncate_history(opened, epochs, path.name)
    fields, rows = read_rows(folder.path / name)
    if not fields:
        return
    keep = [r for r in rows if _row_epoch(r) is not None and _row_epoch(r) < epochs
            and None not in r.values()]
    write_history(folder, fields, keep, name)


def write_history(folder: OutputFolder, fields: Sequence[str], rows: Sequence[Dict[str, object]],
                  name: str = HISTORY) -> None:
    """Write the history file ``name`` in ``folder`` whole: ``fields`` as its header, one line per
    row (a missing value: an empty cell, which :func:`read_history` reads as NaN)."""
    def write(tmp: str) -> None:
        with open(tmp, "w", newline="", encoding="utf-8") as f:
            writer = csv.DictWriter(f, fieldnames=list(fields), restval="")
            writer.writeheader()
            writer.writerows(rows)
    folder.write(name, write)


def append_epoch(folder: OutputFolder, epoch: int, logs: Dict[str, object],
                 name: str = HISTORY) -> None:
    """Add the row of ``epoch`` (``logs``: its values) to the history file ``name`` in ``folder``,
    rewriting it whole (a column first logged now is added, empty in earlier rows)."""
    fields, rows = read_rows(folder.path / name)
    fields = fields or ["epoch"]
    fields += sorted(k for k in logs if k not in fields)
    rows.append({"epoch": epoch, **logs})
    write_history(folder, fields, rows, name)
