"""The timed contenders of the inference and export benchmarks, each run in a process of its own
(:func:`yolo3.benchmarks.isolated.run_child`).

A user runs one runtime, so a contender's process loads only the runtime it times: this module
imports OpenCV and NumPy, and the TensorFlow-based runtimes are imported inside the functions that
time them (the only function-level imports of yolo3 modules outside the command line), so an
OpenCV DNN run never loads TensorFlow.
"""
from __future__ import annotations

from typing import Callable, Dict, Tuple

import cv2
import numpy as np

from yolo3.benchmarks.isolated import timed_runs
from yolo3.darknet.cfg import parse_cfg
from yolo3.data.images import load_image
from yolo3.inference.video import open_video

__all__ = ["prepared", "OpenCVRunner", "opencv_forward", "yolo3_inference", "raw_map_latency",
           "openvino_forward"]


def prepared(image_path: str, size: int) -> Tuple[np.ndarray, np.ndarray]:
    """The image resized (no letterbox) to ``size``: ``(rgb uint8 (s, s, 3), x float32 (1, s, s, 3))``."""
    resized = cv2.resize(load_image(image_path), (size, size))
    return resized, (resized.astype(np.float32) / 255.0)[None]


def _opencv_net(cfg_path: str, weights_path: str):
    """OpenCV DNN's network of Darknet files, on its own CPU backend."""
    net = cv2.dnn.readNetFromDarknet(cfg_path, weights_path)
    net.setPreferableBackend(cv2.dnn.DNN_BACKEND_OPENCV)
    net.setPreferableTarget(cv2.dnn.DNN_TARGET_CPU)
    return net


class OpenCVRunner:
    """OpenCV DNN on Darknet files, giving the raw maps that feed each ``[yolo]`` layer as
    ``raw_s<stride>`` (NHWC), for :meth:`yolo3.inference.exported.ExportedDetector.from_runner`."""

    input_dtype = np.dtype(np.float32)
    input_quantization = None

    def __init__(self, cfg_path: str, weights_path: str, strides):
        self.net = _opencv_net(cfg_path, weights_path)
        self.names = [f"conv_{i}" for i in parse_cfg(cfg_path).output_indices()]
        self.strides = list(strides)

    def run(self, images: np.ndarray) -> Dict[str, np.ndarray]:
        self.net.setInput(np.ascontiguousarray(np.asarray(images, np.float32).transpose(0, 3, 1, 2)))
        outs = self.net.forward(self.names)
        return {f"raw_s{s}": np.asarray(o).transpose(0, 2, 3, 1) for s, o in zip(self.strides, outs)}


def opencv_forward(p: dict) -> dict:
    """Time OpenCV DNN's forward of a prepared blob (``cfg``, ``weights``, ``image``, ``size``)."""
    net = _opencv_net(p["cfg"], p["weights"])
    names = net.getUnconnectedOutLayersNames()
    resized, _ = prepared(p["image"], p["size"])
    blob = cv2.dnn.blobFromImage(resized, 1 / 255.0, (p["size"], p["size"]), swapRB=False, crop=False)

    def forward():
        net.setInput(blob)
        return net.forward(names)
    return {"times": timed_runs(forward, p["runs"], p["warmup"])}


def openvino_forward(p: dict) -> dict:
    """Time OpenVINO's bare forward of an IR (``ir``) on a prepared input: compiled for the CPU
    with the latency hint and, unless ``hint`` names one (``f32``), OpenVINO's own choice of
    precision - the peer as its users run it."""
    import openvino as ov
    config = {"PERFORMANCE_HINT": "LATENCY"}
    if p.get("hint"):
        config["INFERENCE_PRECISION_HINT"] = p["hint"]
    compiled = ov.Core().compile_model(p["ir"], "CPU", config)
    _, x = prepared(p["image"], p["size"])
    return {"times": timed_runs(lambda: compiled(x), p["runs"], p["warmup"]),
            "precision": str(compiled.get_property("INFERENCE_PRECISION_HINT"))}


def _video_detections(detector, path: str) -> int:
    """Frames of the video file ``path`` read and detected as ``yolo3 detect`` does; their count."""
    video = open_video(path)
    try:
        return sum(1 for _ in detector.detect_stream(video.frames()))
    finally:
        video.release()


def yolo3_inference(p: dict) -> dict:
    """Time our forward (``what='forward'``, at ``precision``), ``detect`` from the JPEG file
    (``'e2e'``), ``detect_batch`` of 8 images (``'batch8'``), ``detect_stream`` of 8 images (what
    ``yolo3 detect`` runs over a folder: ``'stream8'``) or of the frames of the video file
    ``p['video']`` (``'video'``, reading included), on ``engine`` (``keras``, or ``auto``: what
    ``yolo3 detect`` runs with its default flags)."""
    from yolo3.inference.detector import load_detector  # the contender's own runtime (above)
    det = load_detector(p["model"], input_size=p["size"], score=p["score"],
                        precision=p["precision"], engine=p.get("engine", "keras"))
    what = p["what"]
    if what == "forward":
        _, x = prepared(p["image"], p["size"])
        fn = lambda: det.forward(x)  # noqa: E731
    elif what == "e2e":
        fn = lambda: det.detect(load_image(p["image"]))  # noqa: E731
    elif what == "video":
        fn = lambda: _video_detections(det, p["video"])  # noqa: E731
    else:
        batch = [load_image(p["image"])] * 8
        fn = ((lambda: list(det.detect_stream(batch))) if what == "stream8"
              else (lambda: det.detect_batch(batch)))
    return {"times": timed_runs(fn, p["runs"], p["warmup"]), "precision": det.precision,
            "engine": det.engine.engine, "detections": len(det.detect(load_image(p["image"]))[0])}


def _raw_maps(p: dict) -> Callable[[np.ndarray], object]:
    fmt, path = p["format"], p["path"]
    if fmt in ("keras", "keras-bf16"):
        from yolo3.inference.detector import YOLO  # the contender's own runtime (see above)
        detector = YOLO(path, precision="bfloat16" if fmt == "keras-bf16" else "float32")
        return detector.forward
    if fmt == "opencv":
        return OpenCVRunner(p["cfg"], path, p["strides"]).run
    from yolo3.inference.exported import ExportedDetector  # the contender's own runtime (see above)
    return ExportedDetector(path).raw_outputs


def raw_map_latency(p: dict) -> dict:
    """Milliseconds of the raw maps of one prepared image with format ``p['format']`` (keras,
    keras-bf16, an exported format, or opencv with ``cfg`` and ``strides``)."""
    fn = _raw_maps(p)
    x = np.random.default_rng(0).uniform(0, 1, (1, p["size"], p["size"], 3)).astype(np.float32)
    return {"times": timed_runs(lambda: fn(x), p["runs"], p["warmup"])}
