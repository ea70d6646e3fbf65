"""What the command-line feature tests share: running a command in-process, hashing every file a
command must not touch, and a small trained run to run commands on."""
from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Dict, List, Tuple

from yolo3.cli import main as yolo3_main


def snapshot(*roots: Path) -> Dict[str, str]:
    """Path -> SHA-256 of every file under ``roots`` (folders as ``<dir>``, links as their target,
    a missing root as ``<missing>``), hidden files included."""
    out: Dict[str, str] = {}
    for root in roots:
        root = Path(root)
        if not root.exists():
            out[str(root)] = "<missing>"
        elif root.is_file():
            out[str(root)] = hashlib.sha256(root.read_bytes()).hexdigest()
        else:
            for p in sorted(root.rglob("*")):
                if p.is_symlink():
                    out[str(p)] = f"-> {p.readlink()}"
                elif p.is_file():
                    out[str(p)] = hashlib.sha256(p.read_bytes()).hexdigest()
                else:
                    out[str(p)] = "<dir>"
            out[str(root)] = "<dir>"
    return out


def run_cli(argv: List[object], capsys) -> Tuple[int, str]:
    """``(exit code, stderr)`` of ``yolo3 ARGV`` run in this process (argparse's own refusals,
    which exit through SystemExit, included)."""
    try:
        code = yolo3_main([str(a) for a in argv])
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else 2
    return code, capsys.readouterr().err


def assert_refused(code: int, err: str, *named: object, exit_code: int = 2) -> None:
    """A refusal as every command gives one: ``exit_code``, one ``yolo3 ...: error:`` line naming
    each of ``named``, no traceback and no catch-all ``unexpected ...``."""
    assert code == exit_code, err
    assert "Traceback" not in err and "unexpected" not in err, err
    assert err.startswith("yolo3 ") or "\nyolo3 " in err, err
    assert ": error: " in err, err
    for name in named:
        assert str(name) in err, (name, err)


def make_trained_world(root: Path) -> dict:
    """A small synthetic set and one trained tiny run (custom anchors, 64 px, one epoch)."""
    from yolo3.data.synthetic import make_synthetic_dataset
    data = root / "data"
    make_synthetic_dataset(str(data), 12, (96, 96), val_fraction=0.25, seed=3)
    anchors = root / "anchors.txt"
    anchors.write_text("5,6, 9,10, 14,15, 20,22, 30,28, 40,44\n")
    run = root / "run"
    code = yolo3_main(["train", "--annotations", str(data / "train.txt"), "--val-annotations",
                       str(data / "val.txt"), "--classes", str(data / "classes.txt"), "--model",
                       "tiny", "--input-size", "64", "--batch-size", "2", "--epochs", "1",
                       "--freeze-epochs", "0", "--anchors", str(anchors), "--output", str(run),
                       "--no-augment", "--quiet", "--eval-every", "0"])
    assert code == 0 and (run / "final.keras").exists() and (run / "resume.json").exists()
    return {"root": root, "data": data, "run": run, "anchors": anchors}
