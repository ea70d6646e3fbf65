"""yolo3.training.run_folder: the run folder made, its side files, a killed run's temporaries swept, a
worker's own folder."""
from __future__ import annotations

from pathlib import Path

import numpy as np

from yolo3.data.class_names import read_classes
from yolo3.ops.anchors import read_anchors
from yolo3.training.data_step import prepare_data
from yolo3.training.distribute import ClusterTask
from yolo3.training.run_folder import prepare_output


def test_prepare_output_chief_and_worker(dataset, tmp_path, step_config):
    config = step_config()
    data = prepare_data(config)
    out = Path(config.output.output_dir)
    run = prepare_output(config, data, ClusterTask())
    assert run.chief and run.write_dir == out and run.folder.is_open
    assert read_classes(out / "classes.txt") == data.class_names
    np.testing.assert_array_equal(read_anchors(out / "anchors.txt"), data.anchors)
    worker = prepare_output(config, data, ClusterTask(num_workers=2, task_type="worker", index=1,
                                                      is_chief=False))
    assert not worker.chief and worker.write_dir == out / ".worker-1"


def test_an_old_run_folder_is_the_runs_own_only_when_resumed(dataset, tmp_path, step_config):
    """A folder without a manifest holding a run's files (yolo3 0.3): resumed, they and its
    ownerless temporaries are the run's (the temporary swept); not resumed, they are the user's."""
    import pytest

    from yolo3.core.errors import SettingError
    from yolo3.core.output_folder import read_contents
    from yolo3.training.run_folder import check_run_folder, old_run_entries
    config = step_config()
    out = Path(config.output.output_dir)
    out.mkdir(parents=True)
    (out / "final.keras").write_text("a run's")
    (out / "resume.json").write_text("{}")
    (out / ".tmp-last.keras-x").write_text("half written")
    assert old_run_entries(config) == ()
    with pytest.raises(SettingError, match="final.keras"):
        check_run_folder(config, prepare_data(config))
    resumed = step_config(resume=True)
    assert "final.keras" in old_run_entries(resumed)
    prepare_output(resumed, prepare_data(resumed), ClusterTask()).folder.close()
    assert not (out / ".tmp-last.keras-x").exists()
    assert "final.keras" in read_contents(out).ours  # recorded with its hash now


def test_a_multiworker_restart_starts_at_the_backups_epoch(dataset, tmp_path, step_config,
                                                           monkeypatch):
    """Without --resume a multi-worker run restarted after a worker died goes on from Keras's
    BackupAndRestore: the start epoch (which positions the batches) is the backup's, and the
    history rows of the epochs trained again are dropped."""
    import json

    from yolo3.training.run_folder import restore_state
    monkeypatch.setenv("TF_CONFIG", json.dumps({"cluster": {"worker": ["127.0.0.1:1", "127.0.0.1:2"]},
                                                "task": {"type": "worker", "index": 0}}))
    config = step_config(strategy="multiworker")
    run = prepare_output(config, prepare_data(config), ClusterTask())
    out = Path(config.output.output_dir)
    run.folder.write_text("history.csv", "epoch,loss\n0,3.0\n1,2.0\n2,1.5\n")
    assert restore_state(config, run, None) == (None, 0, None)  # no backup: a fresh start
    (out / "backup").mkdir()
    (out / "backup" / "training_metadata.json").write_text(json.dumps({"epoch": 2, "batch": -1}))
    assert restore_state(config, run, None) == (None, 2, None)
    assert (out / "history.csv").read_text().splitlines() == ["epoch,loss", "0,3.0", "1,2.0"]
    run.folder.close()
