"""Polled deadlines, and the where-are-you exchange every deadline uses.

The default deadline is kept by a watch thread
(:mod:`mpicoll.guard.deadline`). With ``on_timeout="raise"``
(``MPICOLL_ON_TIMEOUT=raise``), or a deadline below
``MPI_THREAD_MULTIPLE``, it is polled instead (:class:`Watchdog`):
blocking calls are made in their nonblocking form and tested (a native
call as the MPI library's ``I`` call, a hand-built one as its schedule's
execution), and ``Work.wait()`` with no timeout of its own waits at most
that long, answering the peers' queries meanwhile.

The exchange (:class:`Asking`): past the deadline a rank asks every peer
where it is (8 bytes each on the private communicator, on two reserved
tags) and listens for :func:`grace` seconds, still testing its own call.
Each peer answers from its flight recorder
(:mod:`mpicoll.guard.recorder`): its last call, the call it is blocked in
and that call's collective. A peer that does not answer is unresponsive,
stopped or dead; one in no call, or at an earlier one, has not arrived.
The rank then raises :class:`~mpicoll.errors.CollectiveTimeoutError`
naming the call, the ranks that have not arrived, the ranks at other
calls and (hand-built algorithms) the messages still pending, or, with
``"abort"``, writes its trace file (:mod:`mpicoll.guard.dump`) and the
message and ends the job (``MPI_Abort``).

Costs of the polled path: a blocking call is an ``I`` call plus a test
loop (spinning for the first millisecond, then sleeping up to 1 ms
between tests, so a long call may return up to 1 ms late) and it is not
replayed.
"""

from __future__ import annotations

import sys
import time

import numpy as np
from mpi4py import MPI

from mpicoll.collectives import COLLECTIVES
from mpicoll.guard import dump
from mpicoll.errors import CollectiveTimeoutError, spans

ACTIONS = ("abort", "raise")
SPIN = 1e-3  # seconds of back-to-back tests before sleeping between them
NAMES = tuple(COLLECTIVES)  # a collective's number in a reply
#: seconds between writing why and aborting: the launcher forwards a rank's
#: output through a pipe, and an abort that kills the job first loses it
#: (seen with MPICH's hydra on a loaded machine: the job ended, stderr empty)
ABORT_GRACE = 0.5


class Watchdog:
    """Polled deadlines for one communicator's calls (``on_timeout=
    "raise"``, or below ``MPI_THREAD_MULTIPLE``): ``timeout`` seconds,
    then ``action``. ``comm`` is the private communicator, ``recorder``
    its :class:`~mpicoll.guard.recorder.Recorder`; ``tags`` the two tags
    reserved for queries and replies."""

    def __init__(self, comm, rank: int, timeout: float, action: str,
                 tags: tuple[int, int], recorder) -> None:
        self.asking = Asking(comm, rank, tags, recorder)
        self.timeout = timeout
        self.action = action

    def wait(self, test, seq: int, collective: str, where: dict,
             pending=None) -> None:
        """Call ``test()`` until it returns True, answering queries; past
        the deadline, ask the peers where they are and raise or abort.
        ``pending()`` (optional) lists the messages still outstanding."""
        asking = self.asking
        if _poll(test, time.monotonic() + self.timeout, asking.serve):
            return
        answers = asking.ask(seq, test, grace(self.timeout))
        if answers is None:  # it completed while we asked
            return
        error = asking.error(seq, self.timeout, answers,
                             pending() if pending else (), where)
        _fail(error, self.action)

    def complete(self, request, seq: int, collective: str,
                 where: dict) -> None:
        """Wait for an MPI request under the deadline."""
        self.wait(request.Test, seq, collective, where)


