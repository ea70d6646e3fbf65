"""Evaluation against independent references: pycocotools' COCOeval and a VOC-devkit-style AP."""
from __future__ import annotations

import contextlib
import io

import numpy as np
import pytest
from locations import shared
from voc_devkit import voc_reference

from yolo3.core.errors import FileFormatError
from yolo3.evaluation.metrics import (
    align_image_keys,
    coco_summary,
    detection_entry,
    evaluate_detections,
    format_table,
    load_detection_json,
    save_detection_json,
    voc_ap,
)

NEVER_DETECTED = 1
DETECTED_CLASSES = [0, 2, 3, 4, 5]  # class 5 never has ground truth


def random_dataset(seed: int, num_images: int = 25, num_classes: int = 6):
    """Ground truth and detections with the awkward cases: empty images, a class never detected, a
    class without ground truth, duplicate detections (same box with the same or a lower score), and
    more than maxDets=100 detections of one class in one image."""
    rng = np.random.default_rng(seed)
    gt, dets = {}, {}
    for i in range(num_images):
        n = 0 if i % 7 == 3 else int(rng.integers(1, 8))
        xy = rng.uniform(0, 300, (n, 2))
        wh = rng.uniform(5, 120, (n, 2))
        cls = rng.integers(0, num_classes - 1, n)
        gt[i] = np.concatenate([xy, xy + wh, cls[:, None]], axis=1)
        boxes, scores, classes = [], [], []
        for row in gt[i]:
            if row[4] == NEVER_DETECTED:
                continue
            size = np.r_[row[2:4] - row[:2], row[2:4] - row[:2]]
            for _ in range(int(rng.integers(0, 3))):
                boxes.append(row[:4] + rng.normal(0, 0.08, 4) * size)
                scores.append(rng.uniform(0.05, 1.0))
                classes.append(int(row[4]) if rng.uniform() > 0.1 else int(rng.choice(DETECTED_CLASSES)))
        for _ in range(int(rng.integers(0, 6))):  # false positives anywhere
            xy1 = rng.uniform(0, 300, 2)
            boxes.append(np.r_[xy1, xy1 + rng.uniform(5, 100, 2)])
            scores.append(rng.uniform(0.01, 0.9))
            classes.append(int(rng.choice(DETECTED_CLASSES)))
        if boxes and rng.uniform() < 0.6:  # duplicates
            j = int(rng.integers(0, len(boxes)))
            for factor in (1.0, 0.9):
                boxes.append(boxes[j].copy()); scores.append(scores[j] * factor); classes.append(classes[j])
        if i == 5:  # beyond maxDets for one class in one image
            for _ in range(120):
                xy1 = rng.uniform(0, 300, 2)
                boxes.append(np.r_[xy1, xy1 + rng.uniform(5, 100, 2)])
                scores.append(rng.uniform(0.0, 1.0))
                classes.append(0)
        if i == 9:
            continue  # an image with ground truth but no entry in the detections at all
        dets[i] = (np.array(boxes, dtype=np.float64).reshape(-1, 4), np.array(scores, dtype=np.float64),
                   np.array(classes, dtype=np.int64))
    return gt, dets, num_classes


