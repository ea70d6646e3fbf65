"""The loss-summing wrapper's contract on JAX, through Keras's distribution API.

:func:`yolo3.training.parallel.multi_gpu_model` gives a :class:`JaxReplicaWrapper` on the JAX
backend: ``keras.distribution.DataParallel`` over the devices, the template's variables (and the
optimizer's, created inside the wrapper's ``fit``) replicated on every device, each global batch
split along its first axis, one slice per device. XLA partitions the template's step (SPMD): the
loss is the template's batch mean over the global batch, which is ``sum_i (n_i / n) * loss_i`` of
the per-device slices, and the gradients are summed across devices by XLA's all-reduce. It is the
same contract as TensorFlow's :class:`~yolo3.training.parallel.ReplicaWrapper`, with two
differences, both towards one device: batch normalisation takes its statistics over the global batch
(the TensorFlow wrapper normalises each replica by its own slice), and the global batch must be a
multiple of the device count (JAX shards evenly).

``replica_batch_norm=True`` trains with the TensorFlow wrapper's statistics instead: each device
runs the template on its slice alone (``jax.shard_map``), and the step's only collective is one
all-reduce of a flat buffer holding the gradients, the loss and the changes of the batch norms'
moving averages, averaged over the replicas (a frozen layer's statistics stay bit for bit).
Across processes on CPUs, where Gloo runs each operand of a collective alone (about 4 ms each),
the global statistics' hundred-odd all-reduces cost more than the step's arithmetic; this step
pays one (docs/benchmarks.md, "Several processes on JAX's distributed runtime").

Devices: ``gpus=N`` takes JAX's first N GPUs; ``devices`` names them as ``"/gpu:1"``, ``"gpu:1"``
or ``"/cpu:2"``. Logical CPU devices for tests and CPU machines: start the process with
``XLA_FLAGS=--xla_force_host_platform_device_count=N`` (before JAX starts). Across machines:
``jax.distributed.initialize()`` in every process, then the same wrapper over
``jax.devices()`` (docs/guide.md). Save the template, never the wrapper.
"""
from __future__ import annotations

import os
import re
from typing import List, Optional, Sequence

import keras

from yolo3.modeling.keras_compat import update_metrics_variables

__all__ = ["JaxReplicaWrapper", "jax_devices", "check_global_batch", "force_host_devices",
           "replica_mean"]

_COUNT_FLAG = re.compile(r"--xla_force_host_platform_device_count=\S*")


def force_host_devices(n: int) -> None:
    """Make JAX's CPU ``n`` logical devices (``XLA_FLAGS``): call before JAX first lists its
    devices (importing JAX, or Keras on JAX, is early enough). :func:`jax_devices` says so when
    it was too late."""
    flags = _COUNT_FLAG.sub("", os.environ.get("XLA_FLAGS", "")).strip()
    os.environ["XLA_FLAGS"] = f"{flags} --xla_force_host_platform_device_count={int(n)}".strip()

_DEVICE = re.compile(r"^/?(?:device:)?(cpu|gpu|tpu):(\d+)$", re.IGNORECASE)


def jax_devices(gpus: Optional[int] = None, devices: Optional[Sequence[str]] = None) -> List[str]:
    """Keras's names (``"gpu:0"``) of the replica devices: JAX's first ``gpus`` GPUs, or the named
    ``devices``. ValueError for fewer than two, repeats, or devices JAX does not see (listing
    those it sees)."""
    import jax
    if (gpus is None) == (devices is None):
        raise ValueError("give exactly one of gpus=N or devices=[...]")
    if devices is None:
        if int(gpus) < 2:
            raise ValueError(f"multi_gpu_model needs gpus >= 2, got {gpus}; for one device train "
                             "the template directly")
        devices = [f"gpu:{i}" for i in range(int(gpus))]
    names = []
    for name in devices:
        match = _DEVICE.match(str(name).strip())
        if match is None:
            raise ValueError(f"device name {name!r}: expected e.g. '/gpu:0' or '/cpu:1'")
        names.append(f"{match.group(1).lower()}:{int(match.group(2))}")
    if len(names) < 2:
        raise ValueError(f"multi_gpu_model needs at least 2 devices, got {list(devices)}")
    if len(set(names)) != len(names):
        raise ValueError(f"repeated device in {list(devices)}")
    seen = [f"{d.platform}:{d.id}" for d in jax.devices()] + [
        f"cpu:{d.id}" for d in jax.devices("cpu")]
    missing = [d for d, n in zip(devices, names) if n not in seen]
    if missing:
        raise ValueError(f"device(s) {missing} do not exist; JAX sees {sorted(set(seen))}. For "
                         "logical CPU devices start the process with XLA_FLAGS="
                         "--xla_force_host_platform_device_count=N")
    return names


