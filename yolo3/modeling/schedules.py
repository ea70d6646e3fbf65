"""Learning-rate schedules (serialisable), in ``keras.ops``: the same on every Keras backend."""
from __future__ import annotations

import math

import keras
from keras import ops

__all__ = ["WarmupCosine"]


@keras.saving.register_keras_serializable(package="yolo3")
class WarmupCosine(keras.optimizers.schedules.LearningRateSchedule):
    """Linear warm-up from 0 to ``lr`` over ``warmup_steps``, then cosine decay to ``lr * final``."""

    def __init__(self, lr: float, total_steps: int, warmup_steps: int = 0, final: float = 0.01):
        self.lr, self.total_steps = float(lr), max(1, int(total_steps))
        self.warmup_steps, self.final = max(0, int(warmup_steps)), float(final)

    def __call__(self, step):
        step = ops.cast(step, "float32")
        warm = self.lr * (step + 1.0) / max(1, self.warmup_steps)
        span = float(max(1, self.total_steps - self.warmup_steps))
        t = ops.clip((step - self.warmup_steps) / span, 0.0, 1.0)
        cos = self.lr * (self.final + (1 - self.final) * 0.5 * (1 + ops.cos(math.pi * t)))
        return ops.where(step < self.warmup_steps, warm, cos)

    def get_config(self) -> dict:
        return {"lr": self.lr, "total_steps": self.total_steps, "warmup_steps": self.warmup_steps,
                "final": self.final}
