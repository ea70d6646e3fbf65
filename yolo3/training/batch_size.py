"""``--batch-size auto``: the largest batch on a ladder whose training step fits a share of the
device's memory, and the one message of a run that runs out of memory anyway.

How a step's memory is known, per backend:

- **JAX**: XLA's memory analysis of the compiled step (loss, gradients; arguments, outputs and
  temporaries), without running it, plus the optimiser's slots (Adam's two moments, SGD's
  momentum, the EMA's copy); on the CPU too;
- **TensorFlow and PyTorch**: one step is run on zeros and its peak is read: the allocator's
  peak on a GPU, the rise of the resident high-water mark (``VmHWM``, reset first) on the CPU,
  where the steps run in a process of their own (``python -m yolo3.training.batch_size``): a step
  that needs more memory than there is ends that process, never the run, and counts as not
  fitting.

On JAX the step is analysed at batches 1 and 2, then at the rung the straight line through them
predicts, and the ladder is walked from there to the largest rung that fits. A step that is run
walks the ladder up from 1 instead, never running a rung the line predicts not to fit
(:func:`pick_rung`). A step that runs out of memory on an accelerator counts as not fitting. The device's memory: the GPU's (JAX's
``bytes_limit``, PyTorch's total, ``nvidia-smi``'s for TensorFlow), or on the CPU the memory
available now (:func:`yolo3.core.memory.available_memory`), shared by the CPU replicas. Only
:data:`MEMORY_SHARE` of it is given to the step: the rest is for the input pipeline, evaluation
and the allocator's fragmentation.
"""
from __future__ import annotations

import json
import logging
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from typing import Callable, List, Optional, Sequence, Tuple

import keras
import numpy as np

from yolo3.config.train_config import ConfigError, TrainConfig
from yolo3.core.errors import NotEnoughMemory
from yolo3.core.memory import available_memory, gigabytes, proc_field_bytes
from yolo3.modeling.bodies import build_spec_body
from yolo3.modeling.loss import identity_loss
from yolo3.training.data_step import TrainData, prepare_data
from yolo3.training.models import training_model
from yolo3.training.placement import training_precision
from yolo3.training.recipe import dtype_policy, make_optimizer

logger = logging.getLogger(__name__)

__all__ = ["LADDER", "MEMORY_SHARE", "accelerator_memory", "BatchChoice", "choose_batch_size", "pick_rung",
           "device_memory", "is_out_of_memory", "TrainingOutOfMemory", "out_of_memory_message"]

LADDER = tuple(2 ** i for i in range(13))  # 1 .. 4096, the range of batch_size
MEMORY_SHARE = 0.6  # of the device's memory, for the training step


class TrainingOutOfMemory(NotEnoughMemory):
    """Training ran out of memory: the batch that failed, one to try, the checkpoint kept."""


@dataclass(frozen=True)
class BatchChoice:
    """The batch chosen per replica, what its step needs, what was allowed and why."""

    batch: int
    needed: int  # bytes of the chosen batch's step
    allowed: int  # bytes the step may take (MEMORY_SHARE of the device's, per replica)
    device: str  # the device and its memory, in words
    method: str  # how the step's memory was known
    # the next rung and its bytes (measured or predicted; None: it ran out of memory)
    above: Optional[Tuple[int, Optional[int]]] = None
    capped_by: str = ""  # why no larger rung was tried (the training set's size)

    def describe(self) -> str:
        text = (f"batch size auto: {self.batch} per replica: its training step needs "
                f"{gigabytes(self.needed)} of the {gigabytes(self.allowed)} allowed "
                f"({MEMORY_SHARE:.0%} of {self.device}; {self.method})")
        if self.above is not None:
            text += (f"; {self.above[0]} ran out of memory" if self.above[1] is None else
                     f"; {self.above[0]} would need {gigabytes(self.above[1])}")
        if self.capped_by:
            text += f"; {self.capped_by}"
        return text


