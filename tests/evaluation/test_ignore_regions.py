"""``yolo3 evaluate`` on files like the real ones, against the official rules.

- A COCO JSON with crowd regions (detections on them), segment areas unlike the boxes' areas,
  several sizes and classes: every figure of pycocotools' ``COCOeval.summarize`` to 1e-6.
- A VOC folder with difficult objects and integer pixel indices: VOC2007's 11-point and
  VOC2010's all-point AP of an independent implementation of the devkit's rules (difficult
  objects, ``+1`` pixels; ``test_metrics.voc_reference``) to 1e-9.

Both are read from files by yolo3's own readers, as a user's would be, and each set is built so
that dropping the regions (as yolo3 did before) changes the figures: the hard case is exercised.
"""
from __future__ import annotations

import contextlib
import io
import json
import xml.etree.ElementTree as ET

import numpy as np
import pytest
from voc_devkit import voc_reference

from yolo3.cli.evaluate import main as evaluate_main
from yolo3.evaluation.metrics import coco_summary

CLASSES = ["cat", "dog", "bird"]


def coco_like(seed: int, num_images: int = 30):
    """A COCO instances dict and pycocotools-style detections: about one annotation in six a
    crowd region with detections inside it, areas 30-90% of the box, boxes 6-300 px."""
    rng = np.random.default_rng(seed)
    images, anns, dets = [], [], []
    for i in range(1, num_images + 1):
        width, height = 640, 480
        images.append({"id": i * 7, "file_name": f"im{i:03d}.jpg", "width": width, "height": height})
        for _ in range(int(rng.integers(0, 8))):
            side = float(np.exp(rng.uniform(np.log(6), np.log(300))))
            w, h = side * rng.uniform(0.6, 1.4), side * rng.uniform(0.6, 1.4)
            x, y = rng.uniform(0, width - w), rng.uniform(0, height - h)
            crowd = int(rng.random() < 0.17)
            cat = int(rng.integers(1, len(CLASSES) + 1)) * 10  # category ids 10, 20, 30
            anns.append({"id": len(anns) + 1, "image_id": i * 7, "category_id": cat,
                         "bbox": [x, y, w, h], "area": w * h * rng.uniform(0.3, 0.9),
                         "iscrowd": crowd, "segmentation": [[x, y, x + w, y, x + w, y + h]]})
            for _ in range(int(rng.integers(1 if crowd else 0, 4))):
                if crowd:  # a detection inside the crowd region
                    box = [x + rng.uniform(0, 0.6) * w, y + rng.uniform(0, 0.6) * h, 0.35 * w, 0.35 * h]
                else:
                    jitter = rng.normal(0, 0.08 * side, 4)
                    box = [x + jitter[0], y + jitter[1], max(1.0, w + jitter[2]), max(1.0, h + jitter[3])]
                label = cat if rng.random() < 0.9 else int(rng.integers(1, len(CLASSES) + 1)) * 10
                dets.append({"image_id": i * 7, "category_id": label, "bbox": box,
                             "score": float(rng.random())})
        for _ in range(int(rng.integers(0, 3))):  # false positives anywhere
            w, h = rng.uniform(5, 200, 2)
            dets.append({"image_id": i * 7, "category_id": int(rng.integers(1, 4)) * 10,
                         "bbox": [rng.uniform(0, width - w), rng.uniform(0, height - h), w, h],
                         "score": float(rng.random())})
    categories = [{"id": (k + 1) * 10, "name": name} for k, name in enumerate(CLASSES)]
    return {"images": images, "annotations": anns, "categories": categories}, dets


def cocoeval_stats(data: dict, dets: list) -> np.ndarray:
    from pycocotools.coco import COCO
    from pycocotools.cocoeval import COCOeval
    with contextlib.redirect_stdout(io.StringIO()):
        coco = COCO()
        coco.dataset = json.loads(json.dumps(data))
        coco.createIndex()
        ev = COCOeval(coco, coco.loadRes(json.loads(json.dumps(dets))), "bbox")
        ev.evaluate()
        ev.accumulate()
        ev.summarize()
    return ev.stats


