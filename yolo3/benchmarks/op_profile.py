"""Where a training step's time goes: TensorFlow's profiler trace summed per op type.

:func:`profile_steps` runs steps of a compiled Keras model under ``tf.profiler`` and returns the
milliseconds each op type spent per step, summed over TensorFlow's compute threads (so the total
can exceed the wall time when ops run in parallel). :func:`op_times` reads them from the trace's
XSpace: the events named ``"<node>:<OpType>"`` on the ``tf_Compute`` threads of the host plane.
:func:`group` folds op types into what matters for a precision comparison: convolutions forward,
their two gradients, casts, and everything else (batch norm, activations, loss, optimiser).
The XSpace protocol buffer ships inside TensorFlow (``tensorflow.tsl.profiler.protobuf``).
"""
from __future__ import annotations

import glob
import os
import tempfile
from collections import Counter
from typing import Callable, Dict

GROUPS = ("convolution forward", "convolution input gradient", "convolution filter gradient",
          "casts", "other ops")


def op_times(xspace: bytes, steps: int) -> Dict[str, float]:
    """``{op type: ms per step}`` from a serialised XSpace of ``steps`` steps."""
    from tensorflow.tsl.profiler.protobuf import xplane_pb2

    space = xplane_pb2.XSpace()
    space.ParseFromString(xspace)
    times: Counter = Counter()
    for plane in space.planes:
        if plane.name != "/host:CPU":
            continue
        for line in plane.lines:
            if not line.name.startswith("tf_Compute"):
                continue
            for event in line.events:
                name = plane.event_metadata[event.metadata_id].name
                if name.count(":") == 1:  # "<node>:<OpType>"; "ExecutorState::Process" is none
                    times[name.split(":")[1]] += event.duration_ps / 1e9 / steps
    return dict(times)


def group(times: Dict[str, float]) -> Dict[str, float]:
    """Op types folded into :data:`GROUPS` (ms per step)."""
    out = dict.fromkeys(GROUPS, 0.0)
    for op, ms in times.items():
        if "Conv2DBackpropFilter" in op:
            out["convolution filter gradient"] += ms
        elif "Conv2DBackpropInput" in op:
            out["convolution input gradient"] += ms
        elif "Conv2D" in op:
            out["convolution forward"] += ms
        elif op == "Cast":
            out["casts"] += ms
        else:
            out["other ops"] += ms
    return out


def profile_steps(step: Callable[[], object], steps: int) -> Dict[str, float]:
    """Run ``step()`` ``steps`` times under the profiler; ``{op type: ms per step}``."""
    import tensorflow as tf

    with tempfile.TemporaryDirectory(prefix="yolo3-profile-") as logdir:
        tf.profiler.experimental.start(logdir)
        try:
            for _ in range(steps):
                step()
        finally:
            tf.profiler.experimental.stop()
        traces = sorted(glob.glob(os.path.join(logdir, "plugins", "profile", "*", "*.xplane.pb")))
        if not traces:
            raise RuntimeError(f"the profiler wrote no trace under {logdir}")
        with open(traces[-1], "rb") as f:
            return op_times(f.read(), steps)
