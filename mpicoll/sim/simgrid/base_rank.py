"""Which ranks' rounds stand for all: shifts and xors of ranks, sampled.

Building every rank's schedule at 65,536 ranks costs minutes and
gigabytes; where every rank's rounds are one base rank's with peers
relabelled (a shift ``peer - rank mod p``, an xor ``peer ^ rank``, or
either repeating from node to node, :mod:`mpicoll.schedule.relabel`),
one schedule stands for all. :func:`find_symmetry` finds the relabelling
from a sample of ranks (a check on the sample, not a proof for the
rest), :func:`peers` applies it, and :func:`merged` is the approximation
it falls back on where only the cutting of a rank's bytes to one peer
into messages differs (:mod:`mpicoll.sim.simgrid.program`'s docstring).
"""

from __future__ import annotations

import random
import warnings
from typing import TYPE_CHECKING, Callable

from mpicoll.schedule.relabel import find_relabelling, relabelling

if TYPE_CHECKING:
    from mpicoll.sim.simgrid.program import Sig


def merged(rounds: tuple[Sig, ...]) -> tuple[Sig, ...]:
    """``rounds`` with each round's messages to one peer merged into one of
    their bytes, and its messages from one peer likewise, each peer where
    its first message was."""
    def merge(messages) -> tuple[tuple[int, int], ...]:
        total: dict[int, int] = {}
        for peer, n in messages:
            total[peer] = total.get(peer, 0) + n
        return tuple(total.items())

    return tuple(rnd._replace(sends=merge(rnd.sends), recvs=merge(rnd.recvs))
                 for rnd in rounds)


def find_symmetry(rank_sig: Callable[[int], tuple[Sig, ...]], size: int,
                  samples: int = 8, seed: int = 0,
                  period: int = 1) -> tuple[str, tuple]:
    """``(name, bases)``: the relabelling under which ``samples`` sampled
    ranks' schedules (and ranks 1, ``period``, size - 1 and size // 2) are
    their class's base's, and the bases' rounds. ``"shift"``: peer ``q`` of
    rank 0 is ``r + q`` of rank ``r``; ``"xor"``: ``r ^ q``; one base, rank
    0. Failing both, the same with a period (``"shift/8"``, ``"xor/8"``):
    rank ``r``'s base is rank ``r % period`` and the offset ``r - r %
    period`` relabels, which fits schedules that repeat from node to node
    (ranks in blocks of ``period`` per node; ``period`` must divide
    ``size``, and be a power of two for xor); ``period`` bases. Failing
    all, the same with every schedule's messages per peer :func:`merged`
    (the name then ends in ``"+merged"``, the rounds are merged, and a
    UserWarning says so: the module docstring). Raises ValueError when
    nothing fits."""
    rng = random.Random(seed)
    picks = {1, period, size - 1, size // 2}
    picks.update(rng.randrange(size) for _ in range(samples))
    built: dict[int, tuple[Sig, ...]] = {}

    def rounds(r: int) -> tuple[Sig, ...]:
        if r not in built:
            built[r] = rank_sig(r)
        return built[r]

    for merge in (False, True):
        found = find_relabelling(
            (lambda r: merged(rounds(r))) if merge else rounds, size, picks,
            period)
        if found is not None:
            name, bases = found
            if merge:
                warnings.warn(
                    f"the schedules of {size} ranks are symmetric under a "
                    f"{name} only with each round's messages per peer "
                    "merged: an approximation (docs/simulation.md)",
                    stacklevel=2)
                name += "+merged"
            return name, bases
    raise ValueError(
        f"the schedules of {size} ranks are not symmetric under a shift "
        "or xor of ranks" + f" or of nodes of {period}" * (period > 1) +
        " (try a count divisible by the rank count, or the exact "
        "simulation)")


def peers(name: str, relative: int, ranks, size: int):
    """The peers of ``ranks`` (a NumPy array of ranks among ``size``) that
    stand for their base's peer ``relative`` under the relabelling ``name``
    (:func:`find_symmetry`'s)."""
    back, period = relabelling(name)[1:]
    return back(relative, ranks - ranks % period, size)
