"""yolo3.inference.runners without a runtime: reading inputs in batches, streaming runs in order
(several in flight where the runner streams, one latency-tuned run for a single batch), how far
one runtime's raw maps are from another's, and which runner a file gets. The runtimes themselves
are checked against Keras in test_openvino.py, export/test_formats.py and
features/test_deploy.py."""
from __future__ import annotations

import itertools

import numpy as np
import pytest

from yolo3.inference.runners import (
    OnnxRunner,
    SavedModelRunner,
    TFLiteRunner,
    batched,
    is_exported,
    open_runner,
    relative_error,
    stream_outputs,
)


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


def test_relative_error_is_the_norm_of_the_difference_over_the_norm_of_the_reference():
    ref = np.array([[3.0, 0.0], [0.0, 4.0]], np.float32)  # norm 5
    assert relative_error(ref, ref) == 0.0
    assert relative_error(ref + np.array([[0.0, 0.5], [0.0, 0.0]]), ref) == pytest.approx(0.1)
    assert relative_error(np.ones(3), np.zeros(3)) == pytest.approx(np.sqrt(3) / 1e-12)


def test_a_file_gets_the_runner_of_its_kind(tmp_path):
    assert is_exported("m.tflite") and is_exported("m.onnx") and is_exported("ir/model.xml")
    assert not is_exported("m.keras") and not is_exported("m.weights.h5")
    (tmp_path / "saved").mkdir()
    (tmp_path / "saved" / "saved_model.pb").write_bytes(b"")
    assert is_exported(tmp_path / "saved")
    from yolo3.core.errors import FileFormatError
    for name, kind in (("m.tflite", TFLiteRunner), ("m.onnx", OnnxRunner)):
        (tmp_path / name).write_bytes(b"not a model")
        with pytest.raises(FileFormatError) as caught:  # the runner of its kind read it
            open_runner(str(tmp_path / name))
        assert str(tmp_path / name) in str(caught.value) and kind.ENGINE in ("litert",
                                                                            "onnxruntime")
    assert SavedModelRunner.ENGINE == "tensorflow"
