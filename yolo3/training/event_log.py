"""TensorBoard logs without TensorFlow: Keras's ``TensorBoard`` callback writes through
``tf.summary``, so on a JAX or PyTorch install without TensorFlow the run's ``logs/`` are written
here, with the ``tensorboard`` package's own event writer and protocol buffers (the layout Keras
writes: ``logs/train`` and ``logs/validation``, ``epoch_<name>`` scalars per epoch)."""
from __future__ import annotations

import io
import os
import time
from typing import Dict, Optional

import keras
import numpy as np

__all__ = ["EventWriter", "ScalarLog"]


class EventWriter:
    """Scalars and images into one TensorBoard log folder (``events.out.tfevents.*``)."""

    def __init__(self, logdir: str):
        from tensorboard.summary.writer.event_file_writer import EventFileWriter
        os.makedirs(logdir, exist_ok=True)
        self._writer = EventFileWriter(logdir)

    def _add(self, summary, step: int) -> None:
        from tensorboard.compat.proto.event_pb2 import Event
        self._writer.add_event(Event(wall_time=time.time(), step=int(step), summary=summary))

    def scalar(self, tag: str, value: float, step: int) -> None:
        from tensorboard.compat.proto.summary_pb2 import Summary
        self._add(Summary(value=[Summary.Value(tag=tag, simple_value=float(value))]), step)

    def image(self, tag: str, image: np.ndarray, step: int) -> None:
        """One uint8 ``(h, w, 3)`` RGB image, PNG-encoded."""
        from PIL import Image
        from tensorboard.compat.proto.summary_pb2 import Summary
        buffer = io.BytesIO()
        Image.fromarray(np.asarray(image, np.uint8)).save(buffer, format="PNG")
        h, w = image.shape[:2]
        encoded = Summary.Image(height=h, width=w, colorspace=3,
                                encoded_image_string=buffer.getvalue())
        self._add(Summary(value=[Summary.Value(tag=tag, image=encoded)]), step)

    def close(self) -> None:
        self._writer.flush()
        self._writer.close()


class ScalarLog(keras.callbacks.Callback):
    """Each epoch's logs as TensorBoard scalars: ``val_*`` under ``logdir/validation``, the rest
    under ``logdir/train``, named ``epoch_<name>`` as Keras's callback names them."""

    def __init__(self, logdir: str):
        super().__init__()
        self.logdir = logdir
        self._writers: Dict[str, EventWriter] = {}

    def _writer(self, split: str) -> EventWriter:
        if split not in self._writers:
            self._writers[split] = EventWriter(os.path.join(self.logdir, split))
        return self._writers[split]

    def on_epoch_end(self, epoch: int, logs: Optional[dict] = None) -> None:
        for name, value in (logs or {}).items():
            try:
                value = float(value)
            except (TypeError, ValueError):
                continue
            split, tag = (("validation", name[4:]) if name.startswith("val_") else ("train", name))
            self._writer(split).scalar(f"epoch_{tag}", value, epoch)
        for writer in self._writers.values():
            writer._writer.flush()

    def on_train_end(self, logs: Optional[dict] = None) -> None:
        for writer in self._writers.values():
            writer.close()
        self._writers = {}
