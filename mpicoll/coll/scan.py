"""Scan and exscan: prefix reductions over the ranks.

Scan (inclusive): rank ``r`` ends with ``x0 op x1 op ... op xr``. Exscan
(exclusive): rank ``r > 0`` ends with ``x0 op ... op x(r-1)``; rank 0's
``recv`` is left untouched (MPI leaves it undefined).

Buffers: ``send`` and ``recv`` of ``count`` elements each; an in-place call
makes them the same memory, so no schedule here writes ``recv`` before its
last read of ``send`` (three-operand reductions such as ``recv = incoming
op send`` are alias-safe and copy-free). Both algorithms keep rank order:
what arrives always covers lower ranks and is the left operand, so
non-commutative ops fold exactly as ``x0 op x1 op ...``.
"""

from __future__ import annotations

from mpicoll.coll.registry import register
from mpicoll.schedule.core import Schedule, ScheduleBuilder, Span


@register("scan", "linear")
def scan_linear(rank, size, count, *, commutative) -> Schedule:
    """A chain: rank ``r`` receives the prefix from ``r-1``, combines, sends on.

    Rank ``r`` receives ``x0 op ... op x(r-1)`` from ``r-1`` into scratch,
    writes ``incoming op send`` into ``recv`` and sends that to ``r+1``;
    rank 0 sends ``send`` as it is and copies it into ``recv``. The
    simplest scan: latency ``(p-1) α``, but a rank may leave as soon as its
    own part is done. Any op, any p.

    Rounds: ``p-1`` along the chain, one message after another; 2 per inner
    rank (receive, then send).
    Bytes sent per rank: ``n`` (none by the last).
    Temp memory: ``count`` elements on ranks above 0.
    Reference: Open MPI ``scan_intra_linear`` (coll/base).

    Trace, p=4: 0 sends ``x0`` to 1; 1 forms ``x0 op x1`` and sends it to
    2; 2 forms ``x0 op x1 op x2`` and sends it to 3, which forms the whole
    fold.
    """
    b = ScheduleBuilder()
    src, out = Span("send", 0, count), Span("recv", 0, count)
    if rank == 0:
        b.exchange(sends=[(1, src)] if size > 1 else [])
        b.copy(src, out)
        return b.build()
    incoming = b.alloc(count)
    b.exchange(recvs=[(rank - 1, incoming)])
    b.reduce(incoming, src, out)
    if rank + 1 < size:
        b.exchange(sends=[(rank + 1, out)])
    return b.build()


@register("exscan", "linear")
def exscan_linear(rank, size, count, *, commutative) -> Schedule:
    """A chain: rank ``r`` receives the prefix from ``r-1``, keeps it, sends on.

    Rank ``r`` receives ``e = x0 op ... op x(r-1)`` from ``r-1`` into
    scratch, writes ``e op send`` into ``recv`` and sends that to ``r+1``,
    then copies ``e`` into ``recv`` (the one copy an in-place call cannot
    avoid: ``e`` cannot land in ``recv`` while ``send``, its memory, is
    still to be read). The last rank receives straight into ``recv``; rank
    0 sends ``send`` as it is. Any op, any p.

    Rounds: ``p-1`` along the chain, one message after another; 2 per inner
    rank.
    Bytes sent per rank: ``n`` (none by the last).
    Temp memory: ``count`` elements on inner ranks.
    Reference: Open MPI ``exscan_intra_linear`` (coll/base).

    Trace, p=4: 0 sends ``x0`` to 1; 1 keeps ``x0`` and sends ``x0 op x1``
    to 2; 2 keeps that and sends ``x0 op x1 op x2`` to 3, which keeps it.
    """
    b = ScheduleBuilder()
    src, out = Span("send", 0, count), Span("recv", 0, count)
    if rank == 0:
        b.exchange(sends=[(1, src)] if size > 1 else [])
    elif rank == size - 1:
        b.exchange(recvs=[(rank - 1, out)])
    else:
        incoming = b.alloc(count)
        b.exchange(recvs=[(rank - 1, incoming)])
        b.reduce(incoming, src, out)
        b.exchange(sends=[(rank + 1, out)])
        b.copy(incoming, out)
    return b.build()


