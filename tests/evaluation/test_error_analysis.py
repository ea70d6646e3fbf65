"""yolo3.evaluation.error_analysis: the TIDE breakdown against the reference package (tidecv) on
random sets with every kind of error, hand-built cases with one error of each type (the AP worked
out by hand), and the per-class counts and worst images at a score."""
from __future__ import annotations

import os

import numpy as np
import pytest

from yolo3.evaluation.error_analysis import (
    ERROR_TYPES,
    SHORT_NAMES,
    class_errors,
    error_breakdown,
    format_breakdown,
    image_errors,
    worst_images,
)


def _random_set(seed: int, images: int = 40, num_classes: int = 4, round_scores: bool = False):
    """Ground truth, and detections with every error: jittered boxes (some badly), wrong classes,
    duplicates, strays, misses."""
    rng = np.random.default_rng(seed)
    gt, dets = {}, {}
    for i in range(images):
        n = int(rng.integers(0, 8))
        xy = rng.uniform(0, 500, (n, 2))
        g = np.concatenate([xy, xy + rng.uniform(8, 150, (n, 2)),
                            rng.integers(0, num_classes, (n, 1))], 1)
        gt[f"im{i}"] = g
        boxes, scores, classes = [], [], []
        for b in g:
            if rng.random() < 0.15:
                continue
            w, h = b[2] - b[0], b[3] - b[1]
            box = b[:4] + rng.normal(0, 0.05 if rng.random() < 0.7 else 0.35, 4) * [w, h, w, h]
            k = int(rng.integers(0, num_classes)) if rng.random() < 0.1 else int(b[4])
            boxes.append(box), scores.append(rng.random()), classes.append(k)
            if rng.random() < 0.15:
                boxes.append(box + rng.normal(0, 2, 4)), scores.append(rng.random()), classes.append(k)
        for _ in range(int(rng.integers(0, 5))):
            xy = rng.uniform(0, 500, 2)
            boxes.append(np.r_[xy, xy + rng.uniform(8, 100, 2)])
            scores.append(rng.random() * 0.6), classes.append(int(rng.integers(0, num_classes)))
        scores = np.round(scores, 2) if round_scores else np.asarray(scores)
        dets[f"im{i}"] = (np.asarray(boxes).reshape(-1, 4), np.asarray(scores, np.float64),
                          np.asarray(classes, np.int64))
    return gt, dets


def _tidecv(gt, dets):
    """The reference package on the same data: (AP, main errors, special errors), AP points."""
    from tidecv import TIDE, Data
    truth, preds = Data("gt"), Data("pred")
    for n, (key, g) in enumerate(gt.items()):
        for b in g:
            truth.add_ground_truth(n, int(b[4]), [b[0], b[1], b[2] - b[0], b[3] - b[1]])
        truth.add_image(n, key)
        preds.add_image(n, key)
        for b, s, c in zip(*dets[key]):
            preds.add_detection(n, int(c), float(s), [b[0], b[1], b[2] - b[0], b[3] - b[1]])
    tide = TIDE()
    run = tide.evaluate(truth, preds, mode=TIDE.BOX)
    return run.ap, tide.get_main_errors()["pred"], tide.get_special_errors()["pred"]


@pytest.mark.parametrize("seed,round_scores", [(0, False), (1, False), (2, True), (3, True)])
def test_equals_the_reference_package(seed, round_scores):
    gt, dets = _random_set(seed, round_scores=round_scores)
    ap, main, special = _tidecv(gt, dets)
    ours = error_breakdown(gt, dets)
    assert 100 * ours.ap50 == pytest.approx(ap, abs=1e-9)
    for kind in ERROR_TYPES:
        assert 100 * ours.delta_ap[kind] == pytest.approx(main[SHORT_NAMES[kind]], abs=1e-9), kind
    assert 100 * ours.special["false_positives"] == pytest.approx(special["FalsePos"], abs=1e-9)
    assert 100 * ours.special["false_negatives"] == pytest.approx(special["FalseNeg"], abs=1e-9)
    assert sum(ours.delta_ap.values()) > 0 and all(ours.counts[k] > 0 for k in ERROR_TYPES)


# -- one error of each type, by hand ------------------------------------------------------------
# Class 0 has boxes A and B; class 1 has box C far away. Scores: 0.9 for A's true positive.
A, B, C = [0, 0, 100, 100], [200, 0, 300, 100], [0, 300, 100, 400]
TWO_OF_CLASS_0 = {"im": np.array([A + [0], B + [0]], np.float64)}
WITH_CLASS_1 = {"im": np.array([A + [0], B + [0], C + [1]], np.float64)}
HALF = 51 / 101                       # recall 0.5 at precision 1: 51 of TIDE's 101 bars
DIP = (51 + 50 * 2 / 3) / 101         # TP, FP, TP: precision 2/3 past recall 0.5