def pick_rung(measure: Callable[[int], Optional[int]], allowed: int, ladder: Sequence[int],
              ascending: bool = False, safe: Optional[int] = None
              ) -> Tuple[int, int, Optional[Tuple[int, Optional[int]]]]:
    """``(batch, its bytes, (the next rung, its bytes or None) or None)``: the largest rung of ``ladder``
    whose ``measure(rung)`` (bytes; None: it ran out of memory) is at most ``allowed``.

    By default (XLA's analysis: nothing runs) it measures the two smallest rungs, tries the
    rung the line through them predicts, halves the rungs below it when that one does not fit,
    and walks up while the next one does. ``ascending`` (a step that is run) walks up from the smallest rung only, so
    that memory a larger step leaves cached never hides a smaller one's, and never runs a rung
    that the line through the last two (from 0 through the first) predicts above ``safe``
    (default ``allowed``; on the CPU too much memory ends the process): the next rung's bytes
    are then that prediction. NotEnoughMemory when even the smallest rung does not fit."""
    measured: dict = {}

    def need(rung: int) -> Optional[int]:
        if rung not in measured:
            measured[rung] = measure(rung)
        return measured[rung]

    def fits(rung: int) -> bool:
        bytes_ = need(rung)
        return bytes_ is not None and bytes_ <= allowed

    def predicted(rung: int, a: int, b: int) -> int:  # the line through rungs a and b
        slope = (measured[b] - measured[a]) / (b - a) if b != a else measured[a] / a
        return int(measured[b] + (rung - b) * max(slope, 1.0))
    if not fits(ladder[0]):
        raise NotEnoughMemory(_none_fits(ladder[0], measured[ladder[0]], allowed))
    index = 0
    if ascending:
        while index + 1 < len(ladder):
            upper, low = ladder[index + 1], ladder[max(0, index - 1)]
            if predicted(upper, low, ladder[index]) > (safe or allowed) or not fits(upper):
                break
            index += 1
    elif len(ladder) > 1 and fits(ladder[1]):
        low, high = 1, max([1] + [i for i, r in enumerate(ladder)
                                  if predicted(r, ladder[0], ladder[1]) <= allowed])
        if fits(ladder[high]):
            low = high
        while high - low > 1:  # low fits, high does not: halve the rungs between
            middle = (low + high) // 2
            low, high = (middle, high) if fits(ladder[middle]) else (low, middle)
        index = low
        while index + 1 < len(ladder) and fits(ladder[index + 1]):
            index += 1
    above = None
    if index + 1 < len(ladder):
        upper = ladder[index + 1]
        known = sorted(r for r, v in measured.items() if v is not None and r <= ladder[index])
        above = (upper, measured[upper] if upper in measured else
                 predicted(upper, known[max(0, len(known) - 2)], known[-1]))
    return ladder[index], measured[ladder[index]], above


def _none_fits(batch: int, needed: Optional[int], allowed: int) -> str:
    need = "ran out of memory" if needed is None else f"needs {gigabytes(needed)}"
    return (f"batch_size auto: even a batch of {batch} per replica {need}, more than the "
            f"{gigabytes(allowed)} allowed for the training step: choose a smaller input_size "
            "or variant")


def device_memory(replicas: int) -> Tuple[int, str]:
    """``(bytes for one replica's step, the device in words)``: :data:`MEMORY_SHARE` of the
    first accelerator's memory, or of the memory available now on the CPU divided by the CPU
    replicas."""
    backend = keras.backend.backend()
    total, device = accelerator_memory(backend)
    if total is None:
        free = available_memory()
        if free is None:
            raise ConfigError("batch_size auto: this machine does not say how much memory is "
                              "available (no /proc/meminfo): give a number", "batch_size")
        total, device = free // max(1, replicas), f"{gigabytes(free)} available on the CPU"
        if replicas > 1:
            device += f", shared by {replicas} replicas"
    return int(total * MEMORY_SHARE), device