def check_global_batch(batch: int, replicas: int) -> None:
    """JAX splits a batch evenly: ValueError naming both unless ``batch`` is a multiple."""
    if batch % replicas:
        raise ValueError(f"batch of {batch} images cannot be split evenly over {replicas} devices "
                         f"on JAX: use a multiple of {replicas}")


class JaxReplicaWrapper(keras.Model):
    """``template`` run data-parallel over ``devices`` (Keras names) on JAX; its output is the
    template's loss on the global batch. Owns no variables of its own; not serialisable.
    ``replica_batch_norm``: each device normalises by its own slice, one flat all-reduce a step
    (the module's docstring)."""

    def __init__(self, template: keras.Model, devices: Sequence[str],
                 replica_batch_norm: bool = False, **kwargs):
        super().__init__(name=kwargs.pop("name", f"{template.name}_x{len(devices)}"), **kwargs)
        self.template = template
        self.devices = list(devices)
        self.replica_batch_norm = bool(replica_batch_norm)
        import jax
        # several processes: each already gives its own share of every global batch
        # (yolo3.data.dataset_config.DatasetConfig.shard), which Keras assembles
        self.distribution = keras.distribution.DataParallel(
            devices=self.devices, auto_shard_dataset=jax.process_count() == 1)
        self._replicate(template.variables)
        # JAX's mesh of the distribution, read while the variables hold their values (fit lends
        # them to its compiled step)
        self._jax_mesh = template.variables[0].value.sharding.mesh

    def _replicate(self, variables) -> None:
        """Place each variable on every device (in place), where it is not already."""
        for variable in variables:
            if len(getattr(variable.value, "sharding").device_set) == len(self.devices):
                continue
            layout = self.distribution.get_variable_layout(variable)
            variable.assign(keras.distribution.distribute_tensor(variable.value, layout))

    def call(self, inputs, training=None):
        return self.template(inputs, training=training)

    def shard(self, data):
        """``data`` (an array or a list of them, batch first) split over the devices."""
        if isinstance(data, (list, tuple)):
            return type(data)(self.shard(x) for x in data)
        check_global_batch(int(data.shape[0]), len(self.devices))
        layout = self.distribution.get_data_layout(data.shape)
        return keras.distribution.distribute_tensor(keras.ops.convert_to_tensor(data), layout)

    def _in_scope(self, method, *args, **kwargs):
        """``method`` under the distribution, every variable it meets replicated first (the
        template's, the optimizer's and the metrics' already built)."""
        with self.distribution.scope():
            optimizer = getattr(self, "optimizer", None)
            self._replicate([*self.variables, *(optimizer.variables if optimizer else []),
                             *(v for m in self.metrics for v in m.variables)])
            return method(*args, **kwargs)

    def compile(self, *args, **kwargs):
        return self._in_scope(super().compile, *args, **kwargs)

    def fit(self, *args, **kwargs):
        return self._in_scope(super().fit, *args, **kwargs)

    def evaluate(self, *args, **kwargs):
        return self._in_scope(super().evaluate, *args, **kwargs)

    def predict(self, *args, **kwargs):
        return self._in_scope(super().predict, *args, **kwargs)

    def _local_count(self) -> int:
        """The devices of this process among the wrapper's (all of them with one process: each
        process gives its share of a global batch, split over its own devices)."""
        import jax
        here = {f"{d.platform}:{d.id}" for d in jax.local_devices()}
        return max(1, sum(1 for name in self.devices if name in here))

    def train_on_batch(self, x=None, y=None, *args, **kwargs):
        check_global_batch(int(_first(x).shape[0]), self._local_count())
        return self._in_scope(super().train_on_batch, x, y, *args, **kwargs)

    def test_on_batch(self, x=None, y=None, *args, **kwargs):
        check_global_batch(int(_first(x).shape[0]), self._local_count())
        return self._in_scope(super().test_on_batch, x, y, *args, **kwargs)

    def train_step(self, state, data):
        """Keras's JAX step, or with ``replica_batch_norm`` each device's own step on its slice,
        their gradients, loss and moving averages averaged in one flat all-reduce."""
        if not self.replica_batch_norm:
            return super().train_step(state, data)
        import jax
        from jax.sharding import PartitionSpec

        trainable, non_trainable, optimizer_variables, metrics_variables = state
        x, y, sample_weight = keras.utils.unpack_x_y_sample_weight(data)
        axis = self.distribution.batch_dim_name
        gradient = jax.value_and_grad(self.compute_loss_and_updates, has_aux=True)

        def replica(trainable, non_trainable, metrics_variables, optimizer_variables, batch):
            (_, aux), grads = gradient(trainable, non_trainable, metrics_variables, *batch,
                                       training=True, optimizer_variables=optimizer_variables)
            unscaled_loss, _, updated, _ = aux
            # the change of each non-trainable variable, averaged: one that no replica changed
            # (a frozen layer's) stays bit for bit, whatever the replica count
            changes = jax.tree_util.tree_map(lambda new, old: new - old, updated, non_trainable)
            return replica_mean((grads, unscaled_loss, changes), axis)

        shared = PartitionSpec()
        grads, loss, changes = jax.shard_map(
            replica, mesh=self._jax_mesh, in_specs=(shared, shared, shared, shared,
                                                  PartitionSpec(axis)),
            out_specs=shared, check_vma=False)(
            trainable, non_trainable, metrics_variables, optimizer_variables,
            (x, y, sample_weight))
        non_trainable = jax.tree_util.tree_map(lambda old, change: old + change, non_trainable,
                                               changes)
        trainable, optimizer_variables = self.optimizer.stateless_apply(
            optimizer_variables, grads, trainable)
        logs, metrics_variables = update_metrics_variables(
            self, metrics_variables, loss, x, y, loss, sample_weight)
        return logs, (trainable, non_trainable, optimizer_variables, metrics_variables)

    def compute_output_spec(self, inputs, training=None):
        return keras.KerasTensor((1,), dtype="float32")

    def get_config(self):
        raise NotImplementedError("JaxReplicaWrapper is not serialisable: save its template "
                                  "instead (yolo3.training.callbacks.TemplateCheckpoint)")


