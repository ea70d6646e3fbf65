"""The model step of training: the body and its training model (the loss its output), weights
loaded by name, output priors, and which layers a stage trains."""
from __future__ import annotations

import logging
from typing import List, Tuple

import keras
import numpy as np

from yolo3.checkpoint.weights import load_weights_by_name
from yolo3.config.architectures import BACKBONE_PREFIX
from yolo3.config.loss_options import LossOptions
from yolo3.config.train_config import TrainConfig
from yolo3.modeling.bodies import build_spec_body
from yolo3.training.data_step import TrainData
from yolo3.training.placement import Placement

logger = logging.getLogger(__name__)


def build_models(config: TrainConfig, data: TrainData, placement: Placement
                 ) -> Tuple[keras.Model, keras.Model, List[Tuple[str, str]]]:
    """``(body, template, skipped layers)``: the body and its training model (output: the loss,
    ground truth padded to ``max_boxes`` so every shape is static), in the strategy's scope and the
    current Keras dtype policy, with ``weights`` loaded by name (skipped layers listed). With
    ``multi_scale`` the body takes any input size."""
    input_hw = (None, None) if config.data.multi_scale else data.input_hw
    with placement.scope():
        body = build_spec_body(data.spec, data.num_classes, data.head.anchors_per_scale,
                               input_hw, fused_batch_norm=True)
        template = training_model(config, data, body)
    skipped: List[Tuple[str, str]] = []
    loaded = set()
    if config.model.weights:
        report = load_weights_by_name(
            body, config.model.weights, variant=data.spec.name,
            head_anchors=data.head.anchors_per_scale if config.model.head_transfer else None)
        skipped, loaded = report.skipped, set(report.loaded)
    if config.model.prior_bias:
        initialise_output_priors(body, data, data.input_hw, keep=loaded)
    if config.model.bn_momentum is not None:
        for layer in body.layers:
            if isinstance(layer, keras.layers.BatchNormalization):
                layer.momentum = float(config.model.bn_momentum)
    return body, template, skipped


def training_model(config: TrainConfig, data: TrainData, body: keras.Model) -> keras.Model:
    """The training model of ``body``: its loss is its output; ground truth padded to
    ``max_boxes``."""
    return data.head.training_model(body, data.num_classes, config.data.max_boxes,
                                    LossOptions.from_recipe(config.recipe, data.class_weights))


def initialise_output_priors(body: keras.Model, data: TrainData, input_hw: Tuple[int, int],
                              keep=()) -> None:
    """Set the bias of every convolution that ends an output and is not in ``keep`` (loaded from
    weights) to the head's priors (the head's ``bias_priors``; objects per
    image from the training set)."""
    per_image = float(np.mean([len(np.asarray(r.boxes).reshape(-1, 5)) for r in data.records]))
    head = data.head
    for stride, names in zip(head.strides, head.output_layer_groups(body)):
        cells = (input_hw[0] // stride) * (input_hw[1] // stride)
        biases = head.bias_priors(data.num_classes, cells, per_image)
        for name, bias in zip(names, biases):
            if name not in keep:
                layer = body.get_layer(name)
                layer.set_weights([layer.get_weights()[0], bias])


def set_stage_trainable(body: keras.Model, freeze_backbone: bool, freeze_bn: bool = False) -> int:
    """Freeze (or unfreeze) the ``backbone_*`` layers by name; returns the number frozen.

    ``freeze_bn`` also freezes every BatchNormalization layer, which Keras then runs in inference
    mode (moving statistics, no update): small per-replica batches no longer give noisy statistics,
    and N replicas x B/N images take exactly the step of one device x B images.
    """
    frozen = 0
    for layer in body.layers:
        freeze = (freeze_backbone and layer.name.startswith(BACKBONE_PREFIX)) or (
            freeze_bn and isinstance(layer, keras.layers.BatchNormalization))
        layer.trainable = not freeze
        frozen += int(freeze and bool(layer.weights))
    return frozen
