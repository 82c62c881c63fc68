"""Sampled peers: a few messages of a round stand for many.

The linear algorithms post all their messages in one round: the linear
all-to-all sends ``p - 1`` blocks from every rank at once, the linear
broadcast ``p - 1`` copies from the root. At 65,536 ranks the all-to-all's
round is 4.3·10⁹ flows, which neither cutting rounds
(:func:`mpicoll.sim.simgrid.program.compress`, ``sample_rounds``) nor a symmetry
reduces: there is one round, and every rank has all of them.

:func:`sample_peers` keeps the messages of ``n`` offsets only: the offsets
``1 .. p-1`` (a message from rank ``a`` to ``b`` has offset ``b - a mod
p``) are cut into ``n`` strata of equal width, one offset is drawn at
random in each (seeded), and a kept message carries its bytes times its
stratum's width, so every rank sends and receives the bytes it did, over
``n`` flows instead of ``p - 1``. Sender and receiver agree on what is kept
(the offset is the message's), so every kept send still meets its receive,
and a relabelling by shift (rank ``r``'s peers are rank 0's plus ``r``)
maps a sampled schedule to a sampled schedule: the sample can be taken on
the bases of :func:`mpicoll.sim.simgrid.program.symmetric_sigs` before the other
ranks are generated (``n p`` flows built, not ``p²``).

An approximation: the links a left-out offset's flows take are charged the
bytes of the drawn offset's, so a link's load is estimated, not counted
(exact where every offset's route loads the links alike, as on ``flat``),
and ``n`` flows share a link where ``p - 1`` did; docs/simulation.md
measures how far the time moves against the exact run. SimGrid also caps
each flow's rate by its TCP window over the path's round trip
(``network/TCP-gamma``, 4 MiB / (2 × latency) by default): a sampled
flow carrying many offsets' bytes over hundreds of links is held back
where the flows it stands for were not (the linear broadcast on
``ring:65536``, ten times too slow). Only for schedules whose every rank
has its messages in one round: in a schedule of several rounds a dropped
offset is a round's only message (a ring's neighbour), not one of many
alike.
"""

from __future__ import annotations

import random


def peer_offsets(size: int, n: int, seed: int = 0) -> dict[int, int]:
    """``{offset: weight}``: ``n`` offsets of ``1 .. size-1``, one drawn in
    each of ``n`` strata of equal width (widths differ by at most one), and
    each weighted by its stratum's width; every offset, weight 1, when ``n
    >= size - 1``. ValueError for ``n < 1``."""
    if n < 1:
        raise ValueError(f"sampled peers must be >= 1, not {n}")
    n = min(n, size - 1)
    rng = random.Random(seed)
    edges = [1 + (size - 1) * i // n for i in range(n + 1)]
    return {rng.randrange(lo, hi): hi - lo for lo, hi in zip(edges, edges[1:])}


def sample_peers(sigs: list[tuple], size: int, n: int,
                 seed: int = 0) -> list[tuple]:
    """``sigs`` (rank ``i``'s rounds of :class:`mpicoll.sim.simgrid.program.Sig`
    at index ``i``: every rank's, or the bases of a shift symmetry) with
    only the messages of :func:`peer_offsets` kept, each carrying its bytes
    times its offset's weight. Raises
    ValueError naming the rank where a rank has messages in more than one
    round (see the module docstring)."""
    weight = peer_offsets(size, n, seed)
    sampled = []
    for rank, rounds in enumerate(sigs):
        busy = [k for k, rnd in enumerate(rounds) if rnd.sends or rnd.recvs]
        if len(busy) > 1:
            raise ValueError(
                f"rank {rank} has messages in {len(busy)} rounds: sampled "
                "peers stand for the many messages of one round (the linear "
                "algorithms'), not for a round's only one")
        sampled.append(tuple(
            rnd._replace(
                sends=tuple((q, b * weight[(q - rank) % size])
                            for q, b in rnd.sends if (q - rank) % size in weight),
                recvs=tuple((q, b * weight[(rank - q) % size])
                            for q, b in rnd.recvs if (rank - q) % size in weight))
            for rnd in rounds))
    return sampled