def accelerator_memory(backend: str, setting: str = "batch_size auto"
                       ) -> Tuple[Optional[int], str]:
    """``(bytes, the device in words)`` of the first accelerator's memory; ``(None, "")`` where
    the backend runs on the CPU. ConfigError naming ``setting`` where TensorFlow has a GPU whose
    memory nothing here can read (no nvidia-smi)."""
    if backend == "jax":
        import jax
        device = jax.devices()[0]
        if device.platform != "cpu":
            limit = (device.memory_stats() or {}).get("bytes_limit")
            if limit:
                return int(limit), f"{gigabytes(limit)} on {device.device_kind}"
    elif backend == "torch":
        import torch
        if torch.cuda.is_available():
            total = torch.cuda.get_device_properties(0).total_memory
            return int(total), f"{gigabytes(total)} on {torch.cuda.get_device_name(0)}"
    elif backend == "tensorflow":
        import tensorflow as tf
        if tf.config.list_logical_devices("GPU"):
            total = _nvidia_smi_total()
            if total is None:
                raise ConfigError(f"{setting}: TensorFlow does not say how much memory its GPU "
                                  "has, and nvidia-smi is not there to ask" + (
                                      ": give a number" if setting == "batch_size auto" else ""),
                                  setting.split()[0])
            return total, f"{gigabytes(total)} on GPU 0"
    return None, ""


def _nvidia_smi_total() -> Optional[int]:
    command = shutil.which("nvidia-smi")
    if command is None:
        return None
    try:
        text = subprocess.run([command, "--query-gpu=memory.total", "--format=csv,noheader,"
                               "nounits", "--id=0"], capture_output=True, text=True, timeout=30,
                              check=True).stdout
        return int(float(text.split()[0]) * 2 ** 20)
    except (OSError, subprocess.SubprocessError, ValueError, IndexError):
        return None


def _probe_template(config: TrainConfig, data: TrainData) -> keras.Model:
    """A training model like the run's, all layers trainable, at the largest input size the run
    uses; no weights loaded (the step's memory does not depend on them)."""
    size = data.input_hw
    if config.data.multi_scale:
        size = (max(size[0], config.data.multi_scale[1]), max(size[1], config.data.multi_scale[1]))
    body = build_spec_body(data.spec, data.num_classes, data.head.anchors_per_scale, size,
                           fused_batch_norm=True)
    return training_model(config, data, body)


def _inputs(template: keras.Model, batch: int) -> List[np.ndarray]:
    return [np.zeros((batch, *tuple(i.shape[1:])), keras.backend.standardize_dtype(i.dtype))
            for i in template.inputs]


def _optimizer_slots(config: TrainConfig) -> int:
    """Copies of the trainable weights the optimiser keeps: Adam's two moments or SGD's
    momentum, and the EMA's average."""
    return (2 if config.recipe.optimizer == "adam" else 1) + int(config.recipe.ema)


def _jax_step_bytes(template: keras.Model, config: TrainConfig) -> Callable[[int], int]:
    import jax
    import jax.numpy as jnp

    def loss(trainable, non_trainable, inputs):
        out, updated = template.stateless_call(trainable, non_trainable, inputs, training=True)
        return jnp.mean(out), updated
    step = jax.jit(jax.value_and_grad(loss, has_aux=True))

    def spec(variables):
        return [jax.ShapeDtypeStruct(tuple(v.shape), v.dtype) for v in variables]
    trainable, non_trainable = spec(template.trainable_variables), spec(
        template.non_trainable_variables)
    slots = _optimizer_slots(config) * sum(
        int(np.prod(v.shape)) * np.dtype(v.dtype).itemsize for v in trainable)

    def measure(batch: int) -> int:
        inputs = [jax.ShapeDtypeStruct(a.shape, a.dtype) for a in _inputs(template, batch)]
        analysis = step.lower(trainable, non_trainable, inputs).compile().memory_analysis()
        return int(analysis.argument_size_in_bytes + analysis.output_size_in_bytes
                   + analysis.temp_size_in_bytes - analysis.alias_size_in_bytes) + slots
    return measure


