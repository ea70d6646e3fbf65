"""yolo3.training.user_callbacks: the user's Keras callbacks see the template, never the model fit
runs; their stop reaches fit; train(config, callbacks=...) runs them (records the epochs' logs,
stops early, saves the template; under the parallel wrapper in a fresh process)."""
from __future__ import annotations

import csv
import json

import keras
import numpy as np
import pytest
from multidevice_helpers import run_with_devices

from yolo3.config.train_config import ConfigError
from yolo3.modeling.bodies import build_body
from yolo3.modeling.keras_compat import overrides_hook
from yolo3.training.train import train
from yolo3.training.user_callbacks import ForTemplate, check_callbacks, for_template


class Recorder(keras.callbacks.Callback):
    """Records the epochs' logs and the model it was handed."""

    def __init__(self):
        super().__init__()
        self.epochs, self.models, self.begins = [], [], 0

    def on_train_begin(self, logs=None):
        self.begins += 1
        self.models.append(self.model)

    def on_epoch_end(self, epoch, logs=None):
        self.epochs.append((epoch, dict(logs or {})))


class StopAfter(keras.callbacks.Callback):
    def __init__(self, epoch):
        super().__init__()
        self.epoch = epoch

    def on_epoch_end(self, epoch, logs=None):
        if epoch >= self.epoch:
            self.model.stop_training = True


def _template_and_wrapper():
    """A template and a model that runs it (as the parallel wrapper does): fit runs the second."""
    x = keras.Input((3,))
    template = keras.Model(x, keras.layers.Dense(1, name="d")(x), name="template")
    y = keras.Input((3,))
    outer = keras.Model(y, template(y), name="wrapper")
    outer.compile(optimizer="sgd", loss="mse")
    return template, outer


def test_the_callback_sees_the_template_and_its_stop_reaches_fit():
    template, outer = _template_and_wrapper()
    recorder, stop = Recorder(), StopAfter(1)
    wrapped = for_template([recorder, stop], template)
    x, y = np.ones((8, 3), np.float32), np.ones((8, 1), np.float32)
    history = outer.fit(x, y, epochs=6, batch_size=4, verbose=0, callbacks=wrapped)
    assert recorder.models == [template]  # never the model fit ran
    assert [e for e, _ in recorder.epochs] == [0, 1]  # stopped after epoch 1, not 5
    assert len(history.history["loss"]) == 2 and "loss" in recorder.epochs[0][1]
    assert [w.stopped for w in wrapped] == [False, True]
    # the next fit (a stage) starts clean: the template's stop flag is reset
    outer.fit(x, y, epochs=1, batch_size=4, verbose=0, callbacks=for_template([recorder], template))
    assert recorder.begins == 2 and recorder.epochs[-1][0] == 0


def test_hooks_the_callback_does_not_define_stay_keras_no_ops():
    """Batch hooks nobody defines keep fit's asynchronous dispatch (Keras checks for its
    defaults); a legacy on_batch_end still runs through on_train_batch_end."""
    template, _ = _template_and_wrapper()
    plain = ForTemplate(Recorder(), template)
    assert not overrides_hook(plain, "on_train_batch_end")
    assert overrides_hook(plain, "on_epoch_end") and overrides_hook(plain, "on_train_begin")

    class Legacy(keras.callbacks.Callback):
        seen = 0

        def on_batch_end(self, batch, logs=None):
            Legacy.seen += 1
    legacy = ForTemplate(Legacy(), template)
    assert overrides_hook(legacy, "on_train_batch_end")
    legacy.set_model(template)
    legacy.on_train_batch_end(0, {})
    assert Legacy.seen == 1


def test_anything_but_a_keras_callback_is_refused_by_position():
    assert check_callbacks(None) == []
    with pytest.raises(Exception, match=r"callbacks\[1\]: expected a keras.callbacks.Callback, "
                                        "got function"):
        check_callbacks([Recorder(), lambda: None])
    with pytest.raises(Exception, match="expected a list of keras.callbacks.Callback, got one "
                                        "Recorder"):
        check_callbacks(Recorder())


