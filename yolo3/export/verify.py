"""Checking an export: the written model is run once and compared with the Keras model.

Two comparisons on a few letterboxed images (8-bit pixels, which every input type takes exactly):
(1) the exported model's raw maps against the Keras detector's float32 raw maps, relative error
``|exported - keras| / |keras|`` per output, within the quantisation's :data:`TOLERANCES`; (2) for
models with decoding inside, their detections against the host's decoding (the head's
:meth:`~yolo3.heads.base.Head.decode`) of their own raw maps at the baked thresholds: the same
boxes, scores and classes, so the in-model decoding and NMS are right (int8 models decode in
float32 too).
"""
from __future__ import annotations

import os
import shutil
from dataclasses import dataclass, field
from typing import List, Sequence

import numpy as np

from yolo3.core.errors import CommandFailed, PathLike
from yolo3.inference.exported import ExportedDetector
from yolo3.inference.runners import relative_error

# relative error of the raw maps allowed per (format, quantisation)
TOLERANCES = {"none": 1e-4, "float16": 1e-2, "int8": 0.25}

__all__ = ["ExportError", "VerifyReport", "TOLERANCES", "verify_export", "relative_error"]


class ExportError(CommandFailed):
    """An exported model that does not compute what the Keras model computes."""


@dataclass
class VerifyReport:
    images: int
    raw_errors: List[float]
    limit: float
    detections_checked: int = 0
    mismatches: List[str] = field(default_factory=list)

    def summary(self) -> str:
        text = (f"checked on {self.images} images: raw maps within {max(self.raw_errors):.2g} "
                f"relative of the Keras model (limit {self.limit:g})")
        if self.detections_checked:
            differ = sum(int(m.split(" of ")[0].split(": ")[1]) for m in self.mismatches)
            text += (f"; in-model decoding agrees with the host's on "
                     f"{self.detections_checked - differ} of {self.detections_checked} boxes")
        return text


def _matched(model_out, host, i: int) -> tuple:
    """``(model detections, matched)`` for image ``i``: all match when the model returns the
    host's boxes, scores and classes (in any order of equal scores), none otherwise."""
    n, m = int(model_out["count"][i]), int(host[3][i])
    if n != m:
        return n, 0
    boxes, scores, classes = (model_out["boxes"][i, :n], model_out["scores"][i, :n],
                              model_out["classes"][i, :n])
    hb, hs, hc = host[0][i, :m], host[1][i, :m], host[2][i, :m]
    order_a = np.lexsort((boxes[:, 0], classes, -np.round(scores, 4)))
    order_b = np.lexsort((hb[:, 0], hc, -np.round(hs, 4)))
    same = (np.allclose(boxes[order_a], hb[order_b], atol=1e-3 * max(1.0, float(np.abs(hb).max(initial=0))))
            and np.allclose(scores[order_a], hs[order_b], atol=1e-4)
            and np.array_equal(classes[order_a], hc[order_b]))
    return n, n if same else 0


def verify_export(path: PathLike, detector, images: Sequence[np.ndarray], quantize: str = "none",
                  remove_on_failure: bool = True) -> VerifyReport:
    """Run the exported model at ``path`` on ``images`` (letterboxed float32, the detector's input
    size) and compare it with ``detector`` (a float32 :class:`yolo3.inference.detector.YOLO`);
    ExportError (and the file removed) when the comparison is off."""
    import tensorflow as tf

    path = os.fspath(path)
    exported = ExportedDetector(path, precision="float32")  # OpenVINO: as the Keras model computes
    # images as 8-bit pixels, which uint8 and int8 inputs take exactly: both models see the same
    x = (np.round(np.stack([np.asarray(im, np.float32) for im in images]) * 255) / 255).astype(
        np.float32)
    reference = detector.forward(x)
    got = exported.raw_outputs(x)
    errors = [relative_error(g, r) for g, r in zip(got, reference)]
    limit = TOLERANCES[quantize]
    report = VerifyReport(len(x), errors, limit)
    problems: List[str] = []
    if len(got) != len(reference) or not all(np.isfinite(g).all() for g in got):
        problems.append("the raw maps are missing or not finite")
    elif max(errors) > limit:
        problems.append(f"raw maps differ from the Keras model by {max(errors):.3g} relative "
                        f"(limit {limit:g} for quantize={quantize})")
    export = exported.info.export
    if not problems and not export.get("raw"):
        batch = exported.batch or len(x)
        total = matched = 0
        for start in range(0, len(x) - batch + 1, batch):
            chunk = x[start:start + batch]
            out = exported.runner.run(exported._to_input(chunk))
            raw = [r[start:start + batch] for r in got]
            host = [t.numpy() for t in exported.head.decode(
                [tf.constant(r) for r in raw], exported.num_classes,
                tf.constant(detector.input_hw, tf.int32), detector.input_hw,
                max_boxes=int(export["max_boxes"]), score_threshold=float(export["score"]),
                iou_threshold=float(export["iou"]))]
            for i in range(len(chunk)):
                n, ok = _matched(out, host, i)
                total, matched = total + n, matched + ok
                if ok < n:
                    report.mismatches.append(f"image {start + i}: {n - ok} of the model's {n} "
                                             "detections differ from the host's decoding")
        report.detections_checked = total
        problems += report.mismatches[:3]
    if problems:
        if remove_on_failure:
            shutil.rmtree(path) if os.path.isdir(path) else os.remove(path)
        raise ExportError(f"{path}: the exported model does not match the Keras model: "
                          f"{'; '.join(problems)}; nothing was kept")
    return report