def _resident_now() -> Optional[int]:
    return proc_field_bytes("/proc/self/status", "VmRSS")


def _reset_high_water_mark() -> bool:
    """Reset this process's ``VmHWM`` to its current size (Linux: ``/proc/self/clear_refs``)."""
    try:
        with open("/proc/self/clear_refs", "w", encoding="ascii") as f:
            f.write("5")
        return True
    except OSError:
        return False


def _running_step_bytes(template: keras.Model, config: TrainConfig) -> Callable[[int], Optional[int]]:
    backend = keras.backend.backend()
    template.compile(optimizer=make_optimizer(config.recipe.optimizer, 1e-6, 0.0,
                                              config.recipe.ema, 0.999),
                     loss=identity_loss, jit_compile=False)
    on_gpu = accelerator_memory(backend)[0] is not None

    def step(batch: int) -> None:
        inputs = _inputs(template, batch)
        template.train_on_batch(inputs, np.zeros((batch,), np.float32))

    baseline = _resident_now()  # before any step: what the steps add, compiled code included

    def measure(batch: int) -> Optional[int]:
        if on_gpu:
            reset, peak = _gpu_peak(backend)
            reset()
            try:
                step(batch)
            except Exception as e:
                if is_out_of_memory(e):
                    return None
                raise
            return peak()
        if baseline is None or not _reset_high_water_mark():
            raise ConfigError("batch_size auto: the training step's memory cannot be measured "
                              "here (no /proc/self): give a number", "batch_size")
        try:
            step(batch)
        except MemoryError:
            return None
        return max(0, (proc_field_bytes("/proc/self/status", "VmHWM") or baseline) - baseline)
    return measure


def _gpu_peak(backend: str) -> Tuple[Callable[[], None], Callable[[], int]]:
    if backend == "torch":
        import torch
        return torch.cuda.reset_peak_memory_stats, lambda: int(torch.cuda.max_memory_allocated())
    import tensorflow as tf
    return (lambda: tf.config.experimental.reset_memory_stats("GPU:0"),
            lambda: int(tf.config.experimental.get_memory_info("GPU:0")["peak"]))


