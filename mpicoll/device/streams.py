"""The CUDA streams of one communicator on one device.

:attr:`StreamPool.main` serves blocking calls. A nonblocking call borrows
a stream of its own while in flight (:meth:`StreamPool.lend`), up to
:data:`STREAMS` of them. Why: a call's device work is enqueued round by
round, as the host sees the round's messages arrive, and every launch
first makes its stream wait on the caller's stream where the call was
made (:func:`mpicoll.device.rules.caller_ready`). On one shared stream, the
rounds an earlier call enqueues queue behind a later call's wait, so
the earlier call cannot finish before the caller's stream reaches the
later one: a gradient bucketer's buckets, launched one by one during the
backward pass, all finished after it (``bench/overlap.py --device
model``). A call made again on the same buffers asks for the stream it
had, so its compiled plan, bound to that stream, is found again.
"""

from __future__ import annotations

import threading

#: Streams a communicator's nonblocking calls spread over, per device;
#: beyond that many in flight, calls share the stream lent longest ago.
STREAMS = 32


class StreamPool:
    """The streams of one communicator on one device of ``runtime``."""

    def __init__(self, runtime, device: int) -> None:
        self.runtime = runtime
        self.device = device
        self.main = runtime.new_stream(device)
        self._free: list = []  # made, and no call in flight on them
        self._lent: dict[int, list] = {}  # id -> [stream, calls], oldest 1st
        self._lock = threading.Lock()

    def lend(self, prefer=None):
        """A stream for one nonblocking call: ``prefer`` (the stream its
        previous run had) if it is free, else a free one, else a new one
        while fewer than :data:`STREAMS` exist, else the one lent longest
        ago (shared)."""
        with self._lock:
            free = self._free
            if prefer is not None and any(s is prefer for s in free):
                stream = prefer
                free.remove(prefer)
            elif free:
                stream = free.pop()
            elif len(self._lent) < STREAMS:
                stream = self.runtime.new_stream(self.device)
            else:
                stream = next(iter(self._lent.values()))[0]
            self._lent.setdefault(id(stream), [stream, 0])[1] += 1
            return stream

    def give_back(self, stream) -> None:
        """The call that borrowed ``stream`` is complete."""
        with self._lock:
            held = self._lent.get(id(stream))
            if held is None:
                return
            held[1] -= 1
            if not held[1]:
                del self._lent[id(stream)]
                self._free.append(stream)