def run_cocoeval(gt, dets, num_classes):
    """pycocotools' COCOeval on the same data: returns (stats, precision array)."""
    from pycocotools.coco import COCO
    from pycocotools.cocoeval import COCOeval

    images = [{"id": int(i), "width": 640, "height": 640} for i in sorted(gt)]
    anns, ann_id = [], 1
    for i in sorted(gt):
        for x1, y1, x2, y2, c in gt[i]:
            anns.append({"id": ann_id, "image_id": int(i), "category_id": int(c) + 1,
                         "bbox": [x1, y1, x2 - x1, y2 - y1], "area": (x2 - x1) * (y2 - y1), "iscrowd": 0})
            ann_id += 1
    coco_gt = COCO()
    coco_gt.dataset = {"images": images, "annotations": anns,
                       "categories": [{"id": k + 1, "name": str(k)} for k in range(num_classes)]}
    with contextlib.redirect_stdout(io.StringIO()):
        coco_gt.createIndex()
        results = []
        for i in sorted(dets):
            b, s, c = dets[i]
            for box, score, cls in zip(b, s, c):
                results.append({"image_id": int(i), "category_id": int(cls) + 1, "score": float(score),
                                "bbox": [box[0], box[1], box[2] - box[0], box[3] - box[1]]})
        coco_dt = coco_gt.loadRes(results)
        ev = COCOeval(coco_gt, coco_dt, "bbox")
        ev.evaluate()
        ev.accumulate()
        ev.summarize()
    return ev.stats, ev.eval["precision"]


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_coco_figures_equal_pycocotools(seed):
    gt, dets, num_classes = random_dataset(seed)
    result = evaluate_detections(gt, dets, num_classes)
    stats, precision = run_cocoeval(gt, dets, num_classes)
    # every figure of COCOeval's summary: AP, AP50, AP75, AP by size, AR@1, @10, @100, AR by size
    # (ground truth and unmatched detections outside a size range ignored): each set holds
    # boxes of every size
    assert min(stats) > -1
    assert coco_summary(result) == pytest.approx(list(stats), abs=1e-6)
    for k, entry in enumerate(result["per_class"]):
        p = precision[:, :, k, 0, 2]  # area all, maxDets 100
        if np.all(p == -1):
            assert entry["AP50_95"] is None and entry["num_gt"] == 0
        else:
            assert entry["AP50_95"] == pytest.approx(p.mean(), abs=1e-6)
            assert entry["AP50"] == pytest.approx(p[0].mean(), abs=1e-6)
            assert entry["AP75"] == pytest.approx(p[5].mean(), abs=1e-6)
        for a, size in enumerate(("small", "medium", "large"), start=1):
            p = precision[:, :, k, a, 2]
            if np.all(p == -1):
                assert entry[f"AP_{size}"] is None
            else:
                assert entry[f"AP_{size}"] == pytest.approx(p.mean(), abs=1e-6)
    assert result["per_class"][NEVER_DETECTED]["num_gt"] > 0
    assert result["per_class"][NEVER_DETECTED]["AP50_95"] == 0.0


@pytest.mark.parametrize("seed", [0, 3])
def test_voc_figures_equal_devkit_reference(seed):
    gt, dets, num_classes = random_dataset(seed)
    result = evaluate_detections(gt, dets, num_classes)
    all_point, eleven = [], []
    for k, entry in enumerate(result["per_class"]):
        ref = voc_reference(gt, dets, k)
        ref07 = voc_reference(gt, dets, k, use_07=True)
        if ref is None:
            assert entry["AP50_voc"] is None and entry["AP50_voc07"] is None
            continue
        assert entry["AP50_voc"] == pytest.approx(ref, abs=1e-9)
        assert entry["AP50_voc07"] == pytest.approx(ref07, abs=1e-9)
        all_point.append(ref)
        eleven.append(ref07)
    assert result["mAP50_voc"] == pytest.approx(np.mean(all_point), abs=1e-9)
    assert result["mAP50_voc07"] == pytest.approx(np.mean(eleven), abs=1e-9)


def test_perfect_and_empty_detections():
    gt = {"a": np.array([[0, 0, 10, 10, 0], [20, 20, 40, 50, 1]], float), "b": np.zeros((0, 5))}
    perfect = {"a": (gt["a"][:, :4], np.array([0.9, 0.8]), np.array([0, 1]))}
    r = evaluate_detections(gt, perfect, 3, class_names=["x", "y", "z"])
    for key in ("mAP50", "mAP75", "mAP50_95", "mAP50_voc", "mAP50_voc07"):
        assert r[key] == pytest.approx(1.0)
    assert r["per_class"][2]["AP50"] is None and r["num_classes_with_gt"] == 2
    none = evaluate_detections(gt, {}, 3)
    assert none["mAP50"] == 0.0 and none["mAP50_voc"] == 0.0
    assert "mean" in format_table(r)
    # A false positive on an image without ground truth halves precision at full recall.
    fp = dict(perfect, b=(np.array([[0, 0, 5, 5]], float), np.array([0.95]), np.array([0])))
    r = evaluate_detections(gt, fp, 3)
    assert r["per_class"][0]["AP50_voc"] == pytest.approx(0.5)


