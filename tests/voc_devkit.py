"""An independent Pascal VOC devkit AP for the evaluation tests (tests/evaluation)."""
from __future__ import annotations

import numpy as np


def voc_reference(gt, dets, cls, iou_threshold=0.5, use_07=False, objects=None, plus_one=False):
    """Pascal VOC devkit AP for one class, written out step by step from the devkit's published
    rules (VOCevaldet.m / voc_eval.py). ``objects``: image -> ``[(box, class, difficult)]`` in the
    file's order (else ``gt``'s rows, none difficult); a detection whose best-overlap object is
    difficult counts neither way, and difficult objects are not in the positives. ``plus_one``:
    the devkit's inclusive pixel indices (``iw = min(x2) - max(x1) + 1``)."""
    if objects is None:
        objects = {i: [(row[:4], int(row[4]), False) for row in g] for i, g in gt.items()}
    one = 1.0 if plus_one else 0.0
    records = {i: {"boxes": [b for b, c, _ in objs if c == cls],
                   "difficult": [d for _, c, d in objs if c == cls]} for i, objs in objects.items()}
    for r in records.values():
        r["taken"] = [False] * len(r["boxes"])
    npos = sum(not d for r in records.values() for d in r["difficult"])
    if npos == 0:
        return None
    flat = [(i, b, s) for i, (bs, ss, cs) in dets.items() for b, s, c in zip(bs, ss, cs) if c == cls]
    flat.sort(key=lambda t: -t[2])
    tp, fp = [], []
    for i, box, _ in flat:
        rec = records.get(i, {"boxes": [], "taken": [], "difficult": []})
        best, best_j = -np.inf, -1
        for j, g in enumerate(rec["boxes"]):
            iw = min(box[2], g[2]) - max(box[0], g[0]) + one
            ih = min(box[3], g[3]) - max(box[1], g[1]) + one
            inter = max(iw, 0.0) * max(ih, 0.0)
            union = ((box[2] - box[0] + one) * (box[3] - box[1] + one)
                     + (g[2] - g[0] + one) * (g[3] - g[1] + one) - inter)
            ov = inter / union
            if ov > best:
                best, best_j = ov, j
        if best > iou_threshold:
            if rec["difficult"][best_j]:
                continue  # neither a true nor a false positive
            if not rec["taken"][best_j]:
                rec["taken"][best_j] = True
                tp.append(1.0); fp.append(0.0)
            else:
                tp.append(0.0); fp.append(1.0)
        else:
            tp.append(0.0); fp.append(1.0)
    tp, fp = np.cumsum(tp), np.cumsum(fp)
    rec = tp / npos
    prec = tp / np.maximum(tp + fp, np.finfo(np.float64).eps)
    if use_07:
        ap = 0.0
        for t in np.arange(0.0, 1.1, 0.1):
            p = np.max(prec[rec >= t]) if np.sum(rec >= t) > 0 else 0.0
            ap += p / 11.0
        return ap
    mrec = [0.0] + list(rec) + [1.0]
    mpre = [0.0] + list(prec) + [0.0]
    for k in range(len(mpre) - 2, -1, -1):
        mpre[k] = max(mpre[k], mpre[k + 1])
    ap = 0.0
    for k in range(1, len(mrec)):
        if mrec[k] != mrec[k - 1]:
            ap += (mrec[k] - mrec[k - 1]) * mpre[k]
    return ap
