"""Check mode: every rank agrees on each collective call before it runs.

With ``MPICOLL_CHECK=1`` or ``mpicoll.Comm(comm, check=True)`` every
collective call on the communicator (both faces, every form) first
exchanges a *fingerprint* on the private communicator: the call's
sequence number, the collective, the algorithm as resolved, the dtype,
the count the schedule is built from, the op and root where the
collective has them, in place or not (where MPI requires every rank to
choose the same: ``inplace_everywhere`` in :mod:`mpicoll.collectives`),
host or device memory, and whether this rank's local
checks of its arguments passed. What must agree is hashed into one int, so
the common case costs one ``Iallgather`` of 3 int64 per rank; only when the
rows differ do the ranks exchange their fingerprints in full (JSON,
:mod:`mpicoll.guard.exchange`) to say which field differs and which ranks said
what. Every rank reaches the same verdict from the same rows, so every
rank raises (:class:`~mpicoll.errors.CollectiveCheckError`, the same text
everywhere) or none does. A rank whose own checks failed re-raises its own
exception (mpi4py's type, for ``except`` clauses), with the verdict as a
note; the others raise the CollectiveCheckError naming it.

Where the exchange happens (:class:`mpicoll.engine.engine.Engine`): before the
first message of the call, i.e. before the v-collectives' count
agreement and again before the collective itself, and in place of either
when a rank's local checks fail first. So a rank that fails locally meets
its peers at the exchange they are waiting in, and nobody is left inside a
collective. A repeated blocking call is still replayed (its fingerprint
and digest kept with it: each replay costs the one exchange); nonblocking
calls, and calls alike to a kept one (:mod:`mpicoll.engine.likeness`),
are parsed and checked in full. It needs every rank of the communicator
in check mode.

What it cannot see: two ranks passing different *values* of the same
shape (that is the program's business), a rank that never calls at all
(the others wait in the exchange: set a deadline, :mod:`mpicoll.guard.watchdog`),
and point-to-point calls.
"""

from __future__ import annotations

import zlib

import numpy as np

from mpicoll.guard import exchange
from mpicoll.collectives import COLLECTIVES
from mpicoll.device.cuda import location
from mpicoll.errors import CollectiveCheckError, spans

# The order fields are reported in.
FIELDS = ("stage", "collective", "algorithm", "dtype", "count", "op", "root",
          "inplace", "memory")


class Active:
    """The collective call a face is making: its sequence number on the
    communicator, its name, and whether its peers may be waiting at a
    check exchange for this rank (``open``: no exchange since the call
    began, or since its last message)."""

    __slots__ = ("collective", "open", "seq")

    def __init__(self, seq: int, collective: str) -> None:
        self.seq = seq
        self.collective = collective
        self.open = True


def fingerprint(call, algorithm: str) -> dict:
    """What every rank's ``call`` (an :class:`mpicoll.engine.engine.Call`) must
    agree on, as plain data."""
    row = COLLECTIVES[call.collective]
    send, recv = call.send, call.recv
    fields = {"stage": "collective", "collective": call.collective,
              "algorithm": algorithm, "dtype": send.dtype.str,
              "count": call.count,
              "memory": "host" if location(recv) is None else "device"}
    if row.reducing:
        fields["op"] = None if call.op is None else call.op.name
    if row.rooted:
        fields["root"] = call.root
    if row.inplace_everywhere:
        fields["inplace"] = call.inplace or send is recv
    return fields


def digest(fields: dict) -> int:
    """A 32-bit hash of ``fields`` (the same on every rank for equal
    fields)."""
    return zlib.crc32(exchange.encode(fields))


