"""Export a detector for deployment: SavedModel, TFLite (float32, float16, full-integer int8), ONNX
and OpenVINO IR (float32, float16, int8), each carrying the detector's facts and checked against
the Keras model after writing.

- :mod:`~yolo3.export.graph`: the function every exported model is (raw maps, and decoding with
  per-class NMS inside unless ``raw``);
- :mod:`~yolo3.export.formats`: writing each format;
- :mod:`~yolo3.export.calibration`: representative images for int8;
- :mod:`~yolo3.export.verify`: the check after writing.

Running exported models (``yolo3 detect`` / ``evaluate --model x.tflite``) is
:mod:`yolo3.inference.runners`.
"""
from yolo3.export.formats import (
                                  ONNX_OPSET,
                                  QUANTIZATIONS,
                                  export_onnx,
                                  export_openvino,
                                  export_saved_model,
                                  export_tflite,
)
from yolo3.export.graph import DETECTION_KEYS
from yolo3.export.verify import ExportError, verify_export

__all__ = ["export_saved_model", "export_tflite", "export_onnx", "export_openvino", "verify_export",
           "ExportError", "QUANTIZATIONS", "ONNX_OPSET", "DETECTION_KEYS"]