def choose_batch_size(config: TrainConfig, data: TrainData, replicas: int,
                      reserved: int = 0) -> BatchChoice:
    """The batch per replica for ``batch_size auto`` (:class:`BatchChoice`); the ladder stops
    at the training images per replica. NotEnoughMemory (exit 2) when no rung fits.
    ``reserved``: bytes the device holds besides the step (``cache device``'s images): the
    step's share is taken of what they leave."""
    allowed, device = device_memory(replicas)
    if reserved:
        allowed = max(0, allowed - int(reserved * MEMORY_SHARE))
        device += f", less {gigabytes(reserved)} of images kept there"
    most = max(1, len(data.records) // max(1, replicas))
    ladder = [r for r in LADDER if r <= most] or [1]
    capped = (f"no rung above {ladder[-1]}: the {len(data.records)} training images make "
              f"{most} per replica" if ladder[-1] < LADDER[-1] else "")
    backend = keras.backend.backend()
    child = None
    if backend == "jax":
        measure = _jax_step_bytes(_probe_template(config, data), config)
        method = "XLA's memory analysis of the step"
    elif accelerator_memory(backend)[0] is not None:
        measure = _running_step_bytes(_probe_template(config, data), config)
        method = "the peak of one step run"
    else:  # on the CPU in a process of its own: too much memory ends that one, not the run
        child = _StepProcess(config)
        measure, method = child.measure, "the peak of one step run in a process of its own"
    try:
        # a step that is run may try a rung predicted within the whole memory, not only the share
        batch, needed, above = pick_rung(measure, allowed, ladder, ascending=backend != "jax",
                                         safe=int(allowed / MEMORY_SHARE * 0.9))
    finally:
        if child is not None:
            child.close()
    return BatchChoice(batch, needed, allowed, device, method, above,
                       capped if batch == ladder[-1] else "")


class _StepProcess:
    """Steps run in a child process (``python -m yolo3.training.batch_size``): each
    :meth:`measure` sends a batch and reads back the step's bytes; a child the system kills for
    its memory (or that runs out) makes that rung, and every later one, not fit."""

    def __init__(self, config: TrainConfig):
        self._errors = tempfile.TemporaryFile("w+")
        env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
        self._process = subprocess.Popen(
            [sys.executable, "-m", "yolo3.training.batch_size"], stdin=subprocess.PIPE,
            stdout=subprocess.PIPE, stderr=self._errors, text=True, env=env)
        self._send(json.dumps(_plain(config.settings())))

    def _send(self, line: str) -> bool:
        try:
            self._process.stdin.write(line + "\n")
            self._process.stdin.flush()
            return True
        except (BrokenPipeError, OSError):
            return False

    def measure(self, batch: int) -> Optional[int]:
        if self._process.poll() is not None or not self._send(str(batch)):
            return self._ended()
        line = self._process.stdout.readline().strip()
        if not line:
            self._process.wait(timeout=60)
            return self._ended()
        return None if line == "out of memory" else int(line)

    def _ended(self) -> None:
        """None for a child ended by its memory (killed, or out of memory); else its error."""
        code = self._process.poll()
        if code in (None, 0, -signal.SIGKILL) or code == 128 + signal.SIGKILL:
            return None
        self._errors.seek(0)
        lines = [x for x in self._errors.read().splitlines() if x.strip()]
        raise ConfigError(f"batch_size auto: measuring the training step failed "
                          f"({lines[-1] if lines else f'exit {code}'}): give a number",
                          "batch_size")

    def close(self) -> None:
        if self._process.poll() is None:
            self._send("")
            try:
                self._process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait()
        for stream in (self._process.stdin, self._process.stdout, self._errors):
            stream.close()


def _plain(settings: dict) -> dict:
    return {k: list(v) if isinstance(v, tuple) else v for k, v in settings.items()}


def _serve_steps() -> int:
    """The child of :class:`_StepProcess`: the run's settings on the first line of stdin, then
    a batch per line (an empty line ends it); answers each with the step's bytes, or
    ``out of memory``."""
    config = TrainConfig.from_settings(json.loads(sys.stdin.readline()))
    with dtype_policy(training_precision(config)):
        data = prepare_data(config)
        measure = _running_step_bytes(_probe_template(config, data), config)
        for line in sys.stdin:
            if not line.strip():
                break
            needed = measure(int(line))
            sys.stdout.write(("out of memory" if needed is None else str(needed)) + "\n")
            sys.stdout.flush()
    return 0


def is_out_of_memory(error: BaseException) -> bool:
    """Whether ``error`` is a backend's out-of-memory: Python's MemoryError, TensorFlow's
    ResourceExhaustedError, PyTorch's OutOfMemoryError, XLA's RESOURCE_EXHAUSTED."""
    if isinstance(error, MemoryError):
        return True
    if type(error).__name__ in ("ResourceExhaustedError", "OutOfMemoryError"):
        return True
    text = str(error)
    return "RESOURCE_EXHAUSTED" in text or "CUDA out of memory" in text


def out_of_memory_message(batch: int, replicas: int, epoch: int, checkpoint: Optional[str],
                          kept_epochs: int) -> str:
    """The one line of a run that ran out of memory (1-based ``epoch``)."""
    smaller = (f"try --batch-size {batch // 2} (or --batch-size auto)" if batch > 1 else
               "a batch of 1 is the smallest: try a smaller --input-size or --variant")
    text = (f"out of memory in epoch {epoch} at batch size {batch} per replica (global "
            f"{batch * replicas}): {smaller}")
    if checkpoint:
        text += (f"; the last checkpoint, after epoch {kept_epochs}, is kept: {checkpoint} "
                 "(--resume continues from it)")
    else:
        text += "; no epoch had finished, so no checkpoint was written"
    return text


if __name__ == "__main__":
    raise SystemExit(_serve_steps())
