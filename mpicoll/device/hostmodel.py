"""A host model of a CUDA device: streams, events and copies on host memory,
late and timed.

What it is for: running the whole device path (the communicator's stream,
fences, staging through pinned mirrors, the caller's-stream rules of
:mod:`mpicoll.device.rules`) without a GPU: in the test suite, in
``bash bench/gpu_check.sh --dry-run``, and in ``bench/device_model.py``,
which accounts for the microseconds of a staged call.

:class:`ModelRuntime` has :class:`~mpicoll.device.cuda.CupyRuntime`'s
interface. Its device arrays are :class:`DeviceArray`, a NumPy subclass;
:func:`install` registers the runtime for them
(:func:`~mpicoll.device.cuda.register_runtime`), so mpicoll takes its device
path with them and MPI moves them as host memory.

**Late, every time.** Work enqueued on a stream (a kernel launched through
``xp``, a copy) has no effect when it is enqueued. Its effect on memory is
applied, in stream order, when somebody *observes* that it is done: an
event recorded after it is queried and found complete or synchronized, or
its stream synchronized (a wait on another stream's event applies that
stream first, up to the event). So a message posted before its fence was
checked carries stale bytes, and a result read before the caller's stream
waited on the collective's end event is the old one: a missing fence or
wait is a wrong answer on every run, not now and then. Work the caller
does directly on a DeviceArray (``x[...] = 1``) happens at once, as if the
caller's stream were idle.

**Timed, when given latencies** (:class:`Latencies`, all zero unless
:func:`set_latencies` says otherwise). An operation completes
``duration`` after the later of its launch and the completion of the
operation before it on its stream (a copy: ``copy`` plus its bytes over
``bandwidth``; a kernel: ``kernel``); a wait on another stream's event
also waits for that event. An event is complete once the clock has passed
its record's completion time. The host pays ``launch`` seconds for every
enqueue, event record and stream wait, and ``query`` for every event
query, spinning as the CPU time of a CUDA call would; a synchronize spins
(yielding the GIL) until the completion time, after sleeping through all
but the last 100 us of a long one. :data:`LEDGER` counts all of it.
"""

from __future__ import annotations

import collections
import contextlib
import functools
import math
import os
import threading
import time
from typing import NamedTuple

import numpy as np

from mpicoll.device.cuda import register_runtime

clock = time.perf_counter
_lock = threading.RLock()  # every stream's queue and every effect
_current = threading.local()  # the caller's current stream, per thread
_inside = threading.local()  # n: this thread is in a model call (n = 1)


class Latencies(NamedTuple):
    """The model's costs, in seconds (``bandwidth`` in bytes per second)."""

    launch: float = 0.0  # host time of an enqueue, record or stream wait
    copy: float = 0.0  # device time of a copy, before its bytes
    bandwidth: float = math.inf  # of a copy between device and host
    kernel: float = 0.0  # device time of a kernel
    query: float = 0.0  # host time of an event query
    flops: float = math.inf  # of a matrix product, per second

    @classmethod
    def parse(cls, text: str) -> Latencies:
        """``"launch=3,copy=8,kernel=5,query=0.5,bandwidth=25,flops=50"``:
        times in microseconds, bandwidth in GB/s, flops (of matrix
        products) in TFLOP/s; ``"0"`` all zero; ``"assumed"``
        :data:`ASSUMED`, which may be followed by fields that change it
        (``"assumed,flops=0.1"``). A field left out is zero (bandwidth
        and flops: unlimited)."""
        text = text.strip()
        if text in ("", "0"):
            return cls()
        items = text.split(",")
        values = {}
        if items[0].strip() == "assumed":
            values = ASSUMED._asdict()
            items = items[1:]
        for item in items:
            name, _, number = item.partition("=")
            name = name.strip()
            try:
                value = float(number)
            except ValueError:
                value = -1.0
            if name not in cls._fields or not value >= 0:
                raise ValueError(
                    f"device model latencies {text!r}: {item.strip()!r} is "
                    f"not NAME=NUMBER with NAME one of "
                    f"{', '.join(cls._fields)} and NUMBER >= 0")
            values[name] = value * {"bandwidth": 1e9, "flops": 1e12}.get(
                name, 1e-6)
        for rate in ("bandwidth", "flops"):
            if values.get(rate) == 0:
                raise ValueError(f"device model latencies {text!r}: {rate} 0")
        return cls(**values)

    def __str__(self) -> str:
        parts = [f"{name} {getattr(self, name) * 1e6:g} us"
                 for name in ("launch", "copy", "kernel", "query")]
        gbs, tflops = self.bandwidth / 1e9, self.flops / 1e12
        return ", ".join(parts) + (
            f", bandwidth {gbs:g} GB/s" if math.isfinite(gbs) else "") + (
            f", {tflops:g} TFLOP/s" if math.isfinite(tflops) else "")


