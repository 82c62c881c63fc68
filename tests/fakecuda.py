"""A host-memory model of CUDA streams and events, for tests without a GPU.

:class:`FakeRuntime` has :class:`mpicoll.device.cuda.CupyRuntime`'s interface.
Its "device arrays" are :class:`DeviceArray`, a NumPy subclass, registered
with :func:`mpicoll.device.cuda.register_runtime`, so mpicoll takes the whole
device path with them: communication streams, events, fences, pinned
mirrors and staging copies. MPI moves them as host memory.

What makes it a test and not a mirror of the code: each stream is a
worker thread that runs its queue *late* (``DELAY`` seconds before every
kernel or copy), as a busy GPU would. If mpicoll posted a message before
the device work producing it had run, or let the caller read a result
before waiting on the collective's end event, the bytes would be stale
and the results wrong. Work the caller does directly on a DeviceArray
(``x[...] = 1``) runs at once, as if the caller's stream were always idle;
kernels launched through ``xp`` go on the current stream.
"""

from __future__ import annotations

import contextlib
import queue
import threading
import time

import numpy as np

DELAY = 0.001  # seconds before each kernel or copy a stream runs

_current = threading.local()


class DeviceArray(np.ndarray):
    """Host memory that mpicoll treats as device memory."""


def device_array(values) -> DeviceArray:
    return np.array(values).view(DeviceArray)


class FakeEvent:
    """Done once the stream reached its latest record (or never recorded,
    as CUDA's are)."""

    def __init__(self) -> None:
        self._recorded = 0
        self._reached = 0
        self._changed = threading.Condition()

    def record(self, stream=None) -> None:
        stream = stream or current_stream()
        with self._changed:
            self._recorded += 1
            generation = self._recorded
        stream.enqueue(lambda: self._reach(generation), delay=False)

    def _reach(self, generation: int) -> None:
        with self._changed:
            self._reached = max(self._reached, generation)
            self._changed.notify_all()

    @property
    def done(self) -> bool:
        with self._changed:
            return self._reached >= self._recorded

    def synchronize(self) -> None:
        with self._changed:
            target = self._recorded
        self.reached(target)

    def reached(self, target: int) -> None:
        """Block until record number ``target`` has been reached."""
        with self._changed:
            self._changed.wait_for(lambda: self._reached >= target)


class FakeStream:
    """An in-order queue run by its own thread, each kernel late."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._queue: queue.SimpleQueue = queue.SimpleQueue()
        self.launched = 0  # kernels and copies enqueued (for tests)
        threading.Thread(target=self._run, daemon=True,
                         name=f"fake-stream-{name}").start()

    def __repr__(self) -> str:
        return f"<FakeStream {self.name}>"

    def enqueue(self, fn, *, delay: bool = True) -> None:
        if delay:
            self.launched += 1
        self._queue.put((fn, delay))

    def _run(self) -> None:
        while True:
            fn, delay = self._queue.get()
            if delay:
                time.sleep(DELAY)
            fn()

    def wait_event(self, event: FakeEvent) -> None:
        # As cudaStreamWaitEvent: the wait is for the event's most recent
        # record *now*, not for a record made after this call.
        with event._changed:
            target = event._recorded
        self.enqueue(lambda: event.reached(target), delay=False)

    def synchronize(self) -> None:
        event = FakeEvent()
        event.record(self)
        event.synchronize()


NULL_STREAM = FakeStream("null")


def current_stream() -> FakeStream:
    return getattr(_current, "stream", None) or NULL_STREAM


def _on_current(ufunc):
    def kernel(*args, out):
        current_stream().enqueue(lambda: ufunc(*_host(args), out=_host(out)))
    kernel.__name__ = ufunc.__name__
    return kernel


def _host(x):
    if isinstance(x, tuple):
        return tuple(_host(v) for v in x)
    return x.view(np.ndarray) if isinstance(x, np.ndarray) else x


class FakeXp:
    """The array module: allocation at once, kernels on the current
    stream."""

    ndarray = DeviceArray

    def __init__(self) -> None:
        for name in ("add", "multiply", "maximum", "minimum", "logical_and",
                     "logical_or", "logical_xor", "bitwise_and", "bitwise_or",
                     "bitwise_xor", "divide"):
            setattr(self, name, _on_current(getattr(np, name)))

    @staticmethod
    def empty(n, dtype=np.float64) -> DeviceArray:
        return np.empty(n, dtype).view(DeviceArray)

    @staticmethod
    def copyto(dst, src) -> None:
        current_stream().enqueue(
            lambda: np.copyto(_host(dst), _host(src)))


class FakeRuntime:
    """:class:`mpicoll.device.cuda.CupyRuntime`'s interface on host memory."""

    name = "fake"

    def __init__(self) -> None:
        self.xp = FakeXp()
        self.streams: list[FakeStream] = []

    def as_array(self, obj) -> DeviceArray:
        return obj.view(DeviceArray)

    def device_of(self, x) -> int:
        return 0

    def empty(self, n: int, dtype, device: int) -> DeviceArray:
        return self.xp.empty(n, dtype)

    def pinned_empty(self, n: int, dtype) -> np.ndarray:
        return np.empty(n, dtype)

    def new_stream(self, device: int) -> FakeStream:
        stream = FakeStream(f"comm{len(self.streams)}")
        self.streams.append(stream)
        return stream

    def current_stream(self, device: int) -> FakeStream:
        return current_stream()

    def new_event(self, device: int) -> FakeEvent:
        return FakeEvent()

    @contextlib.contextmanager
    def use(self, device: int, stream):
        saved = getattr(_current, "stream", None)
        _current.stream = stream
        try:
            yield
        finally:
            _current.stream = saved

    def copy_async(self, dst, src, stream) -> None:
        assert type(dst) is np.ndarray or type(src) is np.ndarray, \
            "a staging copy joins pinned host memory and device memory"
        stream.enqueue(lambda: np.copyto(_host(dst), _host(src)))