@pytest.mark.slow  # CI runs it: a 2-epoch run, about 25 s; the adapter's tests above stay default
def test_train_runs_the_users_callbacks_after_its_own(step_config, tmp_path):
    """Three callbacks in one run: the epochs' logs (the validation mAP of yolo3's evaluation in
    them), a stop after epoch 2 of 4 that ends the run, and one that saves the template's
    weights, which load into a fresh template."""
    recorder, saved = Recorder(), tmp_path / "saved.weights.h5"

    class Saver(keras.callbacks.Callback):
        def on_epoch_end(self, epoch, logs=None):
            self.model.save_weights(saved)
    config = step_config(epochs=4, freeze_epochs=1, eval_every=1)
    with pytest.raises(ConfigError, match=r"callbacks\[0\]"):
        train(config, callbacks=["not a callback"])
    assert not (tmp_path / "out").exists()  # refused before anything was written
    result = train(config, callbacks=[recorder, StopAfter(1), Saver()])
    assert [e for e, _ in recorder.epochs] == [0, 1]
    assert all("mAP50_95" in logs and "val_loss" in logs for _, logs in recorder.epochs)
    assert recorder.begins == 2  # stage 1 (frozen) and stage 2 are one fit each
    template = recorder.models[0]
    assert all(m is template for m in recorder.models)
    assert result.epochs_completed == 2
    rows = list(csv.DictReader(open(tmp_path / "out" / "history.csv")))
    assert [int(r["epoch"]) for r in rows] == [0, 1]
    # what the user saved at the last epoch's end is the template holding the weights yolo3
    # saved then (the averaged ones: EMA is on): it loads into a fresh template, whose layers
    # equal those of last.weights.h5
    clone = keras.models.clone_model(template)
    clone.load_weights(saved)
    body = build_body("tiny", len(open(step_config().data.classes).read().split()),
                      input_shape=(64, 64))
    body.load_weights(tmp_path / "out" / "last.weights.h5")
    compared = 0
    for layer in body.layers:
        if layer.weights:
            inner = clone.get_layer("tiny_yolov3_body").get_layer(layer.name)
            for a, b in zip(inner.get_weights(), layer.get_weights()):
                np.testing.assert_array_equal(a, b)
                compared += 1
    assert compared > 20


@pytest.mark.slow  # CI runs it (.ci/run): a fresh process with 2 logical CPUs, about 35 s
def test_a_callback_under_the_parallel_wrapper_saves_the_template(dataset, tmp_path):
    ann, classes = dataset
    out = tmp_path / "out"
    result = run_with_devices(2, f"""
        import logging, keras, numpy as np
        from yolo3.config.train_config import TrainConfig
        from yolo3.modeling.bodies import build_body
        from yolo3.training.train import train
        stages = []
        class Lines(logging.Handler):
            def emit(self, record):
                stages.append(record.getMessage())
        logging.getLogger("yolo3.training.stages").addHandler(Lines())
        logging.getLogger("yolo3.training.stages").setLevel(logging.INFO)
        class Saver(keras.callbacks.Callback):
            def on_epoch_end(self, epoch, logs=None):
                self.model.save_weights({str(tmp_path / "cb.weights.h5")!r})
        config = TrainConfig(annotations={str(ann)!r}, classes={classes!r}, output={str(out)!r},
                             model="tiny", input_size=64, batch_size=2, epochs=2,
                             freeze_epochs=1, cpu_replicas=2, seed=3, pictures=False, verbose=0)
        saver = Saver()
        train(config, callbacks=[saver])
        clone = keras.models.clone_model(saver.model)
        clone.load_weights({str(tmp_path / "cb.weights.h5")!r})
        body = build_body("tiny", {len(open(classes).read().split())}, input_shape=(64, 64))
        body.load_weights({str(out / "last.weights.h5")!r})
        inner = clone.get_layer("tiny_yolov3_body")
        differences = [float(np.max(np.abs(a - b))) for layer in body.layers if layer.weights
                       for a, b in zip(inner.get_layer(layer.name).get_weights(),
                                       layer.get_weights())]
        result = dict(stages=[s for s in stages if s.startswith("stage")],
                      differences=differences, model=saver.model.name)
    """)
    # fit ran the wrapper over 2 replicas, the callback held the single-device template, and what
    # it saved at the last epoch's end is what yolo3 saved then (last.weights.h5)
    assert result["stages"] and all("2 replica(s)" in s and "wrapper" in s
                                    for s in result["stages"]), result["stages"]
    assert not result["model"].endswith("_x2") and len(result["differences"]) > 20
    assert max(result["differences"]) == 0.0