def _dets(*rows):
    boxes = np.array([r[0] for r in rows], np.float64).reshape(-1, 4)
    return {"im": (boxes, np.array([r[1] for r in rows], np.float64),
                   np.array([r[2] for r in rows], np.int64))}


HAND_CASES = {
    # a box of class 0 at IoU 0.4 with B: AP50 0.9 TP, 0.8 FP over two boxes; fixed, a TP
    "localisation": (TWO_OF_CLASS_0, _dets((A, .9, 0), ([200, 0, 240, 100], .8, 0)), HALF, 1.0),
    # class 1 on B: class 0 AP HALF, class 1 (FP .8 then its TP .7) 0.5; fixed: both 1
    "classification": (WITH_CLASS_1, _dets((A, .9, 0), (B, .8, 1), (C, .7, 1)),
                       (HALF + 0.5) / 2, 1.0),
    # class 1 at IoU 0.4 with B: class 1's AP 0.5, class 0's 1; dropped: both 1
    "both": (WITH_CLASS_1, _dets((A, .9, 0), (B, .5, 0), ([200, 0, 240, 100], .8, 1),
                                 (C, .7, 1)), 0.75, 1.0),
    "duplicate": (TWO_OF_CLASS_0, _dets((A, .9, 0), ([2, 2, 100, 100], .8, 0), (B, .5, 0)),
                  DIP, 1.0),
    "background": (TWO_OF_CLASS_0, _dets((A, .9, 0), ([500, 500, 550, 550], .8, 0), (B, .5, 0)),
                   DIP, 1.0),
    "missed": (TWO_OF_CLASS_0, _dets((A, .9, 0)), HALF, 1.0),
}


@pytest.mark.parametrize("kind", ERROR_TYPES)
def test_one_error_of_each_type_costs_that_type_alone(kind):
    gt, dets, ap, fixed = HAND_CASES[kind]
    result = error_breakdown(gt, dets)
    assert result.ap50 == pytest.approx(ap, abs=1e-12)
    assert result.delta_ap[kind] == pytest.approx(fixed - ap, abs=1e-12)
    assert {k: v for k, v in result.delta_ap.items() if k != kind} == dict.fromkeys(
        set(ERROR_TYPES) - {kind}, 0.0)
    assert result.counts == {k: int(k == kind) for k in ERROR_TYPES}


def test_the_best_scored_of_errors_on_one_box_is_the_one_fixed():
    """Two Loc errors on B: fixing makes the .8 one a true positive and drops the .7 one."""
    dets = _dets((A, .9, 0), ([200, 0, 240, 100], .7, 0), ([260, 0, 300, 100], .8, 0))
    result = error_breakdown(TWO_OF_CLASS_0, dets)
    assert result.counts["localisation"] == 2 and result.counts["missed"] == 0
    assert result.delta_ap["localisation"] == pytest.approx(1 - HALF, abs=1e-12)


def test_no_detections_and_no_boxes():
    result = error_breakdown(TWO_OF_CLASS_0, {})
    assert result.ap50 == 0.0 and result.counts["missed"] == 2
    assert result.delta_ap["missed"] == pytest.approx(0.0)  # no box left: no class to average
    empty = error_breakdown({"im": np.zeros((0, 5))}, _dets(([0, 0, 9, 9], .5, 0)))
    assert empty.ap50 == 0.0 and empty.counts["background"] == 1


def test_detections_beyond_max_dets_are_not_scored():
    dets = _dets((A, .9, 0), ([500, 500, 550, 550], .95, 0))
    assert error_breakdown(TWO_OF_CLASS_0, dets, max_dets=1).counts["background"] == 1
    assert error_breakdown(TWO_OF_CLASS_0, dets, max_dets=1).ap50 == 0.0


def test_per_class_counts_and_missed_by_size():
    gt = {"a": np.array([A + [0], [200, 0, 210, 10, 0], C + [1]], np.float64),
          "b": np.array([[0, 0, 40, 40, 1]], np.float64)}
    dets = {"a": (np.array([A, [500, 500, 550, 550], C], np.float64), np.array([.9, .8, .2]),
                  np.array([0, 1, 1])),
            "b": (np.array([[0, 0, 40, 40]], np.float64), np.array([.9]), np.array([0]))}
    counts = class_errors(gt, dets, 2, score=0.5)
    assert counts.false_positives["background"] == [0, 1]          # the stray of class 1
    assert counts.false_positives["classification"] == [1, 0]      # class 0 on b's class-1 box
    assert counts.missed == {"small": [1, 0], "medium": [0, 1], "large": [0, 1]}  # C: below .5
    assert counts.boxes == {"small": [1, 0], "medium": [0, 1], "large": [1, 1]}
    row = counts.as_dict(["cat", "dog"])["per_class"][1]
    assert row["name"] == "dog" and row["missed"]["large"] == 1


