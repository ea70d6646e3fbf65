"""Detector: compared with a NumPy reference (letterbox, decode, per-class NMS) on a tiny body."""
from __future__ import annotations

import json

import numpy as np
import pytest
from PIL import Image

from yolo3.core.errors import FileFormatError
from yolo3.data.class_names import write_classes
from yolo3.ops.anchors import TINY_YOLO_ANCHORS, write_anchors
from yolo3.ops.letterbox import PAD_VALUE

INPUT = 128
CLASSES = ["cat", "dog", "bird"]


@pytest.fixture(scope="module")
def tiny_files(tmp_path_factory):
    import keras

    from yolo3.modeling.bodies import build_body

    keras.utils.set_random_seed(7)
    folder = tmp_path_factory.mktemp("tiny")
    body = build_body("tiny", len(CLASSES))
    # Spread the raw outputs so that scores differ clearly (random init gives near-equal scores).
    for name in ("output_s32", "output_s16"):
        layer = body.get_layer(name)
        w, b = layer.get_weights()
        layer.set_weights([w * 8.0, b])
    body.save(folder / "final.keras")
    body.save_weights(folder / "final.weights.h5")
    write_anchors(folder / "anchors.txt", TINY_YOLO_ANCHORS)
    write_classes(folder / "classes.txt", CLASSES)
    return folder


@pytest.fixture(scope="module")
def detector(tiny_files):
    from yolo3.inference.detector import YOLO
    return YOLO(tiny_files / "final.keras", score=0.3, iou=0.45, input_size=INPUT,
                precision="float32")


def sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def numpy_detect(body, image, anchors, masks, num_classes, score, iou, max_boxes=100):
    """Reference: letterbox (only exact factors 1 or 1/2, done by padding / 2x2 means), forward,
    decode and greedy per-class NMS, all in NumPy (float64)."""
    h, w = image.shape[:2]
    s = min(INPUT / h, INPUT / w)
    x = image.astype(np.float64) / 255.0
    if s == 0.5:
        x = x.reshape(h // 2, 2, w // 2, 2, 3).mean(axis=(1, 3))
    else:
        assert s == 1.0
    nh, nw = x.shape[:2]
    oy, ox = (INPUT - nh) // 2, (INPUT - nw) // 2
    canvas = np.full((INPUT, INPUT, 3), PAD_VALUE)  # the project's one letterbox gray (128/255)
    canvas[oy:oy + nh, ox:ox + nw] = x
    outputs = body(canvas[None].astype(np.float32), training=False)
    boxes, scores = [], []
    for out, mask in zip(outputs, masks):
        out = np.asarray(out, np.float64)[0]
        gh, gw = out.shape[:2]
        out = out.reshape(gh, gw, len(mask), 5 + num_classes)
        gy, gx = np.meshgrid(np.arange(gh), np.arange(gw), indexing="ij")
        cx = (sigmoid(out[..., 0]) + gx[..., None]) / gw * INPUT
        cy = (sigmoid(out[..., 1]) + gy[..., None]) / gh * INPUT
        bw = np.exp(out[..., 2]) * anchors[mask, 0]
        bh = np.exp(out[..., 3]) * anchors[mask, 1]
        # undo the letterbox: input pixels -> image pixels
        cx, cy, bw, bh = (cx - ox) / (nw / w), (cy - oy) / (nh / h), bw / (nw / w), bh / (nh / h)
        boxes.append(np.stack([cx - bw / 2, cy - bh / 2, cx + bw / 2, cy + bh / 2], -1).reshape(-1, 4))
        scores.append((sigmoid(out[..., 4:5]) * sigmoid(out[..., 5:])).reshape(-1, num_classes))
    boxes, scores = np.concatenate(boxes), np.concatenate(scores)
    keep = []
    for c in range(num_classes):
        idx = np.nonzero(scores[:, c] > score)[0]
        idx = idx[np.argsort(-scores[idx, c])]
        chosen = []
        for i in idx:
            ok = True
            for j in chosen:
                a, b = boxes[i], boxes[j]
                iw = max(min(a[2], b[2]) - max(a[0], b[0]), 0)
                ih = max(min(a[3], b[3]) - max(a[1], b[1]), 0)
                inter = iw * ih
                union = (a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter
                if inter / union > iou:
                    ok = False
                    break
            if ok:
                chosen.append(i)
        keep += [(scores[i, c], c, i) for i in chosen[:max_boxes]]
    keep.sort(key=lambda t: -t[0])
    keep = keep[:max_boxes]
    out_boxes = np.array([boxes[i] for _, _, i in keep]).reshape(-1, 4)
    out_boxes = np.clip(out_boxes, 0, [w, h, w, h])
    return out_boxes, np.array([k[0] for k in keep]), np.array([k[1] for k in keep])


def assert_same_detections(got, ref, atol=2e-3):
    gb, gs, gc = got
    rb, rs, rc = ref
    assert len(gb) == len(rb) > 0
    order_g = np.lexsort((gb[:, 0], gc, -np.round(gs, 4)))
    order_r = np.lexsort((rb[:, 0], rc, -np.round(rs, 4)))
    np.testing.assert_allclose(gs[order_g], rs[order_r], atol=1e-5)
    np.testing.assert_array_equal(gc[order_g], rc[order_r])
    np.testing.assert_allclose(gb[order_g], rb[order_r], atol=atol)


@pytest.mark.parametrize("shape", [(64, 128), (128, 96), (256, 160)])
def test_detect_matches_numpy_reference(detector, shape):
    rng = np.random.default_rng(shape[0])
    image = rng.integers(0, 256, (*shape, 3), dtype=np.uint8)
    got = detector.detect(image)
    ref = numpy_detect(detector.body, image, detector.anchors, detector.anchor_mask, len(CLASSES),
                       detector.score, detector.iou)
    assert got[0].dtype == np.float32 and got[2].dtype == np.int32
    assert np.all(np.diff(got[1]) <= 0)  # sorted by score
    assert_same_detections(got, ref)


def test_detect_batch_of_different_sizes_equals_detect(detector):
    rng = np.random.default_rng(3)
    images = [rng.integers(0, 256, s + (3,), dtype=np.uint8) for s in [(64, 128), (200, 90), (128, 128)]]
    batch = detector.detect_batch(images)
    assert len(batch) == 3
    for image, got in zip(images, batch):
        single = detector.detect(image)
        assert len(single[0]) == len(got[0])
        np.testing.assert_allclose(got[0], single[0], atol=1e-3)
        np.testing.assert_allclose(got[1], single[1], atol=1e-5)
    # float input in [0, 1] is the same image
    floats = detector.detect(images[0].astype(np.float32) / 255.0)
    np.testing.assert_allclose(floats[0], batch[0][0], atol=1e-3)
    assert detector.detect_batch([]) == []
    # a stream (a folder, a video) gives each image's detections in order, alone or in batches
    for batch_size in (1, 2):
        streamed = list(detector.detect_stream(iter(images), batch_size))
        assert len(streamed) == 3
        for got, ref in zip(streamed, batch):
            assert len(got[0]) == len(ref[0])
            np.testing.assert_allclose(got[0], ref[0], atol=1e-3)
            np.testing.assert_allclose(got[1], ref[1], atol=1e-5)
    assert list(detector.detect_stream(iter([]))) == []


def test_weights_h5_builds_the_same_body(tiny_files, detector):
    from yolo3.inference.detector import YOLO

    from_h5 = YOLO(tiny_files / "final.weights.h5", tiny_files / "anchors.txt", tiny_files / "classes.txt",
                   score=0.3, input_size=INPUT, precision="float32")
    assert from_h5.class_names == CLASSES and from_h5.anchor_mask == [[3, 4, 5], [0, 1, 2]]
    image = np.random.default_rng(5).integers(0, 256, (100, 120, 3), dtype=np.uint8)
    a, b = detector.detect(image), from_h5.detect(image)
    np.testing.assert_allclose(a[0], b[0], atol=1e-4)
    with pytest.raises(FileFormatError, match="final.weights.h5"):
        write_classes(tiny_files / "four.txt", CLASSES + ["fish"])
        YOLO(tiny_files / "final.weights.h5", tiny_files / "anchors.txt", tiny_files / "four.txt")
    with pytest.raises(FileFormatError, match="four.txt"):
        YOLO(tiny_files / "final.keras", tiny_files / "anchors.txt", tiny_files / "four.txt")
    with pytest.raises(FileFormatError, match="not found"):
        YOLO(tiny_files / "missing.keras")


def test_converter_masks_sidecar_is_used(tiny_files, tmp_path):
    import shutil

    from yolo3.checkpoint.metadata import sidecar_paths
    from yolo3.inference.detector import YOLO

    model = tmp_path / "old_tiny.keras"
    shutil.copy(tiny_files / "final.keras", model)
    anchors_file, masks_file = sidecar_paths(model)
    write_anchors(anchors_file, TINY_YOLO_ANCHORS)
    masks_file.write_text(json.dumps({"masks": [[3, 4, 5], [1, 2, 3]], "num_classes": 3}))
    det = YOLO(model, classes_path=tiny_files / "classes.txt", input_size=INPUT)
    assert det.anchor_mask == [[3, 4, 5], [1, 2, 3]]


def test_detect_image_draws_stable_colours(detector):
    from yolo3.evaluation.visualize import class_colors

    colors = class_colors(80)
    assert colors == class_colors(80) and len(set(colors)) == 80
    image = Image.fromarray(np.full((120, 160, 3), 128, np.uint8))
    drawn = detector.detect_image(image)
    boxes, _, classes = detector.detect(np.asarray(image))
    assert drawn.size == image.size and len(boxes) > 0
    arr = np.asarray(drawn)
    assert not np.array_equal(arr, np.asarray(image))
    # the box outline of the top detection uses its class colour
    present = {tuple(p) for p in arr.reshape(-1, 3)}
    assert colors[int(classes[0])] in present


def test_fold_batch_norms_keeps_outputs():
    import keras

    from yolo3.inference.detector import fold_batch_norms
    from yolo3.modeling.bodies import build_body

    body = build_body("tiny", 2, input_shape=(96, 96))
    rng = np.random.default_rng(2)
    for layer in body.layers:
        if isinstance(layer, keras.layers.BatchNormalization):
            g, b, m, v = layer.get_weights()
            layer.set_weights([rng.uniform(0.5, 1.5, g.shape), rng.normal(0, 0.2, b.shape),
                               rng.normal(0, 0.2, m.shape), rng.uniform(0.5, 2.0, v.shape)])
    folded = fold_batch_norms(body)
    assert not any(isinstance(l, keras.layers.BatchNormalization) for l in folded.layers)
    x = rng.uniform(0, 1, (2, 96, 96, 3)).astype(np.float32)
    for a, b in zip(body(x, training=False), folded(x, training=False)):
        a, b = np.asarray(a), np.asarray(b)
        np.testing.assert_allclose(b, a, atol=1e-4 * max(1.0, np.abs(a).max()))


def test_float32_detector_built_inside_a_mixed_precision_run_computes_in_float32():
    """Evaluation while training builds its float32 detector while the run's global policy is
    mixed bfloat16: the folded copy must not take that policy (it did: the identity layers that
    replace the batch norms cast every convolution's output to bfloat16, so the mAP logged while
    training was not the saved float32 model's)."""
    import keras

    from yolo3.inference.detector import fold_batch_norms
    from yolo3.modeling.bodies import build_body
    from yolo3.training.recipe import dtype_policy

    body = build_body("tiny", 2, input_shape=(64, 64))
    x = np.random.default_rng(3).uniform(0, 1, (2, 64, 64, 3)).astype(np.float32)
    outside = [np.asarray(o) for o in fold_batch_norms(body)(x, training=False)]
    with dtype_policy("mixed_bfloat16"):
        folded = fold_batch_norms(body)
    computing = {l.name: l.compute_dtype for l in folded.layers
                 if not isinstance(l, keras.layers.InputLayer)}
    assert set(computing.values()) == {"float32"}, computing
    for a, b in zip(outside, folded(x, training=False)):
        np.testing.assert_array_equal(np.asarray(b), a)


def test_converted_darknet_tiny_uses_its_cfg_masks(tmp_path, darknet_cfg_dir):
    from yolo3.checkpoint.darknet_convert import convert
    from yolo3.darknet.random_weights import write_random_weights
    from yolo3.inference.detector import YOLO

    cfg = darknet_cfg_dir / "yolov3-tiny.cfg"
    write_random_weights(cfg, tmp_path / "tiny.weights", seed=0)
    convert(cfg, tmp_path / "tiny.weights", tmp_path / "tiny.keras", progress=False)
    det = YOLO(tmp_path / "tiny.keras", classes_path=darknet_cfg_dir / "coco_classes.txt", input_size=416)
    assert det.anchor_mask == [[3, 4, 5], [1, 2, 3]]  # the original tiny cfg's masks, from the sidecar
    assert det.num_classes == 80 and det.input_hw == (416, 416)
    image = np.random.default_rng(0).integers(0, 256, (300, 500, 3), dtype=np.uint8)
    boxes, scores, classes = det.detect(image)
    assert np.all(boxes[:, [0, 2]] <= 500) and np.all(boxes[:, [1, 3]] <= 300) and np.all(boxes >= 0)
    assert np.all(scores > det.score) and np.all((classes >= 0) & (classes < 80))


def test_bfloat16_precision_computes_in_bfloat16_close_to_float32(tiny_files, detector):
    import keras

    from yolo3.inference.detector import YOLO

    half = YOLO(tiny_files / "final.keras", score=0.3, iou=0.45, input_size=INPUT, precision="bfloat16")
    convs = [l for l in half.inference_body.layers if isinstance(l, keras.layers.Conv2D)]
    assert convs and all(l.compute_dtype == "bfloat16" and l.variable_dtype == "float32" for l in convs)
    x = np.random.default_rng(11).uniform(0, 1, (2, INPUT, INPUT, 3)).astype(np.float32)
    for ref, got in zip(detector.forward(x), half.forward(x)):
        assert got.dtype == np.float32 and got.shape == ref.shape
        err = np.linalg.norm(got.astype(np.float64) - ref) / np.linalg.norm(ref.astype(np.float64))
        assert 0 < err < 3e-2, err  # bfloat16 keeps 8 significant bits: about 1% on the maps
    image = np.random.default_rng(12).integers(0, 256, (90, 140, 3), dtype=np.uint8)
    boxes, scores, classes = half.detect(image)
    assert boxes.dtype == np.float32 and len(boxes) == len(scores) == len(classes)
    with pytest.raises(ValueError, match="precision"):
        YOLO(tiny_files / "final.keras", input_size=INPUT, precision="float16")
