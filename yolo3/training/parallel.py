"""Data parallelism on one machine: split the batch, one template replica per device, add the losses.

:func:`multi_gpu_model` wraps a *template* training model (inputs ``[image, *y_true]``, output the
batch-mean loss of shape ``(1,)``). The wrapper owns no variables: every replica calls the template
itself, with its operations placed on its device inside ``call()`` (a ``tf.device`` scope around
functional construction is dropped by Keras 3). Replica ``i`` gets ``n_i`` of the ``n`` images and the
wrapper returns ``sum_i (n_i / n) * loss_i``, which is the template's loss on the whole batch, also for
uneven splits and for batches smaller than the number of devices. A replica whose slice is empty
(batch < devices) is never called: its share is 0 and it costs nothing. The template is never run
on zero images (oneDNN's convolution on AVX-512 CPUs returns a wrongly shaped empty tensor then).

Batch normalisation in training mode normalises each replica with its own slice's statistics (no
synchronised batch norm). The moving statistics end up as ``sum_i (n_i / n) * update_i``, the
share-weighted average of what each replica alone would have written, so they do not depend on which
replica happens to write last.

Save the template (see :class:`yolo3.training.callbacks.TemplateCheckpoint`), never the wrapper.
"""
from __future__ import annotations

from typing import List, Optional, Sequence

import keras

from yolo3.modeling.keras_compat import all_layers

__all__ = ["ReplicaWrapper", "multi_gpu_model", "resolve_devices", "split_sizes"]


def _canonical(name: str) -> str:
    """``'/gpu:1'``, ``'GPU:1'`` or a full name -> ``'GPU:1'``."""
    import tensorflow as tf
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
    import tensorflow as tf
    if len(set(names)) != len(names):
        raise ValueError(f"repeated device in {devices}")
    available = [_canonical(d.name) for d in tf.config.list_logical_devices()]
    missing = [d for d, n in zip(devices, names) if n not in available]
    if missing:
        raise ValueError(f"device(s) {missing} do not exist; available: {available}. "
                         "For logical CPU devices use --cpu-replicas / "
                         "yolo3.training.distribute.configure_logical_cpus before TensorFlow starts.")
    return [f"/device:{n}" for n in names]


def split_sizes(batch, parts: int):
    """Sizes of ``parts`` consecutive slices of ``batch`` images: the first ``batch % parts`` get one more.

    Works on Python ints and on scalar tensors (returns a list of tensors then).
    """
    import tensorflow as tf
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


def _leading_slice(x, begin, size):
    """``x[begin:begin + size]`` along the first axis; ``begin`` and ``size`` ints or scalar tensors."""
    if isinstance(begin, int) and isinstance(size, int):
        return x[begin:begin + size]
    import tensorflow as tf
    rank = tf.rank(x)
    begin = tf.cast(begin, tf.int32)
    size = tf.cast(size, tf.int32)
    return tf.slice(x, tf.concat([[begin], tf.zeros([rank - 1], tf.int32)], 0),
                    tf.concat([[size], tf.shape(x)[1:]], 0))


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
        import tensorflow as tf
        inputs = list(inputs) if isinstance(inputs, (list, tuple)) else [inputs]
        static_n = inputs[0].shape[0]
        n = tf.shape(inputs[0])[0]
        # Python ints when the batch size is known while tracing: empty replicas are dropped then;
        # otherwise scalar tensors, and each replica runs under a tf.cond that skips it when empty.
        sizes = split_sizes(int(static_n) if static_n is not None else n, len(self.devices))
        denominator = tf.cast(tf.maximum(n, 1), tf.float32)
        bn_vars = _batch_norm_moving_variables(self.template) if training else []
        snapshot = [tf.identity(v.value) for v in bn_vars]
        losses, weights, replica_stats = [], [], []
        start = 0
        for device, size in zip(self.devices, sizes):
            if isinstance(size, int) and size == 0:
                continue  # no images: no call, no share (oneDNN's convolution fails on 0 images)
            weight = tf.cast(size, tf.float32) / denominator
            restore = bool(replica_stats)  # every replica starts from the same statistics

            def run_replica(device=device, begin=start, size=size, restore=restore):
                if restore:
                    for v, s in zip(bn_vars, snapshot):
                        v.assign(s)
                with tf.device(device):
                    part = [_leading_slice(x, begin, size) for x in inputs]
                    loss = tf.reshape(tf.cast(self.template(part, training=training), tf.float32), (1,))
                return loss, [tf.identity(v.value) for v in bn_vars]

            if isinstance(size, int):
                loss, stats = run_replica()
            else:
                loss, stats = tf.cond(size > 0, run_replica,
                                      lambda: (tf.zeros((1,), tf.float32), list(snapshot)))
            losses.append(loss * weight)
            weights.append(weight)
            replica_stats.append(stats)
            start = start + size
        for j, v in enumerate(bn_vars):
            v.assign(tf.add_n([w * tf.cast(stats[j], w.dtype) for w, stats in zip(weights, replica_stats)]))
        return tf.add_n(losses) if losses else tf.zeros((1,), tf.float32)

    def compute_output_spec(self, inputs, training=None):
        return keras.KerasTensor((1,), dtype="float32")

    def get_config(self):
        raise NotImplementedError("ReplicaWrapper is not serialisable: save its template instead "
                                  "(yolo3.training.callbacks.TemplateCheckpoint)")


def multi_gpu_model(model: keras.Model, gpus: Optional[int] = None,
                    devices: Optional[Sequence[str]] = None,
                    replica_batch_norm: bool = False) -> keras.Model:
    """Wrap the training model ``model`` for data parallelism over ``gpus`` GPUs or named ``devices``.

    ``devices`` may name any existing devices, e.g. logical CPUs ``['/cpu:0', '/cpu:1']``, so that
    machines without GPUs run the same code path. The wrapper shares the template's variables.
    On TensorFlow a :class:`ReplicaWrapper`; on JAX a
    :class:`yolo3.training.jax_parallel.JaxReplicaWrapper` (Keras's distribution API: the same
    contract, batch statistics over the global batch, batches a multiple of the device count).
    ``replica_batch_norm=True`` makes JAX's wrapper normalise each replica by its own slice, as
    TensorFlow's always does, with one flat all-reduce a step (faster across processes on CPUs).
    PyTorch: one device only (ValueError).
    """
    backend = keras.backend.backend()
    if backend == "jax":
        from yolo3.training.jax_parallel import JaxReplicaWrapper, jax_devices  # imports JAX
        return JaxReplicaWrapper(model, jax_devices(gpus=gpus, devices=devices),
                                 replica_batch_norm=replica_batch_norm)
    if backend != "tensorflow":
        raise ValueError(f"multi_gpu_model runs on TensorFlow and JAX; on the {backend} backend "
                         "train the template on one device")
    return ReplicaWrapper(model, resolve_devices(gpus=gpus, devices=devices))
