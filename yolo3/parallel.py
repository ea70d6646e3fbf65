"""Data parallelism on one machine: split the batch, one template replica per device, add the losses.

:func:`multi_gpu_model` wraps a *template* training model (inputs ``[image, *y_true]``, output the
batch-mean loss of shape ``(1,)``). The wrapper owns no variables: every replica calls the template
itself, with its operations placed on its device inside ``call()`` (a ``tf.device`` scope around
functional construction is dropped by Keras 3). Replica ``i`` gets ``n_i`` of the ``n`` images and the
wrapper returns ``sum_i (n_i / n) * loss_i``, which is the template's loss on the whole batch, also for
uneven splits and for batches smaller than the number of devices.

Batch normalisation in training mode normalises each replica with its own slice's statistics (no
synchronised batch norm). The moving statistics end up as ``sum_i (n_i / n) * update_i``, the
share-weighted average of what each replica alone would have written, so they do not depend on which
replica happens to write last.

Save the template (see :class:`yolo3.callbacks.TemplateCheckpoint`), never the wrapper.
"""
from __future__ import annotations

from typing import List, Optional, Sequence

import keras
import tensorflow as tf

from yolo3.keras_compat import all_layers

__all__ = ["ReplicaWrapper", "multi_gpu_model", "resolve_devices", "split_sizes"]


def _canonical(name: str) -> str:
    """``'/gpu:1'``, ``'GPU:1'`` or a full name -> ``'GPU:1'``."""
    spec = tf.DeviceSpec.from_string(name if name.startswith("/") else f"/device:{name}")
    if spec.device_type is None:
        raise ValueError(f"device name {name!r} has no device type (expected e.g. '/gpu:0', '/cpu:1')")
    return f"{spec.device_type.upper()}:{spec.device_index or 0}"


def resolve_devices(gpus: Optional[int] = None, devices: Optional[Sequence[str]] = None) -> List[str]:
    """Check and normalise the replica devices: ``gpus=N`` -> ``/gpu:0..N-1``, or explicit names.

    Raises ``ValueError`` for fewer than two devices, repeated devices, or devices that do not exist
    (listing the ones that do).
    """
    if (gpus is None) == (devices is None):
        raise ValueError("give exactly one of gpus=N or devices=[...]")
    if devices is None:
        if int(gpus) < 2:
            raise ValueError(f"multi_gpu_model needs gpus >= 2, got {gpus}; "
                             "for one device train the template directly")
        devices = [f"/gpu:{i}" for i in range(int(gpus))]
    devices = list(devices)
    if len(devices) < 2:
        raise ValueError(f"multi_gpu_model needs at least 2 devices, got {devices}")
    names = [_canonical(d) for d in devices]
    if len(set(names)) != len(names):
        raise ValueError(f"repeated device in {devices}")
    available = [_canonical(d.name) for d in tf.config.list_logical_devices()]
    missing = [d for d, n in zip(devices, names) if n not in available]
    if missing:
        raise ValueError(f"device(s) {missing} do not exist; available: {available}. "
                         "For logical CPU devices use --cpu-replicas / "
                         "yolo3.distribute.configure_logical_cpus before TensorFlow starts.")
    return [f"/device:{n}" for n in names]


def split_sizes(batch, parts: int):
    """Sizes of ``parts`` consecutive slices of ``batch`` images: the first ``batch % parts`` get one more.

    Works on Python ints and on scalar tensors (returns a list of tensors then).
    """
    base, extra = batch // parts, batch % parts
    if isinstance(batch, int):
        return [base + (1 if i < extra else 0) for i in range(parts)]
    return [base + tf.cast(i < extra, batch.dtype) for i in range(parts)]


def _batch_norm_moving_variables(model: keras.Model) -> list:
    """The moving mean/variance variables of every BatchNormalization layer in ``model`` (nested too)."""
    out = []
    for layer in all_layers(model):
        if isinstance(layer, keras.layers.BatchNormalization):
            out.extend([layer.moving_mean, layer.moving_variance])
    return out


class ReplicaWrapper(keras.Model):
    """Run ``template`` once per device on consecutive batch slices; return the share-weighted loss sum.

    Not serialisable on purpose: save ``template`` (or its body) instead.
    """

    # XLA would compile the whole step into one cluster on one device and ignore the placement.
    supports_jit = False

    def __init__(self, template: keras.Model, devices: Sequence[str], **kwargs):
        super().__init__(name=kwargs.pop("name", f"{template.name}_x{len(devices)}"), **kwargs)
        self.template = template
        self.devices = list(devices)

    def call(self, inputs, training=None):
        inputs = list(inputs) if isinstance(inputs, (list, tuple)) else [inputs]
        n = tf.shape(inputs[0])[0]
        sizes = split_sizes(n, len(self.devices))
        weights = [tf.cast(s, tf.float32) / tf.cast(n, tf.float32) for s in sizes]
        bn_vars = _batch_norm_moving_variables(self.template) if training else []
        snapshot = [tf.identity(v.value) for v in bn_vars]
        losses, replica_stats = [], []
        start = tf.zeros((), n.dtype)
        for i, (device, size) in enumerate(zip(self.devices, sizes)):
            # An empty slice (batch < devices) runs on image 0 instead and gets weight 0: no NaN.
            begin = tf.where(size > 0, start, tf.zeros_like(start))
            length = tf.maximum(size, 1)
            if i > 0:
                for v, s in zip(bn_vars, snapshot):
                    v.assign(s)
            with tf.device(device):
                part = [tf.slice(x, tf.concat([[begin], tf.zeros([tf.rank(x) - 1], n.dtype)], 0),
                                 tf.concat([[length], tf.shape(x)[1:]], 0)) for x in inputs]
                loss = self.template(part, training=training)
                losses.append(tf.cast(loss, tf.float32) * weights[i])
            replica_stats.append([tf.identity(v.value) for v in bn_vars])
            start = start + size
        for j, v in enumerate(bn_vars):
            v.assign(tf.add_n([w * tf.cast(stats[j], w.dtype) for w, stats in zip(weights, replica_stats)]))
        return tf.add_n(losses)

    def compute_output_spec(self, inputs, training=None):
        return keras.KerasTensor((1,), dtype="float32")

    def get_config(self):
        raise NotImplementedError("ReplicaWrapper is not serialisable: save its template instead "
                                  "(yolo3.callbacks.TemplateCheckpoint)")


def multi_gpu_model(model: keras.Model, gpus: Optional[int] = None,
                    devices: Optional[Sequence[str]] = None) -> ReplicaWrapper:
    """Wrap the training model ``model`` for data parallelism over ``gpus`` GPUs or named ``devices``.

    ``devices`` may name any existing devices, e.g. logical CPUs ``['/cpu:0', '/cpu:1']``, so that
    machines without GPUs run the same code path. The wrapper shares the template's variables.
    """
    return ReplicaWrapper(model, resolve_devices(gpus=gpus, devices=devices))
