"""The JAX wrapper's contract on logical CPU devices (run by tests/training/test_jax_parallel.py
as ``XLA_FLAGS=--xla_force_host_platform_device_count=3 KERAS_BACKEND=jax python
tests/jax_wrapper_step.py OUT.npz``): the template's loss and gradients, and its weights after
one SGD step (and the moving statistics' change), on one device and through multi_gpu_model on 2
and 3 devices; float32. With ``replica_batch_norm`` on 2 devices ("replica2") against "slices2":
the template run on one device on each slice alone, the slices' losses, gradients and moving
statistics averaged by hand and the SGD step applied by hand; and on 3 devices with the backbone
frozen ("frozen3")."""
from __future__ import annotations

import sys

import numpy as np

SIZE, CLASSES, MAX_BOXES, BATCH = 64, 3, 8, 6


def template():
    """tiny's training model (anchor head, batch norms) with seeded weights."""
    import keras

    from yolo3.config.specs import get_spec
    from yolo3.modeling.bodies import build_spec_body
    from yolo3.modeling.loss import yolo_training_model
    keras.utils.set_random_seed(11)
    spec = get_spec("tiny")
    body = build_spec_body(spec, CLASSES, 3, (SIZE, SIZE))
    anchors = spec.default_anchors() * SIZE / 416
    return yolo_training_model(body, anchors, CLASSES, max_boxes=MAX_BOXES), anchors


def batch(anchors):
    from yolo3.ops.targets import preprocess_true_boxes
    rng = np.random.default_rng(2)
    images = rng.uniform(0, 1, (BATCH, SIZE, SIZE, 3)).astype(np.float32)
    boxes = np.zeros((BATCH, MAX_BOXES, 5), np.float32)
    for i in range(BATCH):
        for k in range(1 + i % 3):
            x1, y1 = rng.uniform(0, 30, 2)
            w, h = rng.uniform(8, 30, 2)
            boxes[i, k] = [x1, y1, x1 + w, y1 + h, rng.integers(CLASSES)]
    y_true = preprocess_true_boxes(boxes, (SIZE, SIZE), anchors, CLASSES)
    return [images, *y_true, boxes]


def run(devices):
    """Loss, gradients, the weights after one SGD step and the moving statistics, on one device
    (``devices`` None) or through the wrapper; plus how many devices the sharded input spans."""
    import jax
    import keras

    from yolo3.modeling.loss import identity_loss
    from yolo3.training.parallel import multi_gpu_model
    model, anchors = template()
    before = [np.asarray(v.value) for v in model.weights]
    data = batch(anchors)
    spanned = 1
    runner = model
    if devices is not None:
        runner = multi_gpu_model(model, devices=devices)
        data = runner.shard(data)
        spanned = len(data[0].sharding.device_set)
    trainable = [v.value for v in model.trainable_variables]
    frozen = [v.value for v in model.non_trainable_variables]

    def loss_of(values):
        out, _ = runner.stateless_call(values, frozen, data, training=True) if devices is None \
            else model.stateless_call(values, frozen, data, training=True)
        return out[0]
    scope = runner.distribution.scope() if devices is not None else _nothing()
    with scope:
        loss, grads = jax.jit(jax.value_and_grad(loss_of))(trainable)
    runner.compile(optimizer=keras.optimizers.SGD(0.05), loss=identity_loss)
    step_loss = runner.train_on_batch([np.asarray(x) for x in data], np.zeros((BATCH, 1), "f"))
    out = {"loss": np.asarray(loss), "spanned": np.asarray(spanned),
           "step_loss": np.asarray(step_loss)}
    for i, g in enumerate(grads):
        out[f"grad{i}"] = np.asarray(g)
    for i, (v, start) in enumerate(zip(model.weights, before)):
        out[f"change{i}"] = np.asarray(v.value) - start  # the step's: trained and moving statistics
    return out


LR = 0.05


def run_replica_batch_norm(count, frozen=False):
    """One SGD step through the wrapper with ``replica_batch_norm`` over ``count`` devices: its
    loss and every weight's change (trained and moving statistics); ``frozen``: the backbone_*
    layers frozen first (``frozen{i}``: 1 where weight ``i`` is a frozen layer's)."""
    import keras

    from yolo3.modeling.keras_compat import all_layers
    from yolo3.modeling.loss import identity_loss
    from yolo3.training.models import set_stage_trainable
    from yolo3.training.parallel import multi_gpu_model
    model, anchors = template()
    if frozen:
        body = next(layer for layer in model.layers if isinstance(layer, keras.Model))
        assert set_stage_trainable(body, True) > 0
    frozen_ids = {id(w) for layer in all_layers(model) if not layer.trainable
                  for w in layer.weights}
    before = [np.asarray(v.value) for v in model.weights]
    runner = multi_gpu_model(model, devices=[f"/cpu:{i}" for i in range(count)],
                             replica_batch_norm=True)
    runner.compile(optimizer=keras.optimizers.SGD(LR), loss=identity_loss)
    loss = runner.train_on_batch(batch(anchors), np.zeros((BATCH, 1), "f"))
    out = {"step_loss": np.asarray(loss)}
    for i, (v, start) in enumerate(zip(model.weights, before)):
        out[f"change{i}"] = np.asarray(v.value) - start
        out[f"frozen{i}"] = np.asarray(id(v) in frozen_ids)
    return out


def run_slices_by_hand(count):
    """The same step done by hand on one device: each of ``count`` slices alone through the
    template (its own batch statistics), the mean of their losses, gradients and new moving
    statistics, then ``w - LR * g``."""
    import jax

    model, anchors = template()
    data = batch(anchors)
    trainable = [v.value for v in model.trainable_variables]
    frozen = [v.value for v in model.non_trainable_variables]
    share = BATCH // count
    losses, grads, statistics = [], [], []
    for k in range(count):
        part = [x[k * share:(k + 1) * share] for x in data]

        def loss_of(values, part=part):
            out, new_frozen = model.stateless_call(values, frozen, part, training=True)
            return out[0], new_frozen
        (loss, new_frozen), grad = jax.jit(jax.value_and_grad(loss_of, has_aux=True))(trainable)
        losses.append(np.asarray(loss))
        grads.append([np.asarray(g) for g in grad])
        statistics.append([np.asarray(f) for f in new_frozen])
    mean_grads = [np.mean(g, axis=0) for g in zip(*grads)]
    new_values = {id(v): np.asarray(v.value) - LR * g
                  for v, g in zip(model.trainable_variables, mean_grads)}
    new_values.update({id(v): np.mean(s, axis=0)
                       for v, s in zip(model.non_trainable_variables, zip(*statistics))})
    out = {"step_loss": np.mean(losses)}
    for i, v in enumerate(model.weights):
        out[f"change{i}"] = new_values[id(v)] - np.asarray(v.value)
    return out


class _nothing:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


if __name__ == "__main__":
    import keras
    keras.config.set_dtype_policy("float32")
    results = {}
    for name, devices in (("one", None), ("two", ["/cpu:0", "/cpu:1"]),
                          ("three", ["cpu:0", "cpu:1", "cpu:2"])):
        for key, value in run(devices).items():
            results[f"{name}|{key}"] = value
    for count in (2,):
        for name, run_it in (("replica", run_replica_batch_norm), ("slices", run_slices_by_hand)):
            for key, value in run_it(count).items():
                results[f"{name}{count}|{key}"] = value
    for key, value in run_replica_batch_norm(3, frozen=True).items():
        results[f"frozen3|{key}"] = value
    np.savez(sys.argv[1], **results)