def test_voc_ap_definitions():
    rec = np.array([0.5, 0.5, 1.0])
    prec = np.array([1.0, 0.5, 2 / 3])
    assert voc_ap(rec, prec) == pytest.approx(0.5 * 1.0 + 0.5 * 2 / 3)
    assert voc_ap(rec, prec, use_07_metric=True) == pytest.approx((6 * 1.0 + 5 * 2 / 3) / 11)


def test_detection_json_round_trip_and_errors(tmp_path):
    entries = [detection_entry("img/a.jpg", np.array([[1, 2, 3, 4]]), np.array([0.5]), np.array([1]),
                               ["p", "q"]),
               detection_entry("img/b.jpg", np.zeros((0, 4)), np.zeros(0), np.zeros(0), ["p", "q"])]
    assert entries[0]["names"] == ["q"]
    path = tmp_path / "d.json"
    save_detection_json(path, entries)
    loaded = load_detection_json(path, num_classes=2)
    assert loaded["img/a.jpg"][0].tolist() == [[1, 2, 3, 4]] and len(loaded["img/b.jpg"][0]) == 0
    with pytest.raises(FileFormatError, match="class id"):
        load_detection_json(path, num_classes=1)
    (tmp_path / "bad.json").write_text('[{"image": "x", "boxes": [[1,2,3,4]], "scores": [], "classes": []}]')
    with pytest.raises(FileFormatError, match=r"bad.json \(entry 0\)"):
        load_detection_json(tmp_path / "bad.json")
    mapping = align_image_keys(["/data/x/a.jpg", "/data/x/b.jpg"], ["a.jpg", "/data/x/b.jpg", "c.jpg"])
    assert mapping == {"a.jpg": "/data/x/a.jpg", "/data/x/b.jpg": "/data/x/b.jpg"}


def test_evaluate_cli_from_detection_json(tmp_path, capsys):
    import json as _json

    from yolo3.cli.evaluate import main

    (tmp_path / "classes.txt").write_text("a\nb\n")
    img1, img2 = tmp_path / "one.jpg", tmp_path / "two.jpg"
    (tmp_path / "ann.txt").write_text(f"{img1} 10,10,50,60,0 70,20,90,80,1\n{img2} 5,5,40,40,0\n")
    entries = [  # image one: both boxes found (paths given relative: matched by file name)
        {"image": "one.jpg", "boxes": [[10, 10, 50, 60], [70, 20, 90, 80]], "scores": [0.9, 0.8],
         "classes": [0, 1], "names": ["a", "b"]},
        # image two: a confident false positive then the true box
        {"image": str(img2), "boxes": [[100, 100, 120, 120], [5, 5, 40, 40]], "scores": [0.95, 0.5],
         "classes": [0, 0], "names": ["a", "a"]},
    ]
    (tmp_path / "dets.json").write_text(_json.dumps(entries))
    out = tmp_path / "res" / "metrics.json"
    rc = main(["--annotations", str(tmp_path / "ann.txt"), "--classes", str(tmp_path / "classes.txt"),
               "--detections", str(tmp_path / "dets.json"), "--out", str(out)])
    assert rc == 0
    table = capsys.readouterr().out
    assert "mean" in table and "a" in table
    res = _json.loads(out.read_text())
    assert {"mAP50", "mAP75", "mAP50_95", "mAP50_voc07", "per_class"} <= set(res)
    # class a: ranks FP(0.95), TP(0.9), TP(0.5) over 2 boxes -> the envelope is 2/3 up to recall 1
    ap_a = voc_reference({0: np.array([[10, 10, 50, 60, 0]]), 1: np.array([[5, 5, 40, 40, 0]])},
                         {0: (np.array([[10, 10, 50, 60]]), np.array([0.9]), np.array([0])),
                          1: (np.array([[100, 100, 120, 120], [5, 5, 40, 40]]), np.array([0.95, 0.5]),
                              np.array([0, 0]))}, 0)
    assert ap_a == pytest.approx(2 / 3)
    assert res["per_class"][0]["AP50_voc"] == pytest.approx(ap_a)
    assert res["per_class"][1]["AP50_voc"] == pytest.approx(1.0)
    assert res["mAP50_voc"] == pytest.approx((ap_a + 1.0) / 2)
    assert (tmp_path / "res" / "metrics_pr.png").stat().st_size > 1000


