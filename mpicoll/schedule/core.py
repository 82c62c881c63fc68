"""The schedule: what one rank does in one collective, as data.

A schedule is a tuple of rounds. In a round a rank posts all its sends and
receives at once, waits for every one of them, and then runs the round's local
steps (copies and reductions) in order. Buffers are named, never pointed to:
a :class:`Span` is ``(buffer, start, stop)`` in *elements*, so one schedule
serves every dtype and every call with the same (collective, algorithm,
size, rank, count, root, params).

Buffer names:

``"send"``
    The caller's input (aliases part of ``"recv"`` for in-place calls; see
    :mod:`mpicoll.schedule.layout`).
``"recv"``
    The caller's output.
``"tmp"``
    Scratch owned by the library, ``Schedule.tmp`` elements long.
``"sync"``
    A zero-length buffer for messages that only synchronise (barrier).

Reduction order is fixed once, for all algorithms: ``Reduce(a, b, dst)``
computes ``dst = a (op) b`` where ``a`` holds the contribution of the
*lower* ranks. Following it, a non-commutative op yields exactly the fold
``x0 (op) x1 (op) ... (op) x{n-1}``; the simulator checks that with string
concatenation.

MPI semantics the executor relies on (and the simulator enforces): within a
round no receive span overlaps another receive or a send span, and messages
between one pair of ranks match in posting order (all messages of one
collective share one tag).
"""

from __future__ import annotations

from typing import NamedTuple, Union


class Span(NamedTuple):
    """Elements ``[start, stop)`` of the buffer called ``buf``."""

    buf: str
    start: int
    stop: int

    def __len__(self) -> int:
        return self.stop - self.start

    def sub(self, start: int, stop: int) -> Span:
        """The span of elements ``[start, stop)`` relative to this one."""
        return Span(self.buf, self.start + start, self.start + stop)


SYNC = Span("sync", 0, 0)


class Send(NamedTuple):
    peer: int
    span: Span


class Recv(NamedTuple):
    peer: int
    span: Span


class Copy(NamedTuple):
    """``dst[:] = src``."""

    src: Span
    dst: Span


class Reduce(NamedTuple):
    """``dst[:] = a (op) b``; ``a`` carries the lower ranks' data."""

    a: Span
    b: Span
    dst: Span


LocalStep = Union[Copy, Reduce]


class Round(NamedTuple):
    sends: tuple[Send, ...]
    recvs: tuple[Recv, ...]
    local: tuple[LocalStep, ...]


class Schedule(NamedTuple):
    rounds: tuple[Round, ...]
    tmp: int  # elements of scratch the schedule needs

    @property
    def messages(self) -> int:
        """Messages this rank sends."""
        return sum(len(r.sends) for r in self.rounds)


class ScheduleBuilder:
    """Accumulates rounds; algorithms and their components append to one.

    ``exchange`` opens a round; ``copy``/``reduce`` append local steps to the
    current round (opening a communication-free round if there is none).
    Zero-length data messages are dropped here, on both sides alike, because
    both sides derive the lengths from the same arithmetic; messages on
    :data:`SYNC` are always kept.
    """

    def __init__(self) -> None:
        self._rounds: list[tuple[list[Send], list[Recv], list[LocalStep]]] = []
        self._tmp = 0

    def alloc(self, n: int) -> Span:
        """Reserve ``n`` elements of scratch and return their span."""
        span = Span("tmp", self._tmp, self._tmp + n)
        self._tmp += n
        return span

    def exchange(self, sends=(), recvs=()) -> None:
        """Open a round posting ``sends`` and ``recvs`` ((peer, span) pairs)."""
        s = [Send(p, sp) for p, sp in sends if len(sp) or sp.buf == "sync"]
        r = [Recv(p, sp) for p, sp in recvs if len(sp) or sp.buf == "sync"]
        if s or r:
            self._rounds.append((s, r, []))

    def copy(self, src: Span, dst: Span) -> None:
        if len(src) != len(dst):
            raise ValueError(f"copy of {src} into {dst}: lengths differ")
        if len(src) and src != dst:
            self._local(Copy(src, dst))

    def reduce(self, a: Span, b: Span, dst: Span) -> None:
        if not len(a) == len(b) == len(dst):
            raise ValueError(f"reduce {a} op {b} into {dst}: lengths differ")
        if len(dst):
            self._local(Reduce(a, b, dst))

    def _local(self, step: LocalStep) -> None:
        if not self._rounds:
            self._rounds.append(([], [], []))
        self._rounds[-1][2].append(step)

    def build(self) -> Schedule:
        rounds = tuple(
            Round(tuple(s), tuple(r), tuple(loc)) for s, r, loc in self._rounds
        )
        return Schedule(rounds, self._tmp)
