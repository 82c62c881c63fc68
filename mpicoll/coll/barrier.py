"""Barrier: no rank leaves before every rank has entered.

Barrier schedules move no data: every message is the zero-length
:data:`~mpicoll.schedule.core.SYNC` span, which the builder keeps. Builders
get ``count`` 0.
"""

from __future__ import annotations

from mpicoll.coll.registry import register
from mpicoll.schedule.core import SYNC, Schedule, ScheduleBuilder
from mpicoll.topo import binomial_children, binomial_parent


@register("barrier", "dissemination")
def dissemination(rank, size, count) -> Schedule:
    """Dissemination barrier: ``ceil(log2 p)`` rounds of shifted exchanges.

    In round ``k`` rank ``r`` signals ``r + 2^k`` and waits for ``r - 2^k``
    (mod p); after round ``k`` a rank knows that ``2^(k+1)`` ranks have
    entered. Any p.

    Rounds: ``ceil(log2 p)``, one send and one receive each.
    Bytes sent: none (zero-length messages).
    Temp memory: none.
    Reference: Hensgen, Finkel & Manber 1988; MPICH ``barrier_intra_dissemination``.

    Trace, p=4: round 1: r signals r+1; round 2: r signals r+2.
    """
    b = ScheduleBuilder()
    dist = 1
    while dist < size:
        b.exchange(sends=[((rank + dist) % size, SYNC)],
                   recvs=[((rank - dist) % size, SYNC)])
        dist <<= 1
    return b.build()


@register("barrier", "binomial")
def binomial(rank, size, count) -> Schedule:
    """Binomial barrier: arrivals gather up a tree to rank 0, a release comes down.

    A rank waits for all its children (one round), signals its parent and
    waits for the release in the same round, then releases its children.
    Any p.

    Rounds: ``2 floor(log2 p)`` along the deepest path (up the tree and
    down again); 1 on a leaf, 3 on an inner rank, 2 on rank 0.
    Bytes sent: none (2 zero-length messages per tree edge).
    Temp memory: none.
    Reference: MPICH's binomial gather/bcast barrier; Thakur, Rabenseifner
    & Gropp 2005.

    Trace, p=4: 1 and 3 signal 0 and 2; 2 then signals 0; 0 releases 2 and
    1; 2 releases 3.
    """
    b = ScheduleBuilder()
    children = binomial_children(rank, size)
    parent = binomial_parent(rank)
    b.exchange(recvs=[(child, SYNC) for child in children])
    if parent is not None:
        b.exchange(sends=[(parent, SYNC)], recvs=[(parent, SYNC)])
    b.exchange(sends=[(child, SYNC) for child in reversed(children)])
    return b.build()
