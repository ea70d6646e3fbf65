"""The training recipe's choices, each one decided here: optimiser (Adam, or SGD with Nesterov
momentum), learning-rate schedule, decoupled weight decay (not on batch-norm or biases), an
exponential moving average of the weights, the training dtype policy, XLA and
how often to evaluate. :mod:`yolo3.training.train` asks; nothing here depends on the model variant.
"""
from __future__ import annotations

import contextlib
import math
from typing import Iterator, Optional

from yolo3.config.choices import JIT_CHOICES, OPTIMIZERS

# Adam's 3e-3 (keras-yolo3 used 1e-3): better from scratch and fine-tuning alike with warm-up,
# cosine decay, EMA and decoupled weight decay (docs/benchmarks.md, "Recipe defaults")
DEFAULT_LR = {"adam": 3e-3, "sgd": 1e-2}
SGD_MOMENTUM = 0.937  # Darknet / YOLOv5's momentum, with Nesterov
NO_DECAY = ("gamma", "beta", "bias")  # batch-norm scale and offset, biases: never decayed
EVAL_EVERY_EPOCH_MAX_IMAGES = 500  # evaluate every epoch up to this many validation images
EVAL_SHARE = 0.1  # beyond that, keep evaluation under about this share of training time
EMA_HORIZON_SHARE = 0.05  # the EMA averages over about this share of the run's steps
EMA_MIN_HORIZON = 10

__all__ = ["DEFAULT_LR", "SGD_MOMENTUM", "NO_DECAY", "learning_rate", "auto_ema_momentum",
           "make_optimizer", "auto_eval_every", "use_jit", "dtype_policy"]


def learning_rate(optimizer: str, lr: Optional[float] = None) -> float:
    """``lr`` when given, else the optimiser's default (:data:`DEFAULT_LR`: Adam 3e-3, SGD 1e-2)."""
    if optimizer not in OPTIMIZERS:
        raise ValueError(f"optimizer must be one of {OPTIMIZERS}, got {optimizer!r}")
    return float(lr) if lr is not None else DEFAULT_LR[optimizer]


def auto_ema_momentum(total_steps: int) -> float:
    """The EMA momentum ``1 - 1 / horizon`` for a run of ``total_steps`` optimiser steps: the
    horizon is about 5% of the run (at least 10 steps), so that a short run's average is not
    dominated by its early, poor weights and a long run's is smooth; clipped to [0.9, 0.9999]."""
    horizon = max(EMA_MIN_HORIZON, EMA_HORIZON_SHARE * max(1, int(total_steps)))
    return float(min(0.9999, max(0.9, 1.0 - 1.0 / horizon)))


def make_optimizer(name: str, learning_rate, weight_decay: float = 0.0, ema: bool = False,
                   ema_momentum: float = 0.99):
    """A Keras optimiser: ``adam`` or ``sgd`` (momentum 0.937, Nesterov). ``weight_decay`` is
    decoupled (each step ``w -= lr * weight_decay * w``) and skips batch-norm ``gamma``/``beta`` and
    biases. ``ema``: the optimiser also keeps an exponential moving average of the trainable
    weights (``keras.callbacks.SwapEMAWeights`` puts it into the model for evaluation and saving).
    ``learning_rate``: a float or a schedule."""
    import keras
    common = dict(learning_rate=learning_rate, weight_decay=weight_decay or None, use_ema=ema,
                  ema_momentum=ema_momentum)
    if name == "adam":
        optimizer = keras.optimizers.Adam(**common)
    elif name == "sgd":
        optimizer = keras.optimizers.SGD(momentum=SGD_MOMENTUM, nesterov=True, **common)
    else:
        raise ValueError(f"optimizer must be one of {OPTIMIZERS}, got {name!r}")
    if weight_decay:
        optimizer.exclude_from_weight_decay(var_names=list(NO_DECAY))
    return optimizer


def auto_eval_every(num_val_images: int, num_train_images: int) -> int:
    """Epochs between two evaluations: every epoch up to 500 validation images; beyond, the
    shortest interval that keeps evaluation (one forward pass per image, about a third of a
    training step's cost) under about 10% of the training time."""
    if num_val_images <= EVAL_EVERY_EPOCH_MAX_IMAGES:
        return 1
    relative_cost = num_val_images / (3.0 * max(1, num_train_images))
    return max(1, math.ceil(relative_cost / EVAL_SHARE))


def use_jit(jit: str, on_gpu: bool) -> bool:
    """Whether to compile the training step with XLA: ``on``/``off``, or ``auto``: on GPUs only
    (on CPUs XLA's convolutions were slower than oneDNN's, see ``tools/benchmark_training.py``)."""
    if jit not in JIT_CHOICES:
        raise ValueError(f"jit must be one of {JIT_CHOICES}, got {jit!r}")
    return jit == "on" or (jit == "auto" and on_gpu)


@contextlib.contextmanager
def dtype_policy(policy: str) -> Iterator[None]:
    """Build layers under the Keras dtype ``policy`` (``float32``, ``mixed_bfloat16``,
    ``mixed_float16``); the previous global policy is restored on exit."""
    import keras
    previous = keras.config.dtype_policy()
    keras.config.set_dtype_policy(policy)
    try:
        yield
    finally:
        keras.config.set_dtype_policy(previous)