def yolo3_detection_json(dets: list, file_of: dict, label_of: dict, xywh: bool = True) -> list:
    """pycocotools-style detections as ``yolo3 detect --json`` writes them."""
    entries = {}
    for d in dets:
        x, y, w, h = d["bbox"] if xywh else (d["bbox"][0], d["bbox"][1], d["bbox"][2] - d["bbox"][0],
                                              d["bbox"][3] - d["bbox"][1])
        e = entries.setdefault(d["image_id"], {"image": file_of[d["image_id"]], "boxes": [],
                                               "scores": [], "classes": []})
        e["boxes"].append([x, y, x + w, y + h])
        e["scores"].append(d["score"])
        e["classes"].append(label_of[d["category_id"]])
    return list(entries.values())


def run_evaluate(tmp_path, annotations, entries, extra=()):
    (tmp_path / "dets.json").write_text(json.dumps(entries))
    out = tmp_path / "res.json"
    assert evaluate_main(["--annotations", str(annotations), "--detections",
                          str(tmp_path / "dets.json"), "--out", str(out), "--no-plot",
                          *extra]) == 0
    return json.loads(out.read_text())


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_a_coco_file_with_crowd_regions_and_segment_areas_equals_pycocotools(tmp_path, seed):
    data, dets = coco_like(seed)
    path = tmp_path / "instances_val.json"
    path.write_text(json.dumps(data))
    file_of = {im["id"]: im["file_name"] for im in data["images"]}
    label_of = {c["id"]: k for k, c in enumerate(data["categories"])}
    result = run_evaluate(tmp_path, path, yolo3_detection_json(dets, file_of, label_of))
    stats = cocoeval_stats(data, dets)
    assert min(stats) > -1  # every figure defined: each set has every size
    assert coco_summary(result) == pytest.approx(list(stats), abs=1e-6)
    crowds = sum(a["iscrowd"] for a in data["annotations"])
    assert result["num_ignored"] == crowds > 0
    assert sum(c["num_gt"] for c in result["per_class"]) == len(data["annotations"]) - crowds

    # the hard cases matter here: without the crowd regions and with box areas, pycocotools
    # itself gives other figures
    plain = dict(data, annotations=[dict(a, area=a["bbox"][2] * a["bbox"][3])
                                    for a in data["annotations"] if not a["iscrowd"]])
    dropped = cocoeval_stats(plain, dets)
    assert abs(dropped[1] - stats[1]) > 0.01  # AP50: crowd detections counted as false positives
    assert np.abs(dropped[3:6] - stats[3:6]).max() > 0.01  # the sizes by segment area


def voc_like(seed: int, num_images: int = 25):
    """Objects per image in file order ``(box, class, difficult)`` with integer VOC corners
    (1-based, inclusive), a quarter difficult; detections ``image -> (boxes, scores, classes)``
    with some on the difficult objects."""
    rng = np.random.default_rng(seed)
    objects, dets = {}, {}
    for i in range(num_images):
        objs, boxes, scores, classes = [], [], [], []
        for _ in range(int(rng.integers(1, 7))):
            w, h = rng.integers(8, 200, 2)
            x1, y1 = rng.integers(1, 500 - w), rng.integers(1, 375 - h)
            box = np.array([x1, y1, x1 + w - 1, y1 + h - 1], float)
            cls, difficult = int(rng.integers(0, len(CLASSES))), bool(rng.random() < 0.25)
            objs.append((box, cls, difficult))
            for _ in range(int(rng.integers(0, 3))):
                boxes.append(np.round(box + rng.normal(0, 0.06 * w, 4)))
                scores.append(float(rng.random()))
                classes.append(cls if rng.random() < 0.9 else int(rng.integers(0, len(CLASSES))))
        for _ in range(int(rng.integers(0, 3))):
            x1, y1 = rng.integers(1, 400, 2)
            boxes.append(np.array([x1, y1, x1 + rng.integers(5, 90), y1 + rng.integers(5, 90)], float))
            scores.append(float(rng.random()))
            classes.append(int(rng.integers(0, len(CLASSES))))
        objects[f"{i:06d}"] = objs
        dets[f"{i:06d}"] = (np.array(boxes).reshape(-1, 4), np.array(scores), np.array(classes))
    return objects, dets


