"""The flight recorder: the last collective calls on each communicator.

Every communicator mpicoll runs (its private
:class:`~mpicoll.engine.context.Context`) has one :class:`Recorder`: the
calls' sequence number (1, 2, 3, ... in call order, the same numbering on
every rank), the call this rank is blocked in now (the watch thread of
:mod:`mpicoll.guard.deadline` reads it), and a ring of the last ``size``
calls: what each was (a *note*, made once per kind of call and shared by
its replays), when it began and when it ended, and optionally where in the
program it was made.

A call writes a list item and two doubles (the times: arrays of doubles,
never resized) and reads the clock twice, nothing more:
its note is decoded (dtype, count, bytes, op, root) only when the ring is
written out (:meth:`Recorder.calls`, by :mod:`mpicoll.guard.dump`).

Settings, read once per communicator: ``MPICOLL_TRACE_BUFFER`` (calls kept
per communicator, default :data:`DEFAULT_CALLS`; ``0`` keeps none: the
sequence number and the blocked call are still kept where a deadline or
check mode needs them) and ``MPICOLL_TRACE_STACK=1`` (also keep each
call's call site in the program, a few microseconds per call).

Cost (``bench/call_overhead.py``'s guard rows): a replayed blocking call
is wrapped in one :class:`Stamped` that numbers it and stamps it (in C
where it was built: :mod:`mpicoll.guard.twins`); a persistent
``Start``+``Wait`` pays the same in Python.
"""

from __future__ import annotations

import os
import sys
import time
from array import array

from mpicoll.collectives import COLLECTIVES
from mpicoll.errors import InvalidArgumentError
from mpicoll.guard.twins import accelerated

BUFFER_VAR = "MPICOLL_TRACE_BUFFER"
STACK_VAR = "MPICOLL_TRACE_STACK"
DEFAULT_CALLS = 2000
FORMS = ("blocking", "nonblocking", "persistent")

now = time.time  # the recorder's clock: seconds, comparable across hosts
#                  whose clocks are synchronised (what the trace command
#                  compares arrival times with)


def note_of(call, algorithm: str, form: str) -> tuple:
    """What the ring keeps of ``call`` (an engine
    :class:`~mpicoll.engine.engine.Call`), run as ``algorithm`` in
    ``form``: its collective, algorithm, form, dtype, count, op and root
    (references only, decoded by :func:`decode`; no buffer is held)."""
    row = COLLECTIVES[call.collective]
    op = call.op
    return (call.collective, algorithm, form,
            getattr(call.recv, "dtype", None), call.count,
            None if op is None else op.name,
            call.root if row.rooted else None)


def decode(note: tuple) -> dict:
    """A note as the trace file writes it."""
    collective, algorithm, form, dtype, count, op, root = note
    itemsize = getattr(dtype, "itemsize", None)
    elements = _elements(count)
    return {"collective": collective, "algorithm": algorithm, "form": form,
            "dtype": None if dtype is None else str(dtype),
            "count": _plain(count),
            "bytes": None if itemsize is None or elements is None
            else elements * itemsize,
            "op": op, "root": root}