class Asking:
    """The where-are-you exchange of one communicator: answering the
    peers' queries from its recorder (:meth:`serve`), and asking them
    (:meth:`ask`). A query is the asker's call number (8 bytes); an
    answer ``(that number, the last call begun, the call blocked in or
    0, its collective's number)``."""

    def __init__(self, comm, rank: int, tags: tuple[int, int],
                 recorder) -> None:
        self.comm = comm
        self.rank = rank
        self.query_tag, self.reply_tag = tags
        self.recorder = recorder
        self.replies: list[MPI.Request] = []  # answers still in flight
        self.on_query = None  # called before answering (a trace dump)

    def here(self) -> tuple[int, int, int]:
        """``(last call begun, call blocked in or 0, its collective)``."""
        rec = self.recorder
        seq, blocked = rec.seq, rec.blocked
        note = rec.note_at(blocked or seq)
        number = NAMES.index(note[0]) if note is not None else -1
        return seq, blocked, number

    def serve(self) -> None:
        """Answer every query that has arrived (matched probes: the
        watch thread and a polled wait may serve at once)."""
        comm, status = self.comm, MPI.Status()
        asked = np.empty(1, np.int64)
        while True:
            message = comm.Improbe(MPI.ANY_SOURCE, self.query_tag, status)
            if message is None:
                break
            message.Recv(asked)
            if self.on_query is not None:
                self.on_query()
            answer = np.array([asked[0], *self.here()], np.int64)
            self.replies.append(comm.Isend(answer, status.Get_source(),
                                           self.reply_tag))
        if self.replies:
            self.replies = [r for r in self.replies if not r.Test()]

    def ask(self, seq: int, test, patience: float) -> dict | None:
        """Every peer's answer ``{rank: (last, blocked, collective)}``
        within ``patience`` seconds, or None if ``test()`` turned True
        meanwhile."""
        comm, size = self.comm, self.comm.Get_size()
        peers = [q for q in range(size) if q != self.rank]
        asked = np.array([seq], np.int64)
        for q in peers:
            comm.Isend(asked, q, self.query_tag).Free()
        answers: dict[int, tuple[int, int, int]] = {}
        status, answer = MPI.Status(), np.empty(4, np.int64)
        end = time.monotonic() + patience
        while len(answers) < len(peers) and time.monotonic() < end:
            if test():
                return None
            self.serve()
            while True:
                message = comm.Improbe(MPI.ANY_SOURCE, self.reply_tag,
                                       status)
                if message is None:
                    break
                message.Recv(answer)
                if answer[0] == seq:  # not a late answer to an old query
                    answers[status.Get_source()] = tuple(
                        int(x) for x in answer[1:])
            time.sleep(1e-3)
        return answers

    def error(self, seq: int, timeout: float, answers: dict, pending,
              where: dict) -> CollectiveTimeoutError:
        """The report of call ``seq`` after ``timeout`` seconds, from the
        peers' ``answers``."""
        size = self.comm.Get_size()
        missing, here, elsewhere = sorted_answers(
            self.rank, size, seq, self.here()[2], answers)
        parts = [f"call #{seq} not complete after {timeout:g} s"]
        late = [q for q in elsewhere if not elsewhere[q][1]
                and elsewhere[q][0] < seq]  # answered from before the call
        if missing or late:
            parts.append("not arrived: " + "; ".join(
                f"rank {q} (no answer: unresponsive, stopped or dead)"
                if q in missing else f"rank {q} ({_call(*elsewhere[q])})"
                for q in sorted(missing + late)))
        others = sorted(q for q in elsewhere if q not in late)
        if others:
            parts.append("at other calls: " + "; ".join(
                f"rank {q} {_call(*elsewhere[q])}" for q in others))
        parts.append(f"waiting in it: {_ranks(here)}")
        if pending:
            parts.append("still pending here: " + ", ".join(pending))
        return CollectiveTimeoutError(
            "; ".join(parts), pending=pending, missing=sorted(missing + late),
            seq=seq, **where)


def sorted_answers(rank: int, size: int, seq: int, number: int,
                   answers: dict) -> tuple[list, list, dict]:
    """``(missing, here, elsewhere)``: the ranks that did not answer, the
    ranks in call ``seq`` (collective ``number``) as this one is, and the
    others' answers."""
    missing = [q for q in range(size) if q != rank and q not in answers]
    here = [q for q in range(size) if q == rank or (
        answers.get(q, (0, 0, 0))[1] == seq and answers[q][2] == number)]
    elsewhere = {q: a for q, a in answers.items() if q not in here}
    return missing, here, elsewhere


def grace(timeout: float) -> float:
    """Seconds a rank listens for its peers' answers: a quarter of the
    timeout, within 0.5 s to 3 s (the watch thread answers within its
    period, :func:`mpicoll.guard.deadline.period`, at most 1 s)."""
    return min(3.0, max(0.5, timeout / 4))


def bounded(request, what: str, *, timeout: float, action: str,
            where: dict) -> None:
    """Wait for ``request``, a step mpicoll takes on its own before any
    call can be asked about (``what``: creating its private communicator,
    the first collective on a communicator), at most ``timeout`` seconds,
    then ``action`` as :meth:`Watchdog.wait` does. No peer can be asked
    where it is yet, so the report says that a rank of the communicator
    has not arrived, not which one."""
    if _poll(request.Test, time.monotonic() + timeout):
        return
    _fail(CollectiveTimeoutError(
        f"{what} not complete after {timeout:g} s: a rank of the "
        f"communicator has not arrived (not at its first collective call "
        f"on it: busy, blocked elsewhere, stopped or dead)", seq=0,
        **where), action)


def _poll(test, deadline: float, serve=None) -> bool:
    """Call ``test()`` (and ``serve()``) until it returns True (True) or
    ``deadline`` passes (False): back to back for :data:`SPIN` seconds,
    then sleeping between tests, from 10 µs up to 1 ms."""
    start = time.monotonic()
    pause = 1e-5
    while not test():
        if serve is not None:
            serve()
        now = time.monotonic()
        if now >= deadline:
            return False
        if now - start > SPIN:
            time.sleep(pause)
            pause = min(pause * 2, 1e-3)
    return True


def _fail(error: CollectiveTimeoutError, action: str):
    """Raise ``error``, or with ``action`` ``"abort"`` write it to stderr
    and abort the job."""
    if action == "abort":
        dump.dump("abort")
        sys.stderr.write(f"{error}\nmpicoll: aborting the job "
                         f"(MPICOLL_ON_TIMEOUT=raise leaves it to the "
                         f"program)\n")
        sys.stderr.flush()
        time.sleep(ABORT_GRACE)
        MPI.COMM_WORLD.Abort(1)
    raise error


def _ranks(ranks: list[int]) -> str:
    return f"{'ranks' if len(ranks) > 1 else 'rank'} {spans(ranks)}"


def _call(seq: int, blocked: int, number: int) -> str:
    """Where a peer said it is, in words."""
    name = NAMES[number] if 0 <= number < len(NAMES) else "a collective"
    if blocked:
        return f"in call #{blocked} ({name})"
    if seq == 0:
        return "in no collective, none made yet"
    return f"in no collective, its last call #{seq} {name}"
