"""Several yolo3 command lines in one process, so that a backend starts once for them all:
``python tests/backend_cli.py '[["detect", ...], ["detect", ...]]'`` prints one line
``@@CLI@@[{"code", "out", "err"}, ...]``, each command's exit code and what it printed.
tests/features/test_backends.py runs it under JAX and PyTorch with TensorFlow unimportable."""
from __future__ import annotations

import contextlib
import io
import json
import sys

MARK = "@@CLI@@"


def main(commands) -> list:
    from yolo3.cli import main as yolo3_main
    results = []
    for argv in commands:
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                code = yolo3_main(argv)
            except SystemExit as e:
                code = e.code if isinstance(e.code, int) else 2
        results.append({"code": code, "out": out.getvalue(), "err": err.getvalue()})
    return results


if __name__ == "__main__":
    print(MARK + json.dumps(main(json.loads(sys.argv[1]))))
