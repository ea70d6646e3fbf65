"""Write the model files of tests/test_saved_by_release.py with yolo3 as it was before its
renovation into folders (run once at commit fef8968, whose module layout was flat: ``python
tests/data/release_0_2/make.py``): small models holding every Keras object yolo3 registers, and
the outputs they give, so that the renovated package is tested loading files its predecessor wrote.
"""
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
import keras  # noqa: E402
import numpy as np  # noqa: E402

from yolo3.anchor_free_loss import AnchorFreeLoss  # noqa: E402
from yolo3.graph_surgery import FoldedBatchNorm  # noqa: E402
from yolo3.loss import YoloLoss, identity_loss  # noqa: E402
from yolo3.metadata import ModelInfo  # noqa: E402
from yolo3.saving import atomic_save_model  # noqa: E402
from yolo3.schedules import WarmupCosine  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))


def body() -> keras.Model:
    """Two outputs at strides 32 and 16 of 2 anchors x (5 + 2 classes), 64 x 64 input."""
    keras.utils.set_random_seed(7)
    x = inputs = keras.Input((64, 64, 3), name="image")
    for k, filters in enumerate((4, 8, 8, 8)):
        x = keras.layers.Conv2D(filters, 3, strides=2, padding="same", use_bias=False,
                                name=f"conv{k}")(x)
        x = keras.layers.BatchNormalization(epsilon=1e-6, name=f"bn{k}")(x)
        x = keras.layers.LeakyReLU(0.1, name=f"leaky{k}")(x)
    s16 = x
    x = keras.layers.Conv2D(8, 3, strides=2, padding="same", name="conv4")(x)
    x = FoldedBatchNorm(name="folded")(x)
    s32 = keras.layers.Conv2D(14, 1, name="output_s32")(x)
    up = keras.layers.UpSampling2D(2, name="up")(s32)
    s16 = keras.layers.Conv2D(14, 1, name="output_s16")(
        keras.layers.Concatenate(name="join")([up, s16]))
    return keras.Model(inputs, [s32, s16], name="release_body")


def main() -> None:
    net = body()
    rng = np.random.default_rng(3)
    image = rng.uniform(0, 1, (2, 64, 64, 3)).astype(np.float32)
    anchors = np.array([[10, 14], [23, 27], [37, 58], [81, 82]], np.float32)
    info = ModelInfo(anchors, [[2, 3], [0, 1]], 2, ["cat", "dog"], None, (64, 64))
    atomic_save_model(net, os.path.join(HERE, "body.keras"), info)
    # a training model of each head, compiled with yolo3's schedule and loss function
    y_true = [keras.Input((2, 2, 2, 7), name="y_true_s32"), keras.Input((4, 4, 2, 7),
                                                                       name="y_true_s16")]
    boxes = keras.Input((4, 5), name="true_boxes")
    outputs = net(net.inputs[0])
    loss = YoloLoss(anchors, 2, 0.5, [[2, 3], [0, 1]], true_boxes=True, name="yolo_loss")(
        [*outputs, *y_true, boxes])
    training = keras.Model([net.inputs[0], *y_true, boxes], loss, name="release_training")
    training.compile(keras.optimizers.Adam(WarmupCosine(1e-3, 100, 10)), loss=identity_loss)
    training.save(os.path.join(HERE, "training.keras"))
    free = AnchorFreeLoss([32, 16], 2, 2, name="anchor_free_loss")
    raw = [keras.Input((2, 2, 4 * 2 + 2)), keras.Input((4, 4, 4 * 2 + 2))]
    af = keras.Model([*raw, boxes], free([*raw, boxes]), name="release_anchor_free")
    af.save(os.path.join(HERE, "anchor_free_training.keras"))
    true_boxes = np.array([[[4, 6, 30, 40, 1], [0, 0, 0, 0, 0], [0, 0, 0, 0, 0], [0, 0, 0, 0, 0]]] * 2,
                          np.float32)
    y = [np.zeros((2, 2, 2, 2, 7), np.float32), np.zeros((2, 4, 4, 2, 7), np.float32)]
    y[0][:, 0, 0, 1, :5] = [0.27, 0.36, 26 / 64, 34 / 64, 1]
    y[0][:, 0, 0, 1, 6] = 1
    raw_maps = [rng.normal(0, 1, (2, 2, 2, 10)).astype(np.float32),
                rng.normal(0, 1, (2, 4, 4, 10)).astype(np.float32)]
    np.savez(os.path.join(HERE, "expected.npz"), image=image, true_boxes=true_boxes,
             y_true_s32=y[0], y_true_s16=y[1], raw_s32=raw_maps[0], raw_s16=raw_maps[1],
             out_s32=net(image)[0].numpy(), out_s16=net(image)[1].numpy(),
             loss=training([image, *y, true_boxes]).numpy(),
             anchor_free_loss=af([*raw_maps, true_boxes]).numpy(),
             lr_at_50=np.float32(WarmupCosine(1e-3, 100, 10)(50)))
    print("wrote", sorted(os.listdir(HERE)), file=sys.stderr)


if __name__ == "__main__":
    main()
