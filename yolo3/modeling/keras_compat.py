"""Every use of a private Keras API, in one place (``tests/modeling/test_keras_compat.py`` checks each one).

Keras 3 has no public way to walk a functional graph backwards, to list the layers of nested
models, to save weights without a compiled model's optimiser, or to build a compiled model's
metrics from a dataset's element spec. yolo3 needs all four; when a Keras release changes one of
these internals, only this module (and its test, which then fails loudly) has to change.
"""
from __future__ import annotations

from typing import Callable, Iterator, List, Optional, Sequence, Tuple

import keras

__all__ = ["producing_layer", "inbound_tensors", "node_counts", "all_layers",
           "save_weights_without", "load_weights_without", "build_from_element_spec",
           "replace_step", "swap_ema_weights", "uses_ema", "ExactSwapEMAWeights",
           "py_dataset_epoch", "overrides_hook", "update_metrics_variables"]


def producing_layer(tensor) -> keras.layers.Layer:
    """The layer (operation) whose call produced the symbolic ``tensor`` (``_keras_history``)."""
    return tensor._keras_history.operation


def inbound_tensors(layer: keras.layers.Layer, node: int = 0) -> List:
    """The symbolic tensors ``layer`` was called on at its ``node``-th call (``_inbound_nodes``)."""
    return list(layer._inbound_nodes[node].input_tensors)


def call_graph(model: keras.Model) -> List[tuple]:
    """Every layer call of functional ``model``'s own graph, each after the calls it takes from:
    ``(layer, input tensors, output tensors)`` (``_keras_history`` and ``_inbound_nodes``; a layer
    shared with another model appears with its call in this one)."""
    order: List[tuple] = []
    seen = set()
    pending = [(tensor, False) for tensor in reversed(model.outputs)]
    while pending:  # depth first, without recursion: a body is hundreds of layers deep
        tensor, expanded = pending.pop()
        layer, index, _ = tensor._keras_history
        node = layer._inbound_nodes[index]
        if (id(layer), index) in seen:
            continue
        if expanded:
            seen.add((id(layer), index))
            order.append((layer, list(node.input_tensors), list(node.output_tensors)))
            continue
        pending.append((tensor, True))
        pending.extend((t, False) for t in reversed(list(node.input_tensors)))
    return order


def node_counts(layer: keras.layers.Layer) -> tuple:
    """``(times called, times its output was consumed)`` in the functional graphs it belongs to."""
    return len(layer._inbound_nodes), len(layer._outbound_nodes)


def update_metrics_variables(model: keras.Model, metrics_variables, loss, x, y, y_pred,
                             sample_weight):
    """Keras's JAX trainer's stateless metrics update, for a ``train_step`` of one's own:
    ``(logs, new metrics variables)``."""
    return model._update_metrics_variables(metrics_variables, loss, x, y, y_pred, sample_weight)


def all_layers(model: keras.Model) -> List[keras.layers.Layer]:
    """Every layer of ``model``, nested models' layers included, without ``model`` itself."""
    return list(model._flatten_layers(include_self=False, recursive=True))


def _saving_lib():
    from keras.src.saving import saving_lib  # save_weights_only(objects_to_skip=...): not public
    return saving_lib


def save_weights_without(model: keras.Model, path: str, skip: Optional[Sequence] = None) -> None:
    """``model.save_weights(path)`` leaving out the objects in ``skip`` (e.g. its optimiser)."""
    _saving_lib().save_weights_only(model, str(path), objects_to_skip=list(skip) if skip else None)


def load_weights_without(model: keras.Model, path: str, skip: Optional[Sequence] = None) -> None:
    """``model.load_weights(path)`` leaving the objects in ``skip`` (e.g. its optimiser) alone."""
    _saving_lib().load_weights_only(model, str(path), objects_to_skip=list(skip) if skip else None)


def build_from_element_spec(model: keras.Model, element_spec) -> None:
    """Build a compiled ``model``'s loss and metrics from a dataset's ``element_spec`` and stop
    ``fit``/``evaluate`` from building them again from the first (distributed) batch."""
    model._symbolic_build(data_batch=element_spec)
    model._maybe_symbolic_build = lambda iterator=None, data_batch=None: None


def replace_step(model: keras.Model, name: str, wrap: Callable[[Callable], Callable]) -> None:
    """Replace ``model.train_step`` / ``test_step`` (``name``) by ``wrap(original)``: Keras's
    ``fit`` and ``evaluate`` look the step up on the instance when they build their functions."""
    if name not in ("train_step", "test_step"):
        raise ValueError(f"can only replace train_step or test_step, not {name!r}")
    setattr(model, name, wrap(getattr(model, name)))


def swap_ema_weights(optimizer) -> None:
    """Swap the values of an EMA optimizer's trainable variables and their moving averages
    (``_trainable_variables``, ``_model_variables_moving_average``; a loss-scale optimizer's inner
    one), as ``keras.callbacks.SwapEMAWeights`` does."""
    optimizer = getattr(optimizer, "inner_optimizer", optimizer)
    for variable, average in zip(optimizer._trainable_variables,
                                 optimizer._model_variables_moving_average):
        value = variable.numpy()
        variable.assign(average)
        average.assign(value)


def uses_ema(optimizer) -> bool:
    """Whether ``optimizer`` (or a loss-scale optimizer's inner one) keeps an EMA of the weights."""
    return bool(getattr(getattr(optimizer, "inner_optimizer", optimizer), "use_ema", False))


def overrides_hook(callback: keras.callbacks.Callback, name: str) -> bool:
    """Whether ``callback`` defines its own ``name`` hook (``on_train_batch_end`` ...), not
    Keras's no-op: Keras marks its defaults (``utils.default``) so that ``fit`` dispatches batch
    hooks asynchronously when nothing listens to them."""
    return not getattr(getattr(callback, name), "_is_default", False)


class ExactSwapEMAWeights(keras.callbacks.SwapEMAWeights):
    """``keras.callbacks.SwapEMAWeights`` whose swap copies values instead of exchanging them by
    ``a += b; b = a - b; a -= b`` (Keras's TensorFlow path, ``_tf_swap_variables``), which rounds:
    with it the model evaluated at an epoch's end held the averages only to within rounding, not
    the averages that the saved model gets, and every swap back nudged the trained weights."""

    def _tf_swap_variables(self, optimizer):
        swap_ema_weights(optimizer)


def py_dataset_epoch(dataset: "keras.utils.PyDataset") -> Tuple[Iterator, Callable[[], None]]:
    """One epoch of a ``PyDataset`` as ``fit`` reads it (Keras's adapter: its enqueuer's worker
    threads or processes): the batches' iterator and the call that ends the epoch (it stops the
    workers and calls the dataset's ``on_epoch_end``)."""
    from keras.src.trainers.data_adapters.py_dataset_adapter import PyDatasetAdapter
    adapter = PyDatasetAdapter(dataset)
    adapter.on_epoch_begin()
    return iter(adapter.get_numpy_iterator()), adapter.on_epoch_end