class Checker:
    """Check mode's exchange on ``comm`` (the private communicator),
    keeping its rows between calls. ``complete(request)``, given, waits
    for the exchange made nonblocking (a polled deadline bounds it); else
    the exchange is a blocking ``Allgather``, during which ``recorder``
    (given: the watch thread keeps a deadline) marks this rank blocked in
    the call. ``where(collective)`` gives the rank and call that errors
    name."""

    def __init__(self, comm, complete, where, recorder=None) -> None:
        self.comm = comm
        self.complete = complete
        self.where = where
        self.recorder = recorder
        self._size = comm.Get_size()
        self._row = np.zeros(3, np.int64)  # (seq, digest, failed here)
        self._cells = memoryview(self._row)  # its items, set cheaply
        self._rows = np.empty((self._size, 3), np.int64)

    def verify(self, active: Active, fields: dict,
               error: BaseException | None, code: int | None = None) -> None:
        """The check exchange of ``active`` (collective: every rank calls
        it at the same point); ``code`` is ``digest(fields)`` where the
        caller has it (a replayed call keeps it). Returns if every rank
        sent the same fields and none failed; otherwise raises
        :class:`CollectiveCheckError` on every rank whose own ``error`` is
        None and returns on the others (which re-raise their own error),
        after adding the verdict to that error as a note. Cost when all
        agree: one ``Allgather`` of 24 bytes a rank (an ``Iallgather``
        and its wait under a deadline)."""
        active.open = False
        row, rows, cells = self._row, self._rows, self._cells
        cells[0] = active.seq
        cells[1] = digest(fields) if code is None else code
        cells[2] = error is not None
        rec = self.recorder
        if rec is not None:
            rec.blocked = active.seq
            try:
                self.comm.Allgather(row, rows)
            finally:
                rec.blocked = 0
        elif self.complete is None:
            self.comm.Allgather(row, rows)
        else:
            self.complete(self.comm.Iallgather(row, rows))
        if error is None and rows.tobytes() == row.tobytes() * self._size:
            return  # every row is this one's: the same call, no rank failed
        described = None if error is None else \
            f"{type(error).__name__}: {error}"
        details = exchange.allgather(self.comm,
                                     (active.seq, fields, described))
        verdict = describe(details)
        if error is None:
            raise CollectiveCheckError(verdict, seq=active.seq,
                                       **self.where(fields["collective"]))
        if hasattr(error, "add_note"):  # Python 3.11+
            error.add_note(f"mpicoll check: {verdict}")


def describe(details) -> str:
    """The verdict on every rank's ``(seq, fields, error)``: the local
    errors, else the sequence numbers, else each field that differs with
    which ranks said what."""
    seqs = [seq for seq, _, _ in details]
    if len(set(seqs)) > 1:
        return "the ranks are at different calls: " + said(
            [f"#{s}" for s in seqs], str)
    seq = seqs[0]
    failed = [(q, err) for q, (_, _, err) in enumerate(details) if err]
    if failed:
        return f"call #{seq}: " + "; ".join(
            f"rank {q} failed its local checks of the call: {err}"
            for q, err in failed)
    rows = [fields for _, fields, _ in details]
    keys = [k for k in FIELDS if any(k in r for r in rows)]
    keys += sorted({k for r in rows for k in r} - set(keys))
    if len({r.get("collective") for r in rows}) > 1:
        keys = ["stage", "collective"]  # the rest cannot be compared
    differ = []
    for key in keys:
        values = [r.get(key) for r in rows]
        if len({exchange.encode(v) for v in values}) > 1:
            differ.append(f"{key} differs: {said(values, _shown)}")
    return f"call #{seq}: " + "; ".join(differ)


def said(values: list, shown) -> str:
    """``'a' on ranks 0-2, 4; 'b' on rank 3``: who said what (each value
    written by ``shown``), the least said first."""
    who: dict[bytes, tuple[str, list[int]]] = {}
    for q, value in enumerate(values):
        who.setdefault(exchange.encode(value), (shown(value), []))[1].append(q)
    ordered = sorted(who.values(), key=lambda item: (len(item[1]), item[1]))
    return "; ".join(f"{text} on {'ranks' if len(qs) > 1 else 'rank'} "
                     f"{spans(qs)}" for text, qs in ordered)


def _shown(value) -> str:
    if value is None:
        return "(none)"
    if isinstance(value, tuple) and len(value) > 8:
        return f"{value[:8]}... ({len(value)} entries)"
    return repr(value)