#: What ``bench/device_model.py`` assumes of a GPU where nothing was
#: measured: a CUDA API call's CPU time of 3 us, a small copy of 8 us
#: (the 5 to 10 us usually quoted), a kernel of 5 us, an event query of
#: 0.5 us, copies at 25 GB/s (PCIe 4.0 x16 in practice), matrix products
#: at 50 TFLOP/s (an H200's FP32 is about 67).
ASSUMED = Latencies(launch=3e-6, copy=8e-6, bandwidth=25e9, kernel=5e-6,
                    query=0.5e-6, flops=50e12)


class Ledger:
    """What the model counted since :meth:`reset`: enqueued copies and
    kernels, host time charged, event queries (and how many found the
    event not yet complete), synchronizes and the time they waited,
    ``inside``: the wall time of every thread in the model's calls (the
    charges and waits, and the model's own Python, which a GPU's runtime
    does not cost), and ``lag``: for each event record seen complete, how
    long after its completion time the host first saw it (the time a
    polling waiter lost)."""

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        self.copies = self.kernels = self.copy_bytes = 0
        self.launches = self.queries = self.early = self.syncs = 0
        self.charged = self.waited = self.lag = self.inside = 0.0
        self.seen = 0  # event records seen complete

    def snapshot(self) -> dict:
        return dict(vars(self))


LEDGER = Ledger()
_latencies = Latencies()


def set_latencies(latencies: Latencies) -> None:
    """Use ``latencies`` for everything enqueued from now on."""
    global _latencies
    _latencies = latencies


def latencies() -> Latencies:
    return _latencies


def _timed(fn):
    """``fn``, its wall time added to ``LEDGER.inside`` (unless called
    from another model call)."""
    @functools.wraps(fn)
    def timed(*args, **kwargs):
        if getattr(_inside, "n", 0):
            return fn(*args, **kwargs)
        _inside.n = 1
        start = clock()
        try:
            return fn(*args, **kwargs)
        finally:
            _inside.n = 0
            LEDGER.inside += clock() - start
    return timed


def _spin(seconds: float) -> None:
    """Spend ``seconds`` of this thread's CPU (a CUDA call's own cost)."""
    if seconds > 0:
        LEDGER.charged += seconds
        end = clock() + seconds
        while clock() < end:
            pass


def _wait_until(t: float) -> None:
    """Block until the clock reaches ``t``, as a spinning CUDA
    synchronize does, letting other threads run meanwhile."""
    start = clock()
    if t - start > 2e-4:
        time.sleep(t - start - 1e-4)
    while clock() < t:
        time.sleep(0)
    LEDGER.syncs += 1
    LEDGER.waited += max(0.0, clock() - start)


class DeviceArray(np.ndarray):
    """Host memory that mpicoll treats as device memory."""


def device_array(values) -> DeviceArray:
    return np.array(values).view(DeviceArray)


class _Mark:
    """A point in a stream: its ``seq``-th operation, complete at
    ``due``."""

    __slots__ = ("due", "seen", "seq", "stream")

    def __init__(self, stream: ModelStream, seq: int, due: float) -> None:
        self.stream, self.seq, self.due, self.seen = stream, seq, due, False

    def observe(self) -> None:
        """It is complete: apply its stream up to it."""
        with _lock:
            self.stream.apply(self.seq)
        if not self.seen:
            self.seen = True
            LEDGER.seen += 1
            LEDGER.lag += max(0.0, clock() - self.due)