def replica_mean(tree, axis: str):
    """The mean over the mesh axis ``axis`` of every leaf of ``tree`` (inside ``shard_map``), in
    one all-reduce per dtype: the leaves raveled into one flat buffer, summed, cut back. Integer
    leaves take the largest value (a step counter, a seed)."""
    import jax
    import jax.numpy as jnp

    leaves, treedef = jax.tree_util.tree_flatten(tree)
    count = jax.lax.psum(1, axis)
    groups = {}
    for i, leaf in enumerate(leaves):
        groups.setdefault(jnp.result_type(leaf), []).append(i)
    out = list(leaves)
    for dtype, indices in groups.items():
        flat = jnp.concatenate([jnp.ravel(leaves[i]) for i in indices])
        if jnp.issubdtype(dtype, jnp.floating):
            flat = jax.lax.psum(flat, axis) / jnp.asarray(count, dtype)
        else:
            flat = jax.lax.pmax(flat, axis)
        start = 0
        for i in indices:
            size = int(jnp.size(leaves[i]))
            out[i] = jnp.reshape(flat[start:start + size], jnp.shape(leaves[i])).astype(dtype)
            start += size
    return jax.tree_util.tree_unflatten(treedef, out)


def _first(x):
    return x[0] if isinstance(x, (list, tuple)) else x
