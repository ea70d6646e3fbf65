"""tools/_setup_env.sh, the set-up both commands share: its disk check says, in one line, how
much is free where the install or the tests will write (CI's stop 80 died in pip with
``OSError: [Errno 28] No space left on device`` and no figure)."""
from __future__ import annotations

import subprocess

from locations import REPO


def _warn(path, need_gb: int) -> str:
    script = (f'source tools/_setup_env.sh && yolo3_warn_low_disk "{path}" {need_gb} '
              '"the check\'s test"')
    done = subprocess.run(["bash", "-c", script], cwd=REPO, capture_output=True, text=True,
                          check=True)
    assert done.stdout == ""
    return done.stderr


def test_low_disk_is_named_with_the_free_figure_and_the_need(tmp_path):
    message = _warn(tmp_path / "venv", 10**7)  # ten petabytes: never free
    assert message.startswith("warning: ") and message.count("\n") == 1
    free_mb = int(message.split()[1])
    assert free_mb >= 0 and "MB free on the disk of" in message
    assert f"{tmp_path / 'venv'}" in message and "the check's test needs about 10000000 GB" \
        in message and "No space left on device" in message


def test_enough_disk_says_nothing(tmp_path):
    assert _warn(tmp_path / "venv", 0) == ""


def test_a_missing_folder_says_nothing_rather_than_failing(tmp_path):
    assert _warn(tmp_path / "absent" / "deeper" / "venv", 10**7) == ""
