"""Count agreements: the v-collectives' counts seen alike by every rank.

A mixin of :class:`~mpicoll.engine.engine.Engine`: it expects ``ctx``,
``check``, ``checker``, ``active``, ``bounded`` and ``where``.
"""

from __future__ import annotations

from mpicoll.errors import InvalidArgumentError
from mpicoll.guard import exchange


class Agreeing:
    """:meth:`agree` and :meth:`disagree` (a mixin; see the module
    docstring)."""

    def agree(self, collective: str, mine, theirs_from=None, root: int = 0):
        """Every rank's ``mine`` and, from ``root``, ``theirs_from``
        (counts: :func:`~mpicoll.guard.exchange.allgather_counts`): one
        small allgather on the private communicator, so that all ranks see
        the same counts and reach the same verdict on them (a count error
        raised on one rank alone would leave the others waiting in the
        collective)."""
        active = self.active
        if self.check and active is not None:
            self.checker.verify(active, {"stage": "counts",
                                         "collective": collective}, None)
        with self.ctx.recorder.step(f"agreeing on the counts of "
                                    f"{collective}"):
            rows = exchange.allgather_counts(self.ctx.comm, mine,
                                             theirs_from, self.bounded)
        if active is not None:  # messages moved: a later error must meet
            active.open = True  # the peers at the collective's exchange
        self.disagree(collective, [
            f"rank {q} has more counts than the communicator has ranks"
            for q, row in enumerate(rows) if row is None])
        return [m for m, _ in rows], rows[root][1]

    def disagree(self, collective: str, bad) -> None:
        """Raise, on every rank, the count disagreements ``bad`` found."""
        if bad:
            raise InvalidArgumentError(
                "counts disagree between ranks: " + "; ".join(bad),
                **self.where(collective))
