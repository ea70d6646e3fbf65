"""The user's Keras callbacks beside yolo3's own (``train(config, callbacks=[...])``).

Each runs inside :class:`ForTemplate`, which hands it the training template as its ``model``,
never the parallel wrapper or a strategy's copy that ``fit`` runs: what it saves, reads or
changes is the single-device model whose weights the run saves. A stop it asks for
(``self.model.stop_training = True``, as ``keras.callbacks.EarlyStopping`` does) reaches the
model that ``fit`` runs and ends the run, not only the current stage.

Order (``docs/guide.md``, "Your callbacks"): after all of yolo3's own, so that at an epoch's end
the logs hold the validation mAP and the model holds the weights that were evaluated and saved
(the averaged ones when EMA is on). Each stage of training is one ``fit``: ``on_train_begin`` and
``on_train_end`` run once per stage, and epochs are numbered across the whole run.
"""
from __future__ import annotations

from typing import Callable, List, Optional, Sequence

import keras

from yolo3.core.errors import SettingError
from yolo3.modeling.keras_compat import overrides_hook

__all__ = ["ForTemplate", "for_template", "check_callbacks"]

# what fit's CallbackList calls; the legacy on_batch_* reach the callback through Keras's default
# on_train_batch_* (which call them)
_HOOKS = ("on_train_begin", "on_train_end", "on_epoch_begin", "on_epoch_end",
          "on_test_begin", "on_test_end", "on_predict_begin", "on_predict_end",
          "on_train_batch_begin", "on_train_batch_end", "on_test_batch_begin",
          "on_test_batch_end", "on_predict_batch_begin", "on_predict_batch_end")
_LEGACY = {"on_train_batch_begin": "on_batch_begin", "on_train_batch_end": "on_batch_end"}


class ForTemplate(keras.callbacks.Callback):
    """``callback`` run with ``template`` as its model; :attr:`stopped` once it asked training
    to stop. Hooks the callback does not define stay Keras's no-ops (batch hooks then keep
    ``fit``'s asynchronous dispatch)."""

    def __init__(self, callback: keras.callbacks.Callback, template: keras.Model):
        super().__init__()
        self.callback = callback
        self.template = template
        self.stopped = False
        self._fitting: Optional[keras.Model] = None
        for name in _HOOKS:
            if overrides_hook(callback, name) or (name in _LEGACY
                                                   and overrides_hook(callback, _LEGACY[name])):
                setattr(self, name, self._forward(name))

    def set_model(self, model: keras.Model) -> None:
        self._fitting = model
        super().set_model(model)
        self.template.stop_training = False  # a new fit (stage) starts
        self.callback.set_model(self.template)

    def set_params(self, params: dict) -> None:
        super().set_params(params)
        self.callback.set_params(params)

    def _forward(self, name: str) -> Callable:
        hook = getattr(self.callback, name)

        def forward(*args, **kwargs):
            hook(*args, **kwargs)
            if getattr(self.template, "stop_training", False):
                self.stopped = True
                if self._fitting is not None and self._fitting is not self.template:
                    self._fitting.stop_training = True
        forward.__name__ = name
        return forward


def check_callbacks(callbacks: Optional[Sequence[keras.callbacks.Callback]]
                    ) -> List[keras.callbacks.Callback]:
    """The user's ``callbacks`` as a list; a SettingError naming the first that is not a
    ``keras.callbacks.Callback`` (by its position), before any work."""
    if isinstance(callbacks, keras.callbacks.Callback):
        raise SettingError("callbacks: expected a list of keras.callbacks.Callback, got one "
                           f"{type(callbacks).__name__} (write [callback])", "callbacks")
    checked = list(callbacks or ())
    for i, callback in enumerate(checked):
        if not isinstance(callback, keras.callbacks.Callback):
            raise SettingError(f"callbacks[{i}]: expected a keras.callbacks.Callback, got "
                               f"{type(callback).__name__}", "callbacks")
    return checked


def for_template(callbacks: Sequence[keras.callbacks.Callback],
                 template: keras.Model) -> List[ForTemplate]:
    """Each of the user's (checked) ``callbacks`` in a :class:`ForTemplate` over ``template``."""
    return [ForTemplate(callback, template) for callback in callbacks]
