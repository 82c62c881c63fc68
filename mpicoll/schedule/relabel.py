"""Schedules that are one rank's relabelled: finding the relabelling.

Many schedules are one schedule seen from every rank: a ring's rank ``r``
sends to ``r + 1`` where rank 0 sends to 1, recursive doubling's rank
``r`` talks to ``r xor 2^k`` where rank 0 talks to ``2^k``. Then rank 0's
rounds, with every peer relabelled, are every rank's, and a cost model or
a network simulator needs to build only rank 0's. Schedules built for
nodes of ``L`` ranks in blocks (the hierarchical ones) repeat from node to
node instead: rank ``r``'s are rank ``r % L``'s relabelled by the offset
``r - r % L``, and node 0's ``L`` schedules stand for all.

Rounds here are any tuples whose first two fields are the round's sends
and receives as ``(peer, n)`` pairs (the rest is kept as it is): the
analytic model's (:mod:`mpicoll.model.cost`) and the network simulator's
(:class:`mpicoll.sim.simgrid.program.Sig`). Whether a relabelling fits is
checked on sampled ranks, which the caller picks: sampling checks it, it
does not prove it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

#: name: (to the base's frame, back to rank r's), for a peer of rank ``r``
#: among ``p``, ``o`` the offset of ``r`` from its base (a multiple of the
#: period)
RELABEL: dict[str, tuple[Callable[[int, int, int], int], ...]] = {
    "shift": (lambda peer, o, p: (peer - o) % p,
              lambda rel, o, p: (rel + o) % p),
    "xor": (lambda peer, o, p: peer ^ o, lambda rel, o, p: rel ^ o),
}


def relabel(rounds: tuple, f: Callable[[int, int, int], int], offset: int,
            size: int) -> tuple:
    """``rounds`` with every peer ``q`` of their sends and receives
    replaced by ``f(q, offset, size)``; each round keeps its type."""
    out = []
    for rnd in rounds:
        parts = (tuple((f(q, offset, size), n) for q, n in rnd[0]),
                 tuple((f(q, offset, size), n) for q, n in rnd[1]), *rnd[2:])
        out.append(rnd._make(parts) if hasattr(rnd, "_make") else parts)
    return tuple(out)


def relabelling(name: str) -> tuple[Callable, Callable, int]:
    """``(to_base, back, period)`` of a name :func:`find_relabelling` gives
    (``"shift"``, ``"xor"``, ``"shift/8"``, ...; a ``"+..."`` suffix, a
    caller's note, is ignored)."""
    kind, _, period = name.partition("+")[0].partition("/")
    return (*RELABEL[kind], int(period or 1))


def find_relabelling(rounds_of: Callable[[int], tuple], size: int,
                     picks: Iterable[int], period: int = 1):
    """``(name, bases)``: the first relabelling under which every rank of
    ``picks`` has its base's rounds (``rounds_of(r)`` gives rank r's), and
    the bases' rounds; None when none does. Tried in order: ``"shift"``
    and ``"xor"`` of ranks (one base, rank 0; xor on a power of two only),
    then, with ``period`` > 1 dividing ``size``, ``"shift/L"`` and
    ``"xor/L"`` (rank ``r``'s base is ``r % L``, relabelled by ``r - r %
    L``; ``L`` bases)."""
    picks = sorted(set(picks))
    periods = [1] + [period] * (period > 1 and size % period == 0)
    for k in periods:
        for kind, (to_base, _) in RELABEL.items():
            if kind == "xor" and (size & (size - 1) or k & (k - 1)):
                continue
            if all(relabel(rounds_of(r), to_base, r - r % k, size)
                   == rounds_of(r % k) for r in picks if r >= k):
                name = kind + f"/{k}" * (k > 1)
                return name, tuple(rounds_of(r) for r in range(k))
    return None