class ModelEvent:
    """Complete once its latest record is (or never recorded, as CUDA's
    are)."""

    def __init__(self) -> None:
        self._mark: _Mark | None = None

    @_timed
    def record(self, stream: ModelStream | None = None) -> None:
        self._mark = (stream or current_stream()).mark()

    @property
    @_timed
    def done(self) -> bool:
        _spin(_latencies.query)
        LEDGER.queries += 1
        mark = self._mark
        if mark is None:
            return True
        if clock() < mark.due:
            LEDGER.early += 1
            return False
        mark.observe()
        return True

    @_timed
    def synchronize(self) -> None:
        mark = self._mark
        if mark is not None:
            _wait_until(mark.due)
            mark.observe()


class ModelStream:
    """An in-order queue of operations, each applied once observed."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._queue: collections.deque = collections.deque()  # (seq, fn)
        self._seq = 0  # operations enqueued
        self._tail = 0.0  # when the last of them completes
        self.launched = 0  # kernels and copies enqueued (for tests)

    def __repr__(self) -> str:
        return f"<ModelStream {self.name}>"

    @_timed
    def enqueue(self, effect, duration: float = 0.0, *, work: bool = True,
                after: float = 0.0) -> None:
        """Queue ``effect`` (a kernel or copy if ``work``, else a wait),
        complete ``duration`` after its launch, its predecessor and
        ``after``, whichever is latest."""
        _spin(_latencies.launch)
        LEDGER.launches += 1
        with _lock:
            self._seq += 1
            self._tail = max(clock(), self._tail, after) + duration
            self._queue.append((self._seq, effect))
            self.launched += work

    @_timed
    def mark(self) -> _Mark:
        """Where the stream is now (an event record)."""
        _spin(_latencies.launch)
        LEDGER.launches += 1
        with _lock:
            return _Mark(self, self._seq, max(self._tail, clock()))

    def apply(self, upto: int) -> None:
        """Apply the effects of operations up to number ``upto`` (the
        caller holds the lock)."""
        queue = self._queue
        while queue and queue[0][0] <= upto:
            queue.popleft()[1]()

    @_timed
    def wait_event(self, event: ModelEvent) -> None:
        # As cudaStreamWaitEvent: the wait is for the event's record as of
        # now, not for one made after this call.
        mark = event._mark
        if mark is not None and mark.stream is not self:
            self.enqueue(_applying(mark), work=False, after=mark.due)

    @_timed
    def synchronize(self) -> None:
        mark = self.mark()
        _wait_until(mark.due)
        mark.observe()


def _applying(mark: _Mark):
    """A wait's effect: apply the stream waited on, up to ``mark``."""
    def apply():
        mark.stream.apply(mark.seq)
    return apply


def elapsed_ms(start: ModelEvent, end: ModelEvent) -> float:
    """Milliseconds of model time between two recorded events (as
    ``cupy.cuda.get_elapsed_time``)."""
    return (end._mark.due - start._mark.due) * 1e3


NULL_STREAM = ModelStream("null")


def current_stream() -> ModelStream:
    return getattr(_current, "stream", None) or NULL_STREAM


def _host(x):
    if isinstance(x, tuple):
        return tuple(_host(v) for v in x)
    return x.view(np.ndarray) if isinstance(x, np.ndarray) else x


def _on_current(ufunc):
    @_timed
    def kernel(*args, out):
        LEDGER.kernels += 1
        current_stream().enqueue(
            lambda: ufunc(*_host(args), out=_host(out)), _latencies.kernel)
    kernel.__name__ = ufunc.__name__
    return kernel


