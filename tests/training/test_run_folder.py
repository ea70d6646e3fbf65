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
    out.mkdir(parents=True)
    (out / ".tmp-last.keras-x").write_text("half written")
    run = prepare_output(config, data, ClusterTask())
    assert run.chief and run.write_dir == out and not (out / ".tmp-last.keras-x").exists()
    assert read_classes(out / "classes.txt") == data.class_names
    np.testing.assert_array_equal(read_anchors(out / "anchors.txt"), data.anchors)
    worker = prepare_output(config, data, ClusterTask(num_workers=2, task_type="worker", index=1,
                                                      is_chief=False))
    assert not worker.chief and worker.write_dir == out / ".worker-1"