def write_voc(folder, objects):
    (folder / "Annotations").mkdir(parents=True)
    for stem, objs in objects.items():
        root = ET.Element("annotation")
        ET.SubElement(root, "filename").text = f"{stem}.jpg"
        for box, cls, difficult in objs:
            obj = ET.SubElement(root, "object")
            ET.SubElement(obj, "name").text = CLASSES[cls]
            ET.SubElement(obj, "difficult").text = str(int(difficult))
            bnd = ET.SubElement(obj, "bndbox")
            for tag, value in zip(("xmin", "ymin", "xmax", "ymax"), box):
                ET.SubElement(bnd, tag).text = str(int(value))
        ET.ElementTree(root).write(folder / "Annotations" / f"{stem}.xml")
    (folder / "classes.txt").write_text("\n".join(CLASSES) + "\n")


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_a_voc_folder_with_difficult_objects_equals_the_devkits_rules(tmp_path, seed):
    objects, dets = voc_like(seed)
    root = tmp_path / "VOC2007"
    write_voc(root, objects)
    entries = [{"image": f"{stem}.jpg", "boxes": b.tolist(), "scores": s.tolist(),
                "classes": c.tolist()} for stem, (b, s, c) in dets.items()]
    result = run_evaluate(tmp_path, root / "Annotations", entries,
                          ["--classes", str(root / "classes.txt")])
    assert result["voc_pixel_indices"] is True
    refs, refs07, plain = [], [], []
    for k, entry in enumerate(result["per_class"]):
        ref = voc_reference(None, dets, k, objects=objects, plus_one=True)
        ref07 = voc_reference(None, dets, k, use_07=True, objects=objects, plus_one=True)
        assert entry["AP50_voc"] == pytest.approx(ref, abs=1e-9)
        assert entry["AP50_voc07"] == pytest.approx(ref07, abs=1e-9)
        refs.append(ref)
        refs07.append(ref07)
        # what yolo3 gave before: difficult objects dropped, continuous pixels
        counted = {i: [o for o in objs if not o[2]] for i, objs in objects.items()}
        plain.append(voc_reference(None, dets, k, use_07=True, objects=counted))
    assert result["mAP50_voc"] == pytest.approx(np.mean(refs), abs=1e-9)
    assert result["mAP50_voc07"] == pytest.approx(np.mean(refs07), abs=1e-9)
    assert result["num_ignored"] == sum(o[2] for objs in objects.values() for o in objs) > 0
    assert np.mean(refs07) - np.mean(plain) > 0.01


def test_the_table_says_how_many_regions_counted_neither_way(tmp_path, capsys):
    data, dets = coco_like(0, num_images=6)
    path = tmp_path / "instances_val.json"
    path.write_text(json.dumps(data))
    file_of = {im["id"]: im["file_name"] for im in data["images"]}
    label_of = {c["id"]: k for k, c in enumerate(data["categories"])}
    (tmp_path / "dets.json").write_text(json.dumps(yolo3_detection_json(dets, file_of, label_of)))
    assert evaluate_main(["--annotations", str(path), "--detections", str(tmp_path / "dets.json"),
                          "--out", str(tmp_path / "r.json"), "--no-plot"]) == 0
    crowds = sum(a["iscrowd"] for a in data["annotations"])
    out = capsys.readouterr().out
    assert f"{crowds} ignore regions (COCO crowd, VOC difficult): a detection on one counts " \
           "neither way" in out
    assert "AR50_95 (COCO): 1 per image" in out
