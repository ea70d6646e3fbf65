"""One training step of each head on the Keras backend this process runs
(``KERAS_BACKEND=tensorflow|jax|torch python tests/backend_step.py OUT.npz``): the same bodies,
weights, images and boxes on every backend (all from NumPy seeds), float32 throughout. Written to
OUT.npz: the loss and the gradient of every trainable weight (``VARIANT|step|...``), and the loss
of seeded raw maps with its gradient with respect to them (``VARIANT|loss|...``: the loss's own
arithmetic, without the convolutions). tests/features/test_backends.py compares the backends.
"""
from __future__ import annotations

import os
import sys

import numpy as np

VARIANTS = ("tiny", "tiny-af")
SIZE, CLASSES, MAX_BOXES = 64, 3, 8


def inputs(seed: int = 0):
    """Images ``(2, 64, 64, 3)`` in [0, 1] and padded boxes ``(2, 8, 5)`` (pixels, class)."""
    rng = np.random.default_rng(seed)
    images = rng.uniform(0, 1, (2, SIZE, SIZE, 3)).astype(np.float32)
    boxes = np.zeros((2, MAX_BOXES, 5), np.float32)
    boxes[0, :3] = [[4, 6, 30, 40, 1], [20, 18, 60, 50, 0], [40, 2, 62, 20, 2]]
    boxes[1, :2] = [[10, 10, 50, 58, 2], [0, 30, 24, 63, 1]]
    return images, boxes


def step(variant: str) -> dict:
    """Loss and gradients of one training step of ``variant``'s training model."""
    import keras
    from keras import ops

    from yolo3.config.loss_options import LossOptions
    from yolo3.config.specs import get_spec
    from yolo3.modeling.anchor_free_loss import anchor_free_training_model
    from yolo3.modeling.bodies import build_spec_body
    from yolo3.modeling.loss import yolo_training_model
    from yolo3.ops.targets import preprocess_true_boxes

    keras.config.set_dtype_policy("float32")
    spec = get_spec(variant)
    body = build_spec_body(spec, CLASSES, None if spec.anchor_free else 3, (SIZE, SIZE))
    rng = np.random.default_rng(7)
    body.set_weights([rng.normal(0, 0.05, w.shape).astype(np.float32) if w.ndim > 1
                      else (1 + rng.normal(0, 0.05, w.shape)).astype(np.float32)
                      if "gamma" in name or "variance" in name
                      else rng.normal(0, 0.05, w.shape).astype(np.float32)
                      for w, name in zip(body.get_weights(), [v.path for v in body.weights])])
    images, boxes = inputs()
    if spec.anchor_free:
        model = anchor_free_training_model(body, spec.head, CLASSES, MAX_BOXES)
        data = [images, boxes]
    else:
        anchors = spec.default_anchors() * SIZE / 416
        model = yolo_training_model(body, anchors, CLASSES,
                                    LossOptions(box_loss="ciou", objectness="iou"),
                                    max_boxes=MAX_BOXES)
        y_true = preprocess_true_boxes(boxes, (SIZE, SIZE), anchors, CLASSES, assign_iou=0.35)
        data = [images, *y_true, boxes]
    backend = keras.backend.backend()
    variables = model.trainable_variables
    if backend == "tensorflow":
        import tensorflow as tf
        with tf.GradientTape() as tape:
            loss = model(data, training=True)[0]
        grads = tape.gradient(loss, variables)
    elif backend == "jax":
        import jax
        trainable = [v.value for v in variables]
        frozen = [v.value for v in model.non_trainable_variables]

        def loss_of(values):
            out, _ = model.stateless_call(values, frozen, data, training=True)
            return out[0]
        loss, grads = jax.value_and_grad(loss_of)(trainable)
    else:  # torch
        loss = model(data, training=True)[0]
        loss.backward()
        grads = [v.value.grad for v in variables]
    out = {"loss": np.asarray(ops.convert_to_numpy(loss), np.float64)}
    for variable, grad in zip(variables, grads):
        out[variable.path] = np.asarray(ops.convert_to_numpy(grad), np.float64)
    return out


def _gradient(function, values):
    """``(function(*values), its gradients)`` on this process's backend."""
    import keras
    backend = keras.backend.backend()
    if backend == "tensorflow":
        import tensorflow as tf
        tensors = [tf.constant(v) for v in values]
        with tf.GradientTape() as tape:
            tape.watch(tensors)
            value = function(*tensors)
        return value, tape.gradient(value, tensors)
    if backend == "jax":
        import jax
        return jax.value_and_grad(lambda ts: function(*ts))([jax.numpy.asarray(v) for v in values])
    import torch
    tensors = [torch.tensor(v, requires_grad=True) for v in values]
    value = function(*tensors)
    value.backward()
    return value, [t.grad for t in tensors]


def loss_only(variant: str) -> dict:
    """The loss of seeded raw maps and its gradient with respect to them."""
    from keras import ops

    from yolo3.config.loss_options import LossOptions
    from yolo3.config.specs import get_spec
    from yolo3.modeling.loss import yolo_loss
    from yolo3.ops import anchor_free
    from yolo3.ops.targets import preprocess_true_boxes

    spec = get_spec(variant)
    rng = np.random.default_rng(3)
    _, boxes = inputs()
    if spec.anchor_free:
        channels, strides = spec.head.channels(CLASSES), spec.head.strides

        def function(*raw):
            terms = anchor_free.loss_terms(list(raw), boxes, spec.head, CLASSES)
            return terms["box"] + terms["dfl"] + terms["class"]
    else:
        anchors = spec.default_anchors() * SIZE / 416
        channels, strides = 3 * (5 + CLASSES), spec.strides
        y_true = preprocess_true_boxes(boxes, (SIZE, SIZE), anchors, CLASSES, assign_iou=0.35)

        def function(*raw):
            return yolo_loss([*raw, *y_true], anchors, CLASSES,
                             LossOptions(box_loss="ciou", objectness="iou"), true_boxes=boxes)
    raw = [rng.normal(0, 1, (2, SIZE // s, SIZE // s, channels)).astype(np.float32)
           for s in strides]
    value, grads = _gradient(function, raw)
    out = {"loss": np.asarray(ops.convert_to_numpy(value), np.float64)}
    for k, grad in enumerate(grads):
        out[f"raw_{k}"] = np.asarray(ops.convert_to_numpy(grad), np.float64)
    return out


def results() -> dict:
    """Every value this module compares, keyed ``VARIANT|step|...`` and ``VARIANT|loss|...``."""
    out = {}
    for variant in VARIANTS:
        for key, value in step(variant).items():
            out[f"{variant}|step|{key}"] = value
        for key, value in loss_only(variant).items():
            out[f"{variant}|loss|{key}"] = value
    return out


def main(path: str) -> None:
    np.savez(path, **results())


if __name__ == "__main__":
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    main(sys.argv[1])
