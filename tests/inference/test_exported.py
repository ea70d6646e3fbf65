"""yolo3.inference.exported without a runtime: the exported detector's batches (its own fixed
batch, padding dropped). The runtimes themselves are checked against Keras in test_openvino.py,
export/test_formats.py and features/test_deploy.py."""
from __future__ import annotations

import numpy as np

from yolo3.checkpoint.metadata import ModelInfo
from yolo3.inference.exported import ExportedDetector

INPUT_HW = (64, 96)


class FixedBatchRunner:
    """A float32 model of a fixed batch of 2 whose raw maps are all -8 (no detection): records
    the batches it is given."""

    input_dtype = np.dtype(np.float32)
    input_quantization = None

    def __init__(self):
        self.inputs = []

    def run(self, images):
        assert images.shape == (2, *INPUT_HW, 3), images.shape
        self.inputs.append(images.copy())
        return {f"raw_s{s}": np.full((2, INPUT_HW[0] // s, INPUT_HW[1] // s, 3 * 7), -8.0,
                                      np.float32) for s in (32, 16)}


def test_a_fixed_batch_model_streams_full_padded_batches():
    info = ModelInfo(anchors=np.arange(1, 13, dtype=np.float32).reshape(6, 2) * 8,
                     masks=[[3, 4, 5], [0, 1, 2]], num_classes=2, class_names=["a", "b"],
                     export={"format": "test", "input_size": list(INPUT_HW), "batch": 2})
    runner = FixedBatchRunner()
    detector = ExportedDetector.from_runner(runner, info)
    rng = np.random.default_rng(0)
    images = [rng.integers(0, 256, (h, w, 3), dtype=np.uint8)
              for h, w in [(40, 50), (64, 96), (100, 30), (20, 20), (70, 80)]]
    found = list(detector.detect_stream(iter(images), batch_size=5))  # the model's 2 wins
    assert len(found) == 5 and all(len(scores) == 0 for _, scores, _ in found)
    assert len(runner.inputs) == 3
    np.testing.assert_allclose(runner.inputs[0][1], detector.preprocess(images[1]))
    assert not runner.inputs[2][1].any()  # the last batch padded with zeros
    assert [len(s) for _, s, _ in detector.detect_batch(images)] == [0] * 5
