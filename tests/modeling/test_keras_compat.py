"""Each private Keras API yolo3 uses (all behind yolo3.modeling.keras_compat), exercised on its own:
when a Keras release changes one, the matching test here fails with the function's name."""
from __future__ import annotations

import warnings

import h5py
import keras
import numpy as np
import pytest
import tensorflow as tf

from yolo3.modeling import keras_compat


def _branchy_model():
    inputs = keras.Input((4,), name="x")
    a = keras.layers.Dense(3, name="a")(inputs)
    b = keras.layers.Dense(3, name="b")(inputs)
    added = keras.layers.Add(name="add")([a, b])
    out = keras.layers.Dense(2, name="out")(added)
    return keras.Model(inputs, out, name="branchy")


def test_producing_layer_and_inbound_tensors_walk_the_graph():
    model = _branchy_model()
    assert keras_compat.producing_layer(model.outputs[0]) is model.get_layer("out")
    inbound = keras_compat.inbound_tensors(model.get_layer("add"))
    assert [keras_compat.producing_layer(t).name for t in inbound] == ["a", "b"]


def test_node_counts():
    model = _branchy_model()
    assert keras_compat.node_counts(model.get_layer("a")) == (1, 1)
    assert keras_compat.node_counts(model.get_layer("out"))[0] == 1


def test_all_layers_includes_nested_models():
    inner = _branchy_model()
    inputs = keras.Input((4,))
    outer = keras.Model(inputs, keras.layers.Dense(1, name="head")(inner(inputs)), name="outer")
    names = {layer.name for layer in keras_compat.all_layers(outer)}
    assert {"branchy", "a", "b", "add", "out", "head"} <= names and "outer" not in names


def _compiled(seed=0):
    keras.utils.set_random_seed(seed)
    model = _branchy_model()
    model.compile(optimizer=keras.optimizers.Adam(1e-2), loss="mse")
    return model


def test_weights_without_the_optimizer(tmp_path):
    x, y = np.random.default_rng(0).normal(size=(8, 4)), np.zeros((8, 2))
    model = _compiled()
    model.fit(x, y, epochs=1, verbose=0)  # builds the optimiser
    path = tmp_path / "m.weights.h5"
    keras_compat.save_weights_without(model, path, skip=[model.optimizer])
    with h5py.File(path) as f:
        groups = []
        f.visit(groups.append)
    assert groups and not [g for g in groups if "optimizer" in g]
    fresh = _compiled(seed=1)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # "Skipping variable loading for optimizer" would fail here
        keras_compat.load_weights_without(fresh, path, skip=[fresh.optimizer])
    for a, b in zip(model.get_weights(), fresh.get_weights()):
        np.testing.assert_array_equal(a, b)


def test_build_from_element_spec_then_fit():
    model = _compiled()
    ds = tf.data.Dataset.from_tensor_slices((np.ones((8, 4), np.float32),
                                             np.zeros((8, 2), np.float32))).batch(4)
    keras_compat.build_from_element_spec(model, ds.element_spec)
    assert model._compile_loss.built and model.optimizer.built  # built from the spec, not a batch
    history = model.fit(ds, epochs=1, verbose=0, shuffle=False)
    assert np.isfinite(history.history["loss"][0])


def test_replace_step_is_used_by_fit():
    model = _compiled()
    calls = []

    def wrap(step):
        def wrapped(data):
            calls.append(1)
            return step(data)
        return wrapped
    keras_compat.replace_step(model, "train_step", wrap)
    model.fit(np.ones((4, 4)), np.zeros((4, 2)), epochs=1, batch_size=4, verbose=0)
    assert calls  # traced through the replaced step
    with pytest.raises(ValueError, match="train_step or test_step"):
        keras_compat.replace_step(model, "predict_step", wrap)


def test_swap_ema_weights():
    model = _compiled()
    model.compile(optimizer=keras.optimizers.Adam(1e-1, use_ema=True, ema_momentum=0.5), loss="mse")
    x, y = np.random.default_rng(1).normal(size=(8, 4)), np.ones((8, 2))
    model.fit(x, y, epochs=3, batch_size=4, verbose=0)  # fit's end copies the averages in
    model.train_on_batch(x, y)                            # now weights and averages differ
    optimizer = model.optimizer
    weights = [v.numpy().copy() for v in optimizer._trainable_variables]
    averages = [v.numpy().copy() for v in optimizer._model_variables_moving_average]
    assert any(not np.allclose(a, b) for a, b in zip(weights, averages))
    keras_compat.swap_ema_weights(optimizer)
    for v, a in zip(optimizer._trainable_variables, averages):
        np.testing.assert_array_equal(v.numpy(), a)
    for v, w in zip(optimizer._model_variables_moving_average, weights):
        np.testing.assert_array_equal(v.numpy(), w)