def test_evaluate_cli_with_a_model_equals_its_saved_json(tmp_path):
    import json as _json

    import keras

    from yolo3.cli.evaluate import main
    from yolo3.modeling.bodies import build_body
    from yolo3.ops.anchors import TINY_YOLO_ANCHORS, write_anchors

    images = shared("images")
    keras.utils.set_random_seed(3)
    build_body("tiny", 2).save(tmp_path / "m.keras")
    write_anchors(tmp_path / "anchors.txt", TINY_YOLO_ANCHORS)
    (tmp_path / "classes.txt").write_text("a\nb\n")
    (tmp_path / "ann.txt").write_text(f"{images / 'dog.jpg'} 100,100,300,400,0\n"
                                      f"{images / 'eagle.jpg'} 50,60,400,300,1\n")
    common = ["--annotations", str(tmp_path / "ann.txt"), "--classes", str(tmp_path / "classes.txt"),
              "--no-plot"]
    assert main(common + ["--model", str(tmp_path / "m.keras"), "--input-size", "128", "--score", "0.2",
                          "--save-detections", str(tmp_path / "d.json"), "--out", str(tmp_path / "a.json")]) == 0
    assert main(common + ["--detections", str(tmp_path / "d.json"), "--out", str(tmp_path / "b.json")]) == 0
    a, b = (_json.loads((tmp_path / n).read_text()) for n in ("a.json", "b.json"))
    assert len(_json.loads((tmp_path / "d.json").read_text())) == 2
    for key in ("mAP50", "mAP75", "mAP50_95", "mAP50_voc", "mAP50_voc07"):
        assert a[key] == pytest.approx(b[key], abs=1e-6)


def test_evaluate_cli_sliced_scores_the_tiled_detections(tmp_path, capsys):
    import json as _json

    import keras
    from cli_harness import assert_refused, run_cli

    from yolo3.data.images import load_image
    from yolo3.inference.detector import YOLO
    from yolo3.inference.tiled import TiledDetector
    from yolo3.modeling.bodies import build_body
    from yolo3.ops.anchors import TINY_YOLO_ANCHORS, write_anchors

    images = shared("images")
    keras.utils.set_random_seed(5)
    build_body("tiny", 2).save(tmp_path / "m.keras")
    write_anchors(tmp_path / "anchors.txt", TINY_YOLO_ANCHORS)
    (tmp_path / "classes.txt").write_text("a\nb\n")
    (tmp_path / "ann.txt").write_text(f"{images / 'dog.jpg'} 100,100,120,118,0 50,60,400,300,1\n")
    common = ["evaluate", "--annotations", tmp_path / "ann.txt", "--classes",
              tmp_path / "classes.txt", "--no-plot"]
    model = ["--model", tmp_path / "m.keras", "--input-size", 128, "--score", 0.1, "--engine",
             "keras", "--precision", "float32"]
    code, err = run_cli([*common, *model, "--tile", 256, "--save-detections", tmp_path / "d.json",
                         "--out", tmp_path / "a.json"], capsys)
    assert code == 0, err
    assert "sliced: tiles of 256x256" in err
    [entry] = _json.loads((tmp_path / "d.json").read_text())
    detector = YOLO(tmp_path / "m.keras", score=0.1, input_size=128, precision="float32",
                    engine="keras")
    boxes, scores, _ = TiledDetector(detector, 256).detect(load_image(images / "dog.jpg"))
    assert len(entry["boxes"]) == len(boxes) > 0
    np.testing.assert_allclose(entry["scores"], scores, atol=1e-5)
    code, err = run_cli([*common, "--detections", tmp_path / "d.json", "--out", tmp_path / "b.json"],
                        capsys)
    assert code == 0, err
    a, b = (_json.loads((tmp_path / n).read_text()) for n in ("a.json", "b.json"))
    for key in ("mAP50_95", "mAP_small", "mAP_large"):
        assert a[key] == pytest.approx(b[key], abs=1e-6)
    assert a["mAP_medium"] is None  # no box of that size
    # slicing needs a model to run
    code, err = run_cli([*common, "--detections", tmp_path / "d.json", "--tile", 256, "--out",
                         tmp_path / "c.json"], capsys)
    assert_refused(code, err, "--tile", "--detections")
    assert not (tmp_path / "c.json").exists()


