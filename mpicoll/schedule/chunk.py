"""Splitting messages that are too long for one MPI call.

MPI's classic point-to-point calls (``MPI_Send``, ``MPI_Isend``,
``MPI_Recv``, ...) take the count as a C ``int``, so one message can carry
at most ``2**31 - 1`` elements of its datatype; a larger count overflows
inside the library (often as a negative count, a hang or a crash, not as a
clean error). The executor moves every message as bytes (``uint8`` views,
see :mod:`mpicoll.engine.executor`), so the limit applies to *bytes*:
any message over ``2**31 - 1`` bytes (2 GiB) is at risk. MPI-4 added
large-count ``MPI_Send_c``-style calls taking ``MPI_Count``, and mpi4py 4
uses them when the library provides them, but not every library does, so
the MPI layer does not count on them: it splits long messages itself.

:func:`split_messages` replaces every send and receive longer than the limit
by consecutive chunks of at most ``limit`` elements, in order, in the same
round. Both sides of a message derive the same span lengths, so they split
identically, and messages between one pair of ranks match in posting order,
so chunk ``i`` of a send meets chunk ``i`` of its receive. Local steps are
unchanged.

Cost: one more message per extra chunk (a few microseconds each, against
seconds of transfer for 2 GiB); a schedule with no message above the limit
is returned as is, and :class:`mpicoll.engine.context.Context` only asks when a
buffer is large enough to hold such a message, so ordinary calls pay
nothing.
"""

from __future__ import annotations

from mpicoll.schedule.core import Schedule

#: The most bytes one message may carry: MPI's ``int`` count limit on a
#: ``uint8`` (MPI_BYTE) message.
MAX_MESSAGE_BYTES = 2**31 - 1


def element_limit(itemsize: int) -> int:
    """The most elements of ``itemsize`` bytes one message may carry."""
    return MAX_MESSAGE_BYTES // itemsize


def split_messages(schedule: Schedule, limit: int) -> Schedule:
    """``schedule`` with every message longer than ``limit`` elements split
    into consecutive chunks of ``limit`` elements (the last one shorter).

    Messages no longer than ``limit`` (including zero-length ones on
    :data:`~mpicoll.schedule.core.SYNC`) stay as they are; if there are no
    others, ``schedule`` itself is returned.
    """
    if limit < 1:
        raise ValueError(f"message limit must be positive, got {limit}")
    if all(len(m.span) <= limit
           for rnd in schedule.rounds for m in (*rnd.sends, *rnd.recvs)):
        return schedule
    return schedule._replace(rounds=tuple(
        rnd._replace(sends=_split(rnd.sends, limit),
                     recvs=_split(rnd.recvs, limit))
        for rnd in schedule.rounds))


def _split(messages: tuple, limit: int) -> tuple:
    """``messages`` (all Sends or all Recvs) with long ones chunked in place."""
    out = []
    for m in messages:
        n = len(m.span)
        if n <= limit:
            out.append(m)
        else:
            out.extend(type(m)(m.peer, m.span.sub(i, min(i + limit, n)))
                       for i in range(0, n, limit))
    return tuple(out)