@register("scan", "recursive_doubling")
def scan_recursive_doubling(rank, size, count, *, commutative) -> Schedule:
    """Recursive doubling: ``ceil(log2 p)`` rounds of prepending lower partials.

    Rank ``r``'s partial result covers a contiguous range of ranks ending at
    ``r``. In the round of distance ``d = 1, 2, 4, ...`` rank ``r`` sends it
    to ``r+d`` and receives the partial of ``r-d``, whose range ends just
    below its own, and prepends it: ``partial = incoming op partial``, into
    ``recv``. After the last round ``recv`` covers ``0 .. r``. The first
    send goes straight from ``send``; rank 0, which never receives, copies
    ``send`` into ``recv``. Any op (rank order kept), any p.

    Rounds: ``ceil(log2 p)`` (Hillis–Steele / Kogge–Stone prefix).
    Bytes sent per rank: up to ``n ceil(log2 p)``.
    Temp memory: ``count`` elements on ranks above 0.
    Reference: Hillis & Steele 1986; MPICH ``scan_intra_recursive_doubling``
    and Open MPI ``scan_intra_recursivedoubling`` take the same rounds with
    ``r XOR d`` partners (both ways, so a non-commutative op costs them a
    copy per round).

    Trace, p=4: d=1: 0→1, 1→2, 2→3: 1 holds ``x0 op x1``, 2 ``x1 op x2``, 3
    ``x2 op x3``; d=2: 0→2 (``x0``), 1→3 (``x0 op x1``): 2 holds ``x0 op x1
    op x2``, 3 the whole fold.
    """
    b = ScheduleBuilder()
    mine, out = Span("send", 0, count), Span("recv", 0, count)
    incoming = b.alloc(count) if rank else None
    d = 1
    while d < size:
        b.exchange(sends=[(rank + d, mine)] if rank + d < size else [],
                   recvs=[(rank - d, incoming)] if rank >= d else [])
        if rank >= d:
            b.reduce(incoming, mine, out)
            mine = out
        d *= 2
    b.copy(mine, out)
    return b.build()


@register("exscan", "recursive_doubling")
def exscan_recursive_doubling(rank, size, count, *, commutative) -> Schedule:
    """Recursive doubling: ``ceil(log2 p)`` rounds; passes a partial on, keeps a prefix.

    As :func:`scan_recursive_doubling`: in the round of distance ``d`` rank
    ``r`` sends its partial (ranks up to ``r``) to ``r+d`` and receives that
    of ``r-d``, which it prepends both to its partial and to its exclusive
    prefix (ranks up to ``r-1``; the first message starts it). The prefix
    ends in ``recv``; the partial lives in scratch, and only while a later
    round sends it. Messages land: the first in scratch, since ``send``
    (``recv`` itself in place) is still to be read (the last rank, which
    sends nothing, takes it straight into ``recv``); the second in ``recv``,
    while the prefix still sits in that scratch; later ones in scratch
    again, each reduced into ``recv``. So only rank 1, whose whole prefix
    is that first message ``x0``, copies it into ``recv``. Any op (rank
    order kept), any p.

    Rounds: ``ceil(log2 p)``.
    Bytes sent per rank: up to ``n ceil(log2 p)``.
    Temp memory: ``2 count`` elements (landing, partial) on ranks
    ``1 .. p-3``, ``count`` on the last two (none for p=2).
    Reference: Hillis & Steele 1986; MPICH ``exscan_intra_recursive_doubling``
    (``r XOR d`` partners, the partial kept apart likewise).

    Trace, p=4: d=1: 0→1 (``x0``), 1→2 (``x1``), 2→3 (``x2``): 1 keeps
    ``x0`` and forms the partial ``x0 op x1``, 2 keeps ``x1``, 3 ``x2``;
    d=2: 0→2 (``x0``), 1→3 (``x0 op x1``): 2 ends with ``x0 op x1``, 3
    with ``x0 op x1 op x2``.
    """
    b = ScheduleBuilder()
    out = Span("recv", 0, count)
    mine, prefix = Span("send", 0, count), None  # partial, exclusive prefix
    landing = b.alloc(count) if rank and size > 2 else None
    partial = b.alloc(count) if 0 < rank < size - 2 else None
    d = 1
    while d < size:
        if rank < d:
            land = None
        elif prefix is None:  # the first message: the prefix starts as it
            land = out if rank == size - 1 else landing
        else:  # anywhere but the prefix (and the partial, being sent)
            land = landing if prefix == out else out
        b.exchange(sends=[(rank + d, mine)] if rank + d < size else [],
                   recvs=[(rank - d, land)] if land is not None else [])
        if land is not None:
            if rank + 2 * d < size:  # a later round sends the partial;
                b.reduce(land, mine, partial)  # reads send before recv changes
                mine = partial
            if prefix is not None:
                b.reduce(land, prefix, out)
            prefix = land if prefix is None else out
        d *= 2
    if prefix is not None:
        b.copy(prefix, out)
    return b.build()
