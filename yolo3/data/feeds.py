"""The NumPy pipeline's feeds: who makes the batches, ahead of the one asked for, for as long as
the dataset lives (across epochs: plans are pure functions of seed, epoch and index).

- :class:`ThreadFeed`: a pool of threads in this process. OpenCV and NumPy's large copies let
  go of the GIL, the planner's Python does not: threads stop scaling where that share adds up.
- :class:`ProcessFeed`: worker processes (spawned: they import no Keras, no TensorFlow) that
  each make whole batches from the same :class:`~yolo3.data.batch_maker.BatchMaker` and write
  them into slots of one shared-memory block; only a few numbers per batch cross a queue, the
  arrays are copied once, out of the slot. A RAM cache of decoded images is shared by them all
  (:meth:`yolo3.data.image_cache.DecodedImages.share`). A worker that dies ends the feed with
  :class:`DataWorkerLost` naming it, within a second; :meth:`ProcessFeed.close` (or the exit of
  this process, or its death: the workers watch their parent) ends every worker and removes the
  block. Workers ignore Ctrl-C: the interrupt reaches this process, which closes the feed.

Both: ``take(key, ahead)`` returns batch ``key = (epoch, k)`` and queues ``ahead``;
``close()`` stops and frees everything (asking again starts a new feed).
"""
from __future__ import annotations

import logging
import multiprocessing
import os
import queue
import signal
import threading
import time
import weakref
from concurrent.futures import Future
from multiprocessing import shared_memory
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np

from yolo3.config.choices import DATA_FEEDS
from yolo3.core.errors import CommandFailed
from yolo3.data.image_cache import remove_block

logger = logging.getLogger(__name__)

__all__ = ["ThreadFeed", "ProcessFeed", "DataWorkerLost", "FEED_KINDS", "flatten", "unflatten"]

FEED_KINDS = DATA_FEEDS[1:]  # threads, processes ("auto" is the run's choice between them)
Key = Tuple[int, int]
POLL_S = 0.25  # how often a waiting feed checks its workers are alive


class DataWorkerLost(CommandFailed):
    """A data worker process ended while the feed needed it (killed, or out of memory): the
    command line says which, and exits with status 1."""


class _BatchThreads:
    """``workers`` threads running what is submitted, in order, each as a
    :class:`~concurrent.futures.Future`. When the main thread has ended (the interpreter is
    exiting: a Ctrl-C in the middle of an epoch) each thread ends after the batch in its hands,
    and what is queued ahead is never made; a :class:`~concurrent.futures.ThreadPoolExecutor`
    makes every queued batch first at the exit (a minute on a busy machine). Not daemon threads:
    those may still be inside OpenCV as the interpreter finalises (an abort)."""

    def __init__(self, workers: int, name: str):
        self._queue: "queue.SimpleQueue" = queue.SimpleQueue()
        self._threads = [threading.Thread(target=self._work, name=f"{name}-{i}")
                         for i in range(workers)]
        for thread in self._threads:
            thread.start()

    def _work(self) -> None:
        main = threading.main_thread()
        while True:
            try:
                item = self._queue.get(timeout=POLL_S)
            except queue.Empty:
                if main.is_alive():
                    continue
                return  # the interpreter is exiting: nobody will take a batch
            if item is None or not main.is_alive():
                return
            future, fn, args = item
            if not future.set_running_or_notify_cancel():
                continue  # cancelled while it waited
            try:
                future.set_result(fn(*args))
            except BaseException as e:  # noqa: BLE001 - handed to whoever takes the batch
                future.set_exception(e)

    def submit(self, fn: Callable, *args) -> Future:
        future: Future = Future()
        self._queue.put((future, fn, args))
        return future

    def shutdown(self) -> None:
        """Cancel what waits and let the threads end (without waiting for them)."""
        while True:
            try:
                item = self._queue.get_nowait()
            except queue.Empty:
                break
            if item is not None:
                item[0].cancel()
        for _ in self._threads:
            self._queue.put(None)


class ThreadFeed:
    """``workers`` threads making ``make(epoch, k)`` ahead: :meth:`take` returns batch ``key``
    (made now if nobody asked for it before) and queues ``ahead`` (keys, in order) that are not
    queued yet; at most ``2 * depth`` batches wait, the oldest dropped first."""

    def __init__(self, make: Callable[[int, int], Any], workers: int, depth: int):
        self.make = make
        self.workers = max(1, int(workers))
        self.depth = max(1, int(depth))
        self._pool: Optional[_BatchThreads] = None
        self._pending: Dict[Key, Future] = {}
        self._lock = threading.Lock()

    def _executor(self) -> _BatchThreads:
        if self._pool is None:
            self._pool = _BatchThreads(self.workers, "yolo3-feed")
            weakref.finalize(self, self._pool.shutdown)
        return self._pool

    def take(self, key: Key, ahead: Sequence[Key]):
        with self._lock:
            pool = self._executor()
            future = self._pending.pop(key, None)
            if future is None:
                future = pool.submit(self.make, *key)
            for other in ahead:
                if other not in self._pending:
                    self._pending[other] = pool.submit(self.make, *other)
            while len(self._pending) > 2 * self.depth:  # asked out of order: drop the oldest
                self._pending.pop(next(iter(self._pending))).cancel()
        return future.result()

    def close(self) -> None:
        """Cancel what is queued and let the threads end."""
        with self._lock:
            for future in self._pending.values():
                future.cancel()
            self._pending.clear()
            pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown()


