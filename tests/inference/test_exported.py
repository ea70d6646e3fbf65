"""yolo3.inference.runners without a runtime: reading inputs in batches, streaming runs in order,
and the exported detector's batches (its own fixed batch, padding dropped). The runtimes themselves
are checked against Keras in test_openvino.py, test_export_formats.py and test_deploy.py."""
from __future__ import annotations

import itertools

import numpy as np
import pytest

from yolo3.checkpoint.metadata import ModelInfo
from yolo3.inference.exported import ExportedDetector
from yolo3.inference.runners import batched, stream_outputs

INPUT_HW = (64, 96)


def test_batched_reads_lazily_in_lists():
    assert list(batched(range(7), 3)) == [[0, 1, 2], [3, 4, 5], [6]]
    assert list(batched([], 4)) == []
    assert list(batched("ab", 0)) == [["a"], ["b"]]  # a size under one reads one at a time
    endless = batched(itertools.count(), 2)
    assert next(endless) == [0, 1] and next(endless) == [2, 3]


class Recorder:
    """A runner that answers each batch with its own first value, and records how it was run."""

    def __init__(self, streams: bool):
        self.calls = []
        if streams:
            self.stream = self._stream

    def run(self, batch):
        self.calls.append(("run", float(batch[0])))
        return {"value": np.asarray(batch[0])}

    def _stream(self, batches):
        for batch in batches:
            self.calls.append(("stream", float(batch[0])))
            yield {"value": np.asarray(batch[0])}


@pytest.mark.parametrize("streams", [False, True])
def test_stream_outputs_keeps_the_order_and_runs_a_single_batch_for_latency(streams):
    batches = [np.full(2, i, np.float32) for i in range(4)]
    runner = Recorder(streams)
    assert [float(r["value"]) for r in stream_outputs(runner, iter(batches))] == [0, 1, 2, 3]
    assert runner.calls == [("stream" if streams else "run", float(i)) for i in range(4)]
    single = Recorder(streams)
    assert [float(r["value"]) for r in stream_outputs(single, iter(batches[:1]))] == [0]
    assert single.calls == [("run", 0.0)]  # one batch: the latency-tuned run, never a stream


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


def test_relative_error_is_the_norm_of_the_difference_over_the_norm_of_the_reference():
    from yolo3.inference.runners import relative_error
    ref = np.array([[3.0, 0.0], [0.0, 4.0]], np.float32)  # norm 5
    assert relative_error(ref, ref) == 0.0
    assert relative_error(ref + np.array([[0.0, 0.5], [0.0, 0.0]]), ref) == pytest.approx(0.1)
    assert relative_error(np.ones(3), np.zeros(3)) == pytest.approx(np.sqrt(3) / 1e-12)