@pytest.mark.parametrize("strategy", ["default", "mirrored"])
def test_exact_swap_ema_weights_copies_values(strategy):
    """The training callback swaps model weights and their averages exactly, at an epoch's end and
    back, also under a strategy. Keras's own swap (``a += b; b = a - b; a -= b``) loses the small
    value next to a large one: the case below is where it rounds."""
    import tensorflow as tf
    scope = tf.distribute.MirroredStrategy(["/cpu:0"]) if strategy == "mirrored" else tf.distribute.get_strategy()
    with scope.scope():
        model = _compiled()
        model.compile(optimizer=keras.optimizers.Adam(1e-1, use_ema=True, ema_momentum=0.5),
                      loss="mse")
        model.optimizer.build(model.trainable_variables)
    optimizer = model.optimizer
    rng = np.random.default_rng(2)
    for v, a in zip(optimizer._trainable_variables, optimizer._model_variables_moving_average):
        v.assign(np.full(v.shape, 1e8, np.float32))
        a.assign(rng.uniform(0.5, 1.5, a.shape).astype(np.float32))
    weights = [v.numpy().copy() for v in optimizer._trainable_variables]
    averages = [v.numpy().copy() for v in optimizer._model_variables_moving_average]
    callback = keras_compat.ExactSwapEMAWeights(swap_on_epoch=True)
    callback.set_model(model)
    callback._swap_variables()
    for v, a in zip(optimizer._trainable_variables, averages):
        np.testing.assert_array_equal(v.numpy(), a)
    callback._swap_variables()
    for v, w in zip(optimizer._trainable_variables, weights):
        np.testing.assert_array_equal(v.numpy(), w)
    stock = keras.callbacks.SwapEMAWeights(swap_on_epoch=True)
    stock.set_model(model)
    stock._swap_variables()  # what the project no longer uses: the averages come back rounded
    assert any(not np.array_equal(v.numpy(), a)
               for v, a in zip(optimizer._trainable_variables, averages))


class _Counting(keras.utils.PyDataset):
    """Batch k of epoch e is ``[[e, k]]``; ``on_epoch_end`` moves to the next epoch."""

    def __init__(self):
        super().__init__(workers=2)
        self.epoch = 0

    def __len__(self):
        return 3

    def __getitem__(self, k):
        return np.array([[self.epoch, k]], np.float32), np.zeros((1,), np.float32)

    def on_epoch_end(self):
        self.epoch += 1


def test_py_dataset_epoch_reads_as_fit_does_and_ends_the_epoch():
    from yolo3.modeling.keras_compat import py_dataset_epoch
    dataset = _Counting()
    for epoch in range(2):
        batches, end = py_dataset_epoch(dataset)
        got = [x[0].tolist() for x, _ in batches]
        end()
        assert got == [[epoch, 0], [epoch, 1], [epoch, 2]]
    assert dataset.epoch == 2


def test_call_graph_lists_this_models_calls_in_order_even_of_shared_layers():
    image = keras.Input((4, 4, 3), name="image")
    conv = keras.layers.Conv2D(2, 1, name="conv")
    relu = keras.layers.ReLU(name="relu")
    first = keras.Model(image, relu(conv(image)))
    other = keras.Input((4, 4, 3), name="other")
    added = keras.layers.Add(name="add")([relu(conv(other)), conv(other)])  # conv called twice
    second = keras.Model(other, added)
    calls = keras_compat.call_graph(second)
    names = [layer.name for layer, _, _ in calls]
    assert names.count("conv") == 2 and names[0] == "other" and names[-1] == "add"
    assert "image" not in names  # the first model's input is not this graph's
    produced = set()
    for layer, inputs, outputs in calls:  # every input made before it is used
        assert all(id(t) in produced for t in inputs), layer.name
        produced.update(id(t) for t in outputs)
    assert [layer.name for layer, _, _ in keras_compat.call_graph(first)] == ["image", "conv",
                                                                               "relu"]