def flatten(batch) -> Tuple[List[np.ndarray], Any]:
    """A batch (arrays in nested tuples) -> its arrays and its structure (the same nesting of
    array indices)."""
    arrays: List[np.ndarray] = []

    def walk(x):
        if isinstance(x, (tuple, list)):
            return tuple(walk(v) for v in x)
        arrays.append(np.asarray(x))
        return len(arrays) - 1
    return arrays, walk(batch)


def unflatten(arrays: Sequence[np.ndarray], structure) -> Any:
    if isinstance(structure, tuple):
        return tuple(unflatten(arrays, s) for s in structure)
    return arrays[structure]


ALIGN = 64


def _write_slot(buffer: memoryview, arrays: Sequence[np.ndarray]) -> Optional[list]:
    """Copy ``arrays`` into ``buffer`` one after the other (64-byte aligned): their
    ``(offset, shape, dtype)``, or None when they do not fit."""
    layout, offset = [], 0
    for a in arrays:
        offset = -(-offset // ALIGN) * ALIGN
        if offset + a.nbytes > len(buffer):
            return None
        target = np.ndarray(a.shape, a.dtype, buffer, offset)
        target[...] = a
        layout.append((offset, a.shape, a.dtype.str))
        offset += a.nbytes
    return layout


def _read_slot(buffer: memoryview, layout: list) -> List[np.ndarray]:
    """The arrays of a slot, copied out (the slot is free once this returns)."""
    return [np.array(np.ndarray(shape, np.dtype(dtype), buffer, offset))
            for offset, shape, dtype in layout]


PARENT_CHECK_S = 0.5  # how often a worker checks that the process that started it lives


def _die_with_parent() -> None:
    """Linux: this process gets SIGTERM when its parent dies (no orphan keeps running)."""
    try:
        import ctypes
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass  # elsewhere the worker's own check of its parent ends it


def _watch_parent(parent: int, every_s: float = PARENT_CHECK_S) -> threading.Thread:
    """End this process (``os._exit(1)``, no clean-up that could wait on a lock its dead
    siblings held) as soon as ``parent`` is no longer its parent, whatever the main thread is
    blocked in. This covers a parent that died before :func:`_die_with_parent` was called (a
    worker still starting) and systems without PR_SET_PDEATHSIG."""
    def watch() -> None:
        while True:
            if os.getppid() != parent:
                os._exit(1)
            time.sleep(every_s)
    thread = threading.Thread(target=watch, name="yolo3-parent-watch", daemon=True)
    thread.start()
    return thread


def _worker(maker, block_name: str, slot_bytes: int, tasks, done, parent: int) -> None:
    """A data worker: ``(slot, epoch, k)`` from ``tasks`` -> the batch in ``slot`` of the
    shared block, ``(slot, key, layout, structure)`` (or the error) on ``done``; None stops."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent handles Ctrl-C and closes us
    _die_with_parent()
    _watch_parent(parent)  # checks at once: the parent may have died while we started
    block = shared_memory.SharedMemory(name=block_name)
    try:
        while True:
            task = tasks.get()
            if task is None:
                return
            slot, key = task
            try:
                arrays, structure = flatten(maker.batch(*key))
                view = block.buf[slot * slot_bytes:(slot + 1) * slot_bytes]
                layout = _write_slot(view, arrays)
                del view
                # a batch larger than the slot (a larger multi-scale size): sent whole instead
                done.put((slot, key, layout, structure, None if layout is not None else arrays))
            except Exception as e:  # noqa: BLE001 - handed to the parent, which raises it
                done.put((slot, key, None, None, _picklable(e)))
    finally:
        block.close()


class _Failure:
    def __init__(self, error: BaseException):
        self.error = error


def _picklable(e: BaseException) -> "_Failure":
    import pickle
    try:
        pickle.loads(pickle.dumps(e))
        return _Failure(e)
    except Exception:  # noqa: BLE001 - an exception that cannot travel: its message does
        return _Failure(RuntimeError(f"{type(e).__name__}: {e}"))


class ProcessFeed:
    """``workers`` processes making ``maker.batch(epoch, k)`` ahead into a shared-memory ring
    (module docstring). ``slot_bytes``: the room per batch (default: the first batch's bytes,
    scaled to the largest input size, plus a margin)."""

    def __init__(self, maker, workers: int, depth: int, slot_bytes: Optional[int] = None):
        self.maker = maker
        self.workers = max(1, int(workers))
        self.depth = max(1, int(depth))
        self.slot_bytes = slot_bytes
        self.slots = self.depth + self.workers
        self._lock = threading.RLock()  # a lost worker closes the feed from inside take
        self._state: Optional[dict] = None
        self._first: Optional[Tuple[Key, Any]] = None

    # -- starting and stopping
    def _start(self) -> dict:
        if self.slot_bytes is None:
            first = self.maker.batch(0, 0)
            self._first = ((0, 0), first)
            arrays, _ = flatten(first)
            scale = _largest_area_ratio(self.maker)
            self.slot_bytes = int(sum(a.nbytes for a in arrays) * scale * 1.1) + (1 << 16)
        share = getattr(self.maker.images, "share", None)
        if share is not None and self.maker.images.kind == "ram":
            share()  # one RAM cache for every worker
        context = multiprocessing.get_context("spawn")
        block = shared_memory.SharedMemory(create=True, size=self.slots * self.slot_bytes)
        tasks, done = context.Queue(), context.Queue()
        processes = [context.Process(target=_worker, name=f"yolo3-data-{i}", daemon=True,
                                     args=(self.maker, block.name, self.slot_bytes, tasks, done,
                                           os.getpid()))
                     for i in range(self.workers)]
        for p in processes:
            p.start()
        state = dict(block=block, tasks=tasks, done=done, processes=processes,
                     free=list(range(self.slots)), asked={}, ready={})
        state["finalizer"] = weakref.finalize(self, _stop, block, tasks, done, processes)
        logger.info("data feed: %d worker processes, %d slots of %.1f MB in %s", self.workers,
                    self.slots, self.slot_bytes / 1e6, block.name)
        return state

    def close(self) -> None:
        """End every worker and remove the shared block (a later :meth:`take` starts anew)."""
        with self._lock:
            state, self._state = self._state, None
        if state is not None:
            state["finalizer"]()

    @property
    def block_name(self) -> Optional[str]:
        return None if self._state is None else self._state["block"].name

    @property
    def pids(self) -> List[int]:
        return [] if self._state is None else [p.pid for p in self._state["processes"]]

    # -- the work
    def _ask(self, state: dict, key: Key) -> bool:
        if key in state["asked"] or key in state["ready"] or not state["free"]:
            return key in state["asked"] or key in state["ready"]
        slot = state["free"].pop()
        state["asked"][key] = slot
        state["tasks"].put((slot, key))
        return True

    def _receive(self, state: dict) -> None:
        try:
            slot, key, layout, structure, payload = state["done"].get(timeout=POLL_S)
        except queue.Empty:
            self._check_workers(state)
            return
        state["asked"].pop(key, None)
        if isinstance(payload, _Failure):
            state["free"].append(slot)
            state["ready"][key] = payload
            return
        if layout is None:
            arrays = payload
        else:
            buffer = state["block"].buf[slot * self.slot_bytes:(slot + 1) * self.slot_bytes]
            arrays = _read_slot(buffer, layout)
            del buffer
        state["free"].append(slot)
        state["ready"][key] = unflatten(arrays, structure)

    def _check_workers(self, state: dict) -> None:
        for i, p in enumerate(state["processes"]):
            if p.exitcode is not None:
                code = p.exitcode
                how = (f"killed by signal {signal.Signals(-code).name}" if code < 0
                       else f"exit status {code}")
                self.close()
                raise DataWorkerLost(
                    f"data worker {i + 1} of {len(state['processes'])} (pid {p.pid}) ended "
                    f"({how}{', perhaps out of memory' if code == -signal.SIGKILL else ''}); "
                    "the feed stopped and its workers and shared memory are gone. Run again "
                    "(--resume goes on from the last epoch), with fewer --data-workers or "
                    "--data-feed threads")

    def take(self, key: Key, ahead: Sequence[Key]):
        with self._lock:
            if self._state is None:
                self._state = self._start()
            state = self._state
            self._check_workers(state)
            if self._first is not None:
                first_key, first = self._first
                self._first = None
                state["ready"].setdefault(first_key, first)
            while not self._ask(state, key):  # no free slot: drop a batch made out of order
                if state["ready"]:
                    state["ready"].pop(next(iter(state["ready"])))
                else:
                    self._receive(state)
            for other in ahead:
                self._ask(state, other)
            while key not in state["ready"]:
                self._receive(state)
            batch = state["ready"].pop(key)
        if isinstance(batch, _Failure):
            raise batch.error
        return batch


def _stop(block, tasks, done, processes) -> None:
    """End the workers (asked, then terminated, then killed) and remove the block."""
    for _ in processes:
        try:
            tasks.put_nowait(None)
        except (ValueError, OSError, queue.Full):
            break
    for p in processes:
        p.join(timeout=2.0)
    for p in processes:
        if p.is_alive():
            p.terminate()
            p.join(timeout=2.0)
        if p.is_alive():
            p.kill()
            p.join(timeout=2.0)
    for q in (tasks, done):
        q.cancel_join_thread()
        q.close()
    remove_block(block)


def _largest_area_ratio(maker) -> float:
    """The largest input area a batch of ``maker`` can have over the first batch's (multi-scale
    sizes), at least 1."""
    planner = maker.planner
    first = planner.input_hw_at(0, 0)
    sizes = [first] + ([tuple(s) for s in planner.multi_scale.sizes]
                       if planner.multi_scale is not None else [])
    return max(1.0, max(h * w for h, w in sizes) / float(first[0] * first[1]))
