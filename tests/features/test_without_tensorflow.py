"""The input pipeline's choice (``--pipeline``) where TensorFlow is missing: made and refused by
rule. The commands a user runs on a JAX install without TensorFlow, end to end in a real virtual
environment without it: tests/features/test_notf_venv.py; detection in processes where ``import
tensorflow`` fails (tests/no_tensorflow): tests/features/test_backends.py.
"""
from __future__ import annotations

import pytest

from yolo3.config.train_config import ConfigError, TrainConfig
from yolo3.training.datasets import pick_pipeline


def _config(tmp_path, **settings) -> TrainConfig:
    (tmp_path / "a.txt").write_text("")
    (tmp_path / "c.txt").write_text("a\n")
    return TrainConfig(annotations=str(tmp_path / "a.txt"), classes=str(tmp_path / "c.txt"),
                       output=str(tmp_path / "out"), **settings)


def test_auto_picks_tf_data_where_tensorflow_imports_and_numpy_where_it_does_not(tmp_path,
                                                                              monkeypatch):
    import yolo3.training.datasets as datasets
    assert pick_pipeline(_config(tmp_path)) == "tf"
    assert pick_pipeline(_config(tmp_path, pipeline="numpy")) == "numpy"
    monkeypatch.setattr(datasets, "installed", lambda package: package != "tensorflow")
    assert pick_pipeline(_config(tmp_path)) == "numpy"
    with pytest.raises(ConfigError, match="pipeline tf: TensorFlow is not installed") as e:
        pick_pipeline(_config(tmp_path, pipeline="tf"))
    assert e.value.settings == ("pipeline",)


def test_the_numpy_pipeline_under_a_tf_distribute_strategy_is_refused(tmp_path):
    from types import SimpleNamespace
    from yolo3.training.jax_cluster import SINGLE
    placement = SimpleNamespace(strategy=object(), group=SINGLE)
    with pytest.raises(ConfigError, match="mirrored strategy") as e:
        pick_pipeline(_config(tmp_path, pipeline="numpy", strategy="mirrored"), placement)
    assert set(e.value.settings) == {"pipeline", "strategy"}
    with pytest.raises(Exception, match="pipeline must be one of auto, tf, numpy"):
        from yolo3.config.train_config import check
        check(_config(tmp_path, pipeline="grain"))


def test_numpy_with_multi_scale_is_refused_on_tensorflow_only(tmp_path, monkeypatch):
    """Keras's PyDataset adapter on TensorFlow fixes the batch shape from the first batches (a
    later size failed with a bare InvalidArgumentError); JAX and PyTorch take every size."""
    import yolo3.training.datasets as datasets
    config = _config(tmp_path, pipeline="numpy", multi_scale=(64, 128))
    with pytest.raises(ConfigError, match="TensorFlow backend") as e:
        pick_pipeline(config)
    assert set(e.value.settings) == {"pipeline", "multi_scale"}
    assert pick_pipeline(_config(tmp_path, multi_scale=(64, 128))) == "tf"  # auto: tf.data
    monkeypatch.setattr(datasets.keras.backend, "backend", lambda: "jax")
    assert pick_pipeline(config) == "numpy"