def test_worst_images_rank_each_reason_and_list_an_image_once():
    gt = {k: np.array([A + [0]], np.float64) for k in "abcd"}
    dets = {"a": _dets((A, .9, 0))["im"],                                  # clean
            "b": _dets(([500, 500, 550, 550], .9, 0))["im"],               # missed + stray .9
            "c": _dets((A, .9, 0), ([500, 500, 550, 550], .6, 0))["im"],   # stray .6
            "d": _dets((A, .9, 1))["im"]}                                  # wrong class
    per_image = image_errors(gt, dets, score=0.5)
    assert per_image[0].is_clean and not per_image[1].is_clean
    assert per_image[1].missed_area == 100 * 100 and per_image[3].wrong_class == 1
    chosen = [(im.image, reason) for im, reason in worst_images(per_image, count=2)]
    assert chosen == [("b", "most missed area"), ("d", "most missed area"),
                      ("c", "most confident false positives")]


def test_the_printed_breakdown_says_the_types_overlap():
    text = format_breakdown(error_breakdown(*HAND_CASES["missed"][:2]))
    assert "overlapping" in text and "Miss 49.50" in text


def test_evaluate_prints_and_writes_the_analysis(tmp_path, capsys):
    """``yolo3 evaluate``: the breakdown printed and in the JSON (equal to the library's), the
    errors per class and the worst images at the confusion matrix's score, and their pictures."""
    import json

    from PIL import Image

    from yolo3.cli.evaluate import main
    from yolo3.core.output_folder import written_by_yolo3
    (tmp_path / "classes.txt").write_text("cat\ndog\n")
    rows, entries, gt, dets = [], [], {}, {}
    for name, truth, found in (("clean", [A + [0]], [(A, .9, 0)]),
                               ("missed", [A + [0], B + [0]], [(A, .9, 0)]),
                               ("stray", [A + [0]], [(A, .8, 0), ([500, 500, 550, 550], .95, 1)])):
        path = tmp_path / f"{name}.jpg"
        Image.new("RGB", (600, 600), (90, 120, 150)).save(path)
        rows.append(f"{path} " + " ".join(",".join(str(int(v)) for v in t) for t in truth))
        boxes, scores, classes = (list(x) for x in zip(*found))
        entries.append({"image": str(path), "boxes": boxes, "scores": scores,
                        "classes": classes, "names": ["cat", "dog"]})
        gt[str(path)] = np.array(truth, np.float64)
        dets[str(path)] = (np.array(boxes, np.float64), np.array(scores), np.array(classes))
    (tmp_path / "val.txt").write_text("\n".join(rows) + "\n")
    (tmp_path / "dets.json").write_text(json.dumps(entries))
    out = tmp_path / "res" / "eval.json"
    assert main(["--annotations", str(tmp_path / "val.txt"), "--classes",
                 str(tmp_path / "classes.txt"), "--detections", str(tmp_path / "dets.json"),
                 "--out", str(out), "--confusion-score", "0.5"]) == 0
    printed = capsys.readouterr().out
    assert format_breakdown(error_breakdown(gt, dets)) in printed
    result = json.loads(out.read_text())
    assert result["errors"]["delta_ap"] == pytest.approx(error_breakdown(gt, dets).delta_ap)
    assert result["errors"]["counts"]["missed"] == 1 and result["errors"]["counts"]["background"] == 1
    per_class = result["errors_per_class"]
    assert per_class["score"] == 0.5
    assert per_class["per_class"][1]["false_positives"]["background"] == 1
    assert per_class["per_class"][0]["missed"] == {"small": 0, "medium": 0, "large": 1}
    worst = [(os.path.basename(w["image"]), w["reason"]) for w in result["worst_images"]]
    assert worst == [("missed.jpg", "most missed area"),
                     ("stray.jpg", "most confident false positives")]
    for suffix in ("_errors.png", "_worst.png"):
        assert written_by_yolo3(tmp_path / "res" / f"eval{suffix}")
    assert Image.open(tmp_path / "res" / "eval_worst.png").height > 2 * 320