class ModelXp:
    """The array module: allocation at once, kernels on the current
    stream."""

    ndarray = DeviceArray

    def __init__(self) -> None:
        for name in ("add", "multiply", "maximum", "minimum", "logical_and",
                     "logical_or", "logical_xor", "bitwise_and", "bitwise_or",
                     "bitwise_xor", "divide"):
            setattr(self, name, _on_current(getattr(np, name)))

    @staticmethod
    def empty(shape, dtype=np.float64) -> DeviceArray:
        return np.empty(shape, dtype).view(DeviceArray)

    @staticmethod
    def asarray(values, dtype=None) -> DeviceArray:
        """A new device array of ``values`` (at once, as from the host)."""
        return np.array(values, dtype).view(DeviceArray)

    @staticmethod
    @_timed
    def matmul(a, b, out) -> None:
        """``out = a @ b`` on the current stream: a kernel of
        ``2 m n k / flops`` seconds (at least ``kernel``)."""
        LEDGER.kernels += 1
        flop = 2 * a.shape[0] * a.shape[1] * b.shape[1]
        current_stream().enqueue(
            lambda: np.matmul(_host(a), _host(b), out=_host(out)),
            max(_latencies.kernel, flop / _latencies.flops))

    @staticmethod
    @_timed
    def copyto(dst, src) -> None:
        LEDGER.kernels += 1
        current_stream().enqueue(
            lambda: np.copyto(_host(dst), _host(src)), _latencies.kernel)


class ModelRuntime:
    """:class:`mpicoll.device.cuda.CupyRuntime`'s interface on host
    memory."""

    name = "model"

    def __init__(self) -> None:
        self.xp = ModelXp()
        self.streams: list[ModelStream] = []

    def as_array(self, obj) -> DeviceArray:
        return obj.view(DeviceArray)

    def device_of(self, x) -> int:
        return 0

    @_timed
    def empty(self, n: int, dtype, device: int) -> DeviceArray:
        return self.xp.empty(n, dtype)

    @_timed
    def pinned_empty(self, n: int, dtype) -> np.ndarray:
        return np.empty(n, dtype)

    @_timed
    def new_stream(self, device: int) -> ModelStream:
        stream = ModelStream(f"comm{len(self.streams)}")
        self.streams.append(stream)
        return stream

    def current_stream(self, device: int) -> ModelStream:
        return current_stream()

    @_timed
    def new_event(self, device: int) -> ModelEvent:
        return ModelEvent()

    @contextlib.contextmanager
    def use(self, device: int, stream):
        saved = getattr(_current, "stream", None)
        _current.stream = stream
        try:
            yield
        finally:
            _current.stream = saved

    @_timed
    def copy_async(self, dst, src, stream) -> None:
        assert type(dst) is np.ndarray or type(src) is np.ndarray, \
            "a staging copy joins pinned host memory and device memory"
        LEDGER.copies += 1
        LEDGER.copy_bytes += src.nbytes
        stream.enqueue(lambda: np.copyto(_host(dst), _host(src)),
                       _latencies.copy + src.nbytes / _latencies.bandwidth)


def install(latencies: Latencies | None = None) -> ModelRuntime:
    """A :class:`ModelRuntime` registered for :class:`DeviceArray` (with
    ``latencies``, if given); :func:`uninstall` removes it."""
    if latencies is not None:
        set_latencies(latencies)
    runtime = ModelRuntime()
    register_runtime(DeviceArray, runtime)
    return runtime


#: The environment variable :func:`from_environment` reads.
LATENCIES_VARIABLE = "MPICOLL_MODEL_LATENCIES"
_installed: ModelRuntime | None = None


def from_environment() -> ModelRuntime:
    """The runtime installed once per process with the latencies
    ``MPICOLL_MODEL_LATENCIES`` names (default ``assumed``); a
    ``ValueError`` saying what is wrong with a bad setting."""
    global _installed
    if _installed is None:
        lat = Latencies.parse(os.environ.get(LATENCIES_VARIABLE, "assumed"))
        _installed = install(lat)
    return _installed


def uninstall() -> None:
    """Forget the model runtime; latencies back to zero."""
    global _installed
    _installed = None
    register_runtime(DeviceArray, None)
    set_latencies(Latencies())