def test_evaluate_slices_a_tiled_model_as_its_file_records_and_tile_0_turns_it_off(tmp_path,
                                                                                   capsys):
    """A model trained on tiles records its slicing (ModelInfo.slicing): evaluate slices so by
    default, hand-over included, and says so on its first line; --tile 0: whole images."""
    import json as _json

    import keras
    from cli_harness import run_cli

    from yolo3.checkpoint.metadata import ModelInfo, embed_info
    from yolo3.config.masks import default_masks
    from yolo3.data.images import load_image
    from yolo3.inference.detector import YOLO
    from yolo3.inference.tiled import TiledDetector
    from yolo3.modeling.bodies import build_body
    from yolo3.ops.anchors import TINY_YOLO_ANCHORS
    from yolo3.ops.tiles import Slicing

    images = shared("images")
    keras.utils.set_random_seed(5)
    model = tmp_path / "m.keras"
    build_body("tiny", 2).save(model)
    embed_info(model, ModelInfo(TINY_YOLO_ANCHORS, default_masks(6, 2), 2, ["a", "b"], "tiny",
                                (128, 128), slicing=Slicing(256, 0.3, whole_from=8)))
    (tmp_path / "ann.txt").write_text(f"{images / 'dog.jpg'} 100,100,120,118,0 50,60,400,300,1\n")
    common = ["evaluate", "--annotations", tmp_path / "ann.txt", "--no-plot", "--model", model,
              "--score", 0.1, "--engine", "keras", "--precision", "float32"]
    detector = YOLO(model, score=0.1, precision="float32", engine="keras")
    image = load_image(images / "dog.jpg")
    for flags, reference in (([], TiledDetector(detector, 256, 0.3, whole_from=8)),
                             (["--tile", 0], detector)):
        saved = tmp_path / f"d{len(flags)}.json"
        code, err = run_cli([*common, *flags, "--save-detections", saved, "--out",
                             tmp_path / f"e{len(flags)}.json"], capsys)
        assert code == 0, err
        first = err.strip().splitlines()[0]
        if flags:
            assert "sliced" not in err
        else:
            assert first.startswith("sliced: tiles of 256x256 px overlapping 0.3 plus the whole "
                                    "image (objects from 8 px at the whole-image input") and \
                first.endswith("(as the model was trained; --tile 0: the whole image only)"), first
        [entry] = _json.loads(saved.read_text())
        boxes, scores, _ = reference.detect(image)
        assert len(entry["boxes"]) == len(boxes) > 0
        np.testing.assert_allclose(entry["scores"], scores, atol=1e-5)
    assert (tmp_path / "d0.json").read_text() != (tmp_path / "d2.json").read_text()


def test_the_ap_by_size_can_be_left_out_and_nothing_else_changes():
    gt, dets, num_classes = random_dataset(1)
    full = evaluate_detections(gt, dets, num_classes)
    lean = evaluate_detections(gt, dets, num_classes, by_size=False)
    sized = {f"mAP_{s}" for s in ("small", "medium", "large")}
    assert sized <= set(full) and not sized & set(lean)
    for key in set(lean) - {"per_class"}:
        assert lean[key] == full[key], key
    for a, b in zip(lean["per_class"], full["per_class"]):
        assert a == {k: v for k, v in b.items() if k not in ("AP_small", "AP_medium", "AP_large")}