class Recorder:
    """One communicator's call numbers, blocked call and ring of the last
    ``size`` calls (``size`` 0: numbers only). ``stack``: keep each
    call's call site too."""

    __slots__ = (
        "__weakref__",
        "begun",
        "blocked",
        "doing",
        "ended",
        "inflight",
        "notes",
        "seq",
        "size",
        "slots",
        "stack",
        "stacks",
    )

    def __init__(self, size: int = DEFAULT_CALLS, stack: bool = False):
        self.seq = 0  # the last call begun on the communicator
        self.blocked = 0  # the call this rank is blocked in, 0: none
        #: while blocked in a hand-built call: its steps and the index of
        #: the one being run (``steps``, ``at``), else None
        self.inflight = None
        #: a setup step of mpicoll's own this rank is blocked in (node
        #: discovery, an argument agreement), in words; None: none
        self.doing: str | None = None
        self.size = size
        self.slots = n = max(size, 1)  # one, never read, when none is kept
        #: a slot's call ended if its end is not before its beginning (an
        #: end left by the slot's previous call is)
        self.notes: list = [None] * n
        self.begun = array("d", bytes(8 * n))  # doubles, written in place
        self.ended = array("d", bytes(8 * n))
        self.stack = stack
        self.stacks: list = [None] * n if stack else []

    @classmethod
    def from_environment(cls) -> Recorder:
        text = os.environ.get(BUFFER_VAR, "").strip()
        try:
            size = DEFAULT_CALLS if not text else int(text)
        except ValueError:
            size = -1
        if size < 0:
            raise InvalidArgumentError(
                f"{BUFFER_VAR} must be a number of calls (0: off), got "
                f"{text!r}")
        stack = os.environ.get(STACK_VAR, "").strip().lower() not in (
            "", "0", "false", "no", "off")
        return cls(size, stack and size > 0)

    # ------------------------------------------------------------ stamps

    def wrap(self, run, note: tuple):
        """``run`` (a kept blocking call) numbered and stamped each time
        it runs: what a replay calls instead of ``run``, with the same
        arguments."""
        if self.stack:
            def stamped(*args):
                seq = self.begin(note)
                try:
                    return run(*args)
                finally:
                    self.end(seq)
            return stamped
        return FastStamped(run, note, self)

    def begin(self, note: tuple, blocking: bool = True) -> int:
        """A call begins (a blocking one: this rank is blocked in it
        until :meth:`end`; else it is posted, and its waits mark it
        blocked): its number."""
        seq = self.seq = self.seq + 1
        i = seq % self.slots
        self.notes[i] = note
        self.begun[i] = now()
        if blocking:
            self.blocked = seq
        if self.stack:
            self.stacks[i] = call_site()
        return seq

    def end(self, seq: int) -> None:
        """Call ``seq`` is complete (or raised)."""
        self.ended[seq % self.slots] = now()
        if self.blocked == seq:
            self.blocked = 0

    def undo(self, seq: int) -> None:
        """Call ``seq``, just begun, was refused before any message moved
        (the full path makes it again, under the same number)."""
        if self.seq == seq:
            self.seq = seq - 1
            self.blocked = 0

    def undo_last(self) -> None:
        """:meth:`undo` of the call begun last."""
        self.undo(self.seq)

    def step(self, what: str) -> _Step:
        """While the ``with`` block runs (a collective setup step of
        mpicoll's own, ``what``), this rank counts as blocked in the call
        it is in, or else in the call about to be made, so that a deadline
        covers the step and its report says ``what``."""
        return _Step(self, what)

    # ----------------------------------------------------------- reading

    def calls(self) -> list[dict]:
        """The kept calls, oldest first, as the trace file writes them
        (``state``: ``completed``; ``started``, the call this rank is
        blocked in or a blocking call raised out of; ``posted``, a
        nonblocking or persistent call nobody waits on now)."""
        if self.size == 0:
            return []
        rows = []
        for seq in range(max(1, self.seq - self.size + 1), self.seq + 1):
            i = seq % self.size
            note = self.notes[i]
            if note is None:
                continue
            begun, ended = self.begun[i], self.ended[i]
            ended = ended if ended >= begun else 0.0
            row = {"seq": seq, **decode(note), "start": begun,
                   "end": ended or None,
                   "state": "completed" if ended else "started"
                   if seq == self.blocked or note[2] == "blocking"
                   else "posted",
                   "round": None, "peer": None,
                   "stack": self.stacks[i] if self.stack else None}
            if seq == self.blocked:
                row.update(_position(self.inflight))
            rows.append(row)
        return rows

    def note_at(self, seq: int) -> tuple | None:
        """Call ``seq``'s note, if the ring still holds it."""
        if self.size == 0 or not self.seq - self.size < seq <= self.seq:
            return None
        return self.notes[seq % self.size]


class _Step:
    """:meth:`Recorder.step`'s context (a class: a generator-based one
    costs a microsecond more, paid by each count exchange)."""

    __slots__ = ("before", "rec", "what")

    def __init__(self, rec: Recorder, what: str) -> None:
        self.rec, self.what = rec, what

    def __enter__(self) -> None:
        rec = self.rec
        self.before = rec.blocked, rec.doing  # a step inside a call
        rec.blocked, rec.doing = self.before[0] or rec.seq + 1, self.what

    def __exit__(self, *exc) -> None:
        self.rec.blocked, self.rec.doing = self.before


class Stamped:
    """``Stamped(run, note, recorder)(*args)``: ``run(*args)`` numbered
    and stamped in ``recorder`` as :meth:`Recorder.begin` and
    :meth:`Recorder.end` would (without a call site), in a few list stores
    and two clock reads. The Python twin of ``mpicoll.guard._stamp.Stamped``
    (:mod:`mpicoll.guard.twins`); :data:`FastStamped` is the one that
    runs."""

    __slots__ = ("begun", "ended", "note", "notes", "rec", "run", "slots")

    def __init__(self, run, note: tuple, recorder: Recorder) -> None:
        self.run, self.note, self.rec = run, note, recorder
        self.notes, self.begun, self.ended, self.slots = \
            recorder.notes, recorder.begun, recorder.ended, recorder.slots

    def __call__(self, *args):
        rec = self.rec
        seq = rec.seq = rec.blocked = rec.seq + 1
        i = seq % self.slots
        self.notes[i] = self.note
        self.begun[i] = now()
        try:
            return self.run(*args)
        finally:
            self.ended[i] = now()
            rec.blocked = 0


FastStamped = accelerated("mpicoll.guard._stamp", "Stamped", Stamped)


def call_site() -> str:
    """``file:line in function`` of the innermost frame outside mpicoll."""
    frame = sys._getframe(1)
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    while frame is not None and frame.f_code.co_filename.startswith(root):
        frame = frame.f_back
    if frame is None:
        return "?"
    code = frame.f_code
    return f"{code.co_filename}:{frame.f_lineno} in {code.co_name}"


def _position(inflight) -> dict:
    """``round`` (1, 2, ...: the step being run) and ``peer`` (the first
    rank it receives from, else sends to) of a hand-built call in flight;
    nothing for a native one (``inflight`` None)."""
    if inflight is None:
        return {}
    at, steps = inflight.at, inflight.steps
    if not 0 <= at < len(steps):
        return {}
    step = steps[at]
    peers = [p for _, p in (*step.recvs, *step.sends)]
    return {"round": at + 1, "peer": int(peers[0]) if peers else None}


def _elements(count) -> int | None:
    if count is None:
        return 0
    if isinstance(count, int):
        return count
    try:
        return sum(_elements(c) or 0 for c in count)
    except TypeError:
        return None


def _plain(count):
    if count is None or isinstance(count, int):
        return count
    try:
        return [_plain(c) for c in count]
    except TypeError:
        return None
