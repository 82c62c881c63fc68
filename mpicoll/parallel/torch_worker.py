"""The calls of a torch.distributed group of the ``"mpicoll"`` backend,
run in the background so that they overlap the caller's work (DDP's
bucket allreduces with the rest of the backward pass), as torch's gloo
and MPI backends run theirs.

Each group has a :class:`Worker`: one thread of its own that makes the
group's collectives one after the other, in the order they were called
(so every rank makes them in the same order, as MPI requires). A call
returns at once a :class:`Queued` Work whose future the thread completes
(with the call's output tensors, or the exception it raised) when the
call is done; DDP's callbacks chained on that future run on the thread.

A small call (at most :data:`INLINE_BYTES` of tensors) made while nothing
is queued runs in the caller's thread instead, and its errors are raised
there: a handover to the thread and back would cost a small call more
than it could overlap (two thread switches, tens of microseconds on a
busy core). Below ``MPI_THREAD_MULTIPLE`` every call runs in the
caller's thread.

Cost: the thread, idle in a condition wait between calls (it takes no
core while the group has nothing queued); per queued call one
``torch.futures.Future`` and two lock round trips. While a call runs on
the thread, the MPI library's wait in it polls a core, as the call
would in the caller's thread.
"""

from __future__ import annotations

import collections
import threading

import torch
import torch.distributed as dist
from mpi4py import MPI

#: the largest call (bytes of tensors) run in the caller's thread when
#: nothing is queued
INLINE_BYTES = 64 * 1024


class Queued(dist._Work):
    """The Work of a call handed to a group's thread: complete when its
    future is (``wait`` re-raises what the call raised)."""

    def __init__(self, future: torch.futures.Future) -> None:
        super().__init__()
        self._future = future

    def wait(self, timeout=None) -> bool:
        self._future.wait()
        return True

    def is_completed(self) -> bool:
        return self._future.done()

    def is_success(self) -> bool:
        """Complete, and without raising."""
        if not self._future.done():
            return False
        try:
            self._future.value()
        except Exception:  # the call's error, raised again by wait()
            return False
        return True

    def get_future(self) -> torch.futures.Future:
        return self._future


class Done(dist._Work):
    """The Work of a call that completed before it returned: ``wait``
    returns at once, the future holds ``result`` (the output tensors, as
    torch's backends' futures do)."""

    def __init__(self, result) -> None:
        super().__init__()
        self._future = torch.futures.Future()
        self._future.set_result(result)

    def wait(self, timeout=None) -> bool:
        return True

    def is_completed(self) -> bool:
        return True

    def get_future(self) -> torch.futures.Future:
        return self._future


class Worker:
    """A group's thread and its queue of calls (see the module
    docstring); made idle, the thread starts with the first queued
    call."""

    def __init__(self) -> None:
        self._background = MPI.Query_thread() == MPI.THREAD_MULTIPLE
        self._cv = threading.Condition()
        self._queue: collections.deque = collections.deque()
        self._pending = 0  # queued or running on the thread
        self._thread: threading.Thread | None = None

    def run(self, call, result, tensors) -> dist._Work:
        """``call()`` made in order after the group's earlier calls;
        ``result`` is what its future holds, ``tensors`` what it moves
        (their bytes choose where it runs)."""
        with self._cv:
            if not self._background or (
                    self._pending == 0 and
                    _nbytes(tensors) <= INLINE_BYTES):
                call()  # under the lock: nothing starts on the thread
                return Done(result)
            future = torch.futures.Future()
            self._pending += 1
            self._queue.append((call, result, future))
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._loop, name="mpicoll-torch-group",
                    daemon=True)
                self._thread.start()
            self._cv.notify()
        return Queued(future)

    def stop(self) -> None:
        """Finish the queued calls, then end the thread (the group is
        being destroyed)."""
        with self._cv:
            thread, self._thread = self._thread, None
            if thread is None:
                return
            self._queue.append(None)
            self._cv.notify()
        thread.join()

    def _loop(self) -> None:
        while True:
            with self._cv:
                while not self._queue:
                    self._cv.wait()
                item = self._queue.popleft()
            if item is None:
                return
            call, result, future = item
            try:
                call()
            except BaseException as error:  # raised by the waiter
                complete, outcome = future.set_exception, error
            else:
                complete, outcome = future.set_result, result
            with self._cv:
                self._pending -= 1
            complete(outcome)  # runs the callbacks chained on it


def _nbytes(tensors) -> int:
    """Bytes of ``tensors`` (tensors and lists of them)."""
    total = 0
    for t in tensors:
        if isinstance(t, (list, tuple)):
            total += _nbytes(t)
        elif t is not None:
            total += t.numel() * t.element_size()
    return total
